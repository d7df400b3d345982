"""One real PostgreSQL server per test session (:mod:`streamanon.harness.pg_server`: initdb +
pg_ctl in a temporary folder, as ``nobody`` under root). Tests that need it skip, naming the
reason, only when no server binaries can be found."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from streamanon.harness.pg_server import NoServer, temporary_server
from streamanon.harness.ports import free_ports
from streamanon.net.config import load_gateway_config, toml_dump
from streamanon.net.gateway import GatewayDaemon
from streamanon.net.pki import init_pki


@pytest.fixture(scope="session")
def postgres_dsn():
    (port,) = free_ports(1)
    try:
        server = temporary_server(port)
        dsn = server.__enter__()
    except NoServer as exc:
        pytest.skip(str(exc))
    try:
        yield dsn
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def pg_database(postgres_dsn):
    """A database of its own for one test (created on the session's server)."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def gateway_daemon(tmp_path: Path, gw_id: int, *, gateways: int, ring_seed: int, t0: float,
                   period: float) -> GatewayDaemon:
    """A gateway daemon of a ``gateways``-gateway site in ``tmp_path`` (its own PKI, an exact
    counter over 8 buckets, z = 2), on the clock ``t0`` / ``period``; nothing is started."""
    init_pki(tmp_path / "pki", gateways, sensors={"c": gw_id})
    path = tmp_path / f"gw{gw_id}.toml"
    path.write_text(toml_dump({
        "gateway": {"id": gw_id, "listen": "127.0.0.1:9", "sensors": "127.0.0.1:9",
                    "state_dir": f"state/gw{gw_id}", "ca": "pki/ca.crt",
                    "cert": f"pki/gw{gw_id}.crt", "key": f"pki/gw{gw_id}.key",
                    "crl": "pki/crl.pem", "ce": "127.0.0.1:9"},
        "sensors": {"registry": f"pki/sensors/gw{gw_id}.txt"},
        "peers": {f"gw{i}": f"127.0.0.1:{9 + i}" for i in range(gateways)},
        "protocol": {"z": 2, "delta_t": 0.0, "p_pub": 1.0, "structure": "exact",
                     "domain": list(range(8)), "sensors_total": 12, "ring_seed": ring_seed},
        "clock": {"t0": t0, "period": period}}))
    return GatewayDaemon(load_gateway_config(path))
