"""deZent over the network: the daemons around the sans-I/O protocol core.

* :mod:`.pki`: a private CA (its key kept apart), certificates with roles for the gateways, the
  CE, ``monitor`` and every sensor node, issue, revocation (CRL);
* :mod:`.tls`: mutual-TLS contexts, peer identities, the revocation list;
* :mod:`.framing`: length-prefixed binary frames (with a maximum size) and the frame kinds;
* :mod:`.config`: the TOML configurations of the daemons;
* :mod:`.gateway`: the gateway daemon (clock and wiring) over :mod:`.session` (ring sessions and
  the admission rule, pure), :mod:`.intake` (the authenticated sensor port), :mod:`.peers`
  (ring links), :mod:`.ce_client` (outbox delivery) and :mod:`.outbox` (also the mix's
  tuples until their batch is acknowledged);
* :mod:`.ce`: the central entity daemon (validation, ack after commit, mix batches opened with
  its ``ce-mix.key``) over :mod:`.store`
  (:mod:`.store_sqlite`, :mod:`.store_postgres`);
* :mod:`.metrics`: Prometheus metrics of both daemons (mutual TLS);
* :mod:`.sensors`: the replay of a simulated district as authenticated sensor nodes;
* :mod:`.cluster`: a whole local deployment as separate processes on loopback, and its status;
* :mod:`.pg_server`: a throw-away PostgreSQL server for the tests and the benchmark.

The protocol core (:mod:`streamanon.dezent.protocol`) runs unchanged inside the gateway.
"""
