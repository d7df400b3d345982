"""deZent over the network: the daemons around the sans-I/O protocol core.

The gateway and the central entity (CE) run :mod:`streamanon.dezent.protocol` unchanged,
over mutual TLS with a private CA; the daemons never import the simulation.

Design: docs/design/dezent-network.md
"""
