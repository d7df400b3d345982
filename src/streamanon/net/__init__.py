"""deZent over the network: the daemons around the sans-I/O protocol core.

* :mod:`.pki`: a private CA (its key kept apart), certificates with roles for the gateways, the
  CE, ``monitor`` and every sensor node, issue, revocation (CRL);
* :mod:`.tls`: mutual-TLS contexts, peer identities, the revocation list;
* :mod:`.framing`: length-prefixed binary frames (with a maximum size) and the frame kinds
  (a ring frame is a :class:`~.framing.RingFrame`);
* :mod:`.config`: the TOML configurations of the daemons;
* :mod:`.gateway`: the gateway daemon (clock and wiring) over :mod:`.session` (ring sessions and
  the admission rule, pure), :mod:`.intake` (the authenticated sensor port), :mod:`.peers`
  (ring links), :mod:`.ce_client` (outbox delivery) and :mod:`.outbox` (also the mix's
  tuples until their batch is acknowledged);
* :mod:`.ce`: the central entity daemon (validation, ack after commit, mix batches opened with
  its ``ce-mix.key``) over :mod:`.store` (the contract in :mod:`.store.base`, backends
  :mod:`.store.sqlite` and :mod:`.store.postgres`);
* :mod:`.metrics`: Prometheus metrics of both daemons (mutual TLS).

The protocol core (:mod:`streamanon.dezent.protocol`) runs unchanged inside the gateway. The
daemons never import the simulation (:mod:`streamanon.sim`): what both need of the domain (the
cycle and bucket grids) is :mod:`streamanon.dezent.grid`. The local harnesses around them (a
whole site on loopback, the sensor replay of a simulated district, a throw-away PostgreSQL
server) are :mod:`streamanon.harness.local_site`, :mod:`streamanon.harness.sensor_replay` and
:mod:`streamanon.harness.pg_server`.
"""
