"""The harnesses' ports: distinct, free on every host asked for, and outside the kernel's
ephemeral range, where outgoing connections take their ports (one such connection took a
gateway's port between its choice and its bind, in CI)."""

from __future__ import annotations

import socket

from streamanon.harness.kafka_broker import LOOPBACK_HOSTS
from streamanon.harness.ports import _EPHEMERAL, free_port, free_ports


def test_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    ports = free_ports(40)
    assert len(set(ports)) == 40
    assert not any(_EPHEMERAL[0] <= p <= _EPHEMERAL[1] for p in ports)
    for p in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))  # free: it binds


def test_outgoing_connections_never_take_them() -> None:
    """Connections' local ports come from the ephemeral range: 200 of them never land on a
    port handed out."""
    server = socket.create_server(("127.0.0.1", 0))
    ports = set(free_ports(20))
    taken = []
    try:
        for _ in range(200):
            with socket.create_connection(server.getsockname(), timeout=5) as c:
                taken.append(c.getsockname()[1])
                server.accept()[0].close()
    finally:
        server.close()
    assert len(taken) == 200 and not ports & set(taken)


def test_a_port_taken_on_one_host_is_not_handed_out() -> None:
    port = free_port(LOOPBACK_HOSTS)
    for host in LOOPBACK_HOSTS:
        with socket.socket() as s:
            s.bind((host, port))
