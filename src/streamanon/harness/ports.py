"""Free TCP ports for the local harnesses: a site's daemons, a broker, a Flink cluster.

A port found free is released before its daemon binds it, so another socket may take it
meanwhile. The kernel gives every outgoing connection (and every ``bind(port 0)``) a port of
its ephemeral range, and a site's daemons connect to each other while the later ones are still
starting: a port of that range, found free a moment ago, was seen taken by such a connection
(``[Errno 98] Address already in use`` at a gateway's start, CI). The ports handed out here
are taken below that range, where the kernel never picks one by itself, at random (two
harnesses starting at once rarely draw the same), each checked free on every host asked for.

>>> a, b = free_ports(2)
>>> a != b and not _EPHEMERAL[0] <= a <= _EPHEMERAL[1]
True
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable
from pathlib import Path


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's file; its default elsewhere)."""
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


_EPHEMERAL = _ephemeral_range()
#: where the ports are drawn from: above the well-known and common service ports, below the
#: ephemeral range (or above it, when the range starts too low to leave room below)
_POOL = ((20000, _EPHEMERAL[0] - 1) if _EPHEMERAL[0] > 21000
         else (_EPHEMERAL[1] + 1, 65535))


def _bindable(port: int, hosts: Iterable[str]) -> bool:
    for host in hosts:
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_ports(n: int, hosts: Iterable[str] = ("127.0.0.1",)) -> list[int]:
    """``n`` distinct TCP ports, each free on every one of ``hosts`` right now, outside the
    kernel's ephemeral range (see the module's docstring)."""
    hosts = tuple(hosts)
    rng = random.SystemRandom()
    found: list[int] = []
    for _ in range(200 * max(1, n)):
        if len(found) == n:
            return found
        port = rng.randint(*_POOL)
        if port not in found and _bindable(port, hosts):
            found.append(port)
    if len(found) == n:
        return found
    raise OSError(f"no {n} free TCP ports in {_POOL[0]}-{_POOL[1]} on {', '.join(hosts)}")


def free_port(hosts: Iterable[str] = ("127.0.0.1",)) -> int:
    """One port of :func:`free_ports`."""
    return free_ports(1, hosts)[0]


__all__ = ["free_port", "free_ports"]
