"""deZent over the network: the daemons around the sans-I/O protocol core.

* :mod:`.pki`: a private CA and one certificate per gateway and for the central entity;
* :mod:`.framing`: length-prefixed binary frames (with a maximum size) and the frame kinds;
* :mod:`.tls`: mutual-TLS contexts and peer identities;
* :mod:`.config`: the TOML configurations of the daemons;
* :mod:`.gateway`: the gateway daemon (sensor input, ring rounds over mutual TLS, outbox);
* :mod:`.ce`: the central entity daemon and its SQLite store;
* :mod:`.sensors`: the sensor line protocol and the replay of a simulated district;
* :mod:`.cluster`: a whole local deployment as separate processes on loopback.

The protocol core (:mod:`streamanon.dezent.protocol`) runs unchanged inside the gateway.
"""
