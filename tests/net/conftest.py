"""One real PostgreSQL server per test session (:mod:`streamanon.harness.pg_server`: initdb +
pg_ctl in a temporary folder, as ``nobody`` under root). Tests that need it skip, naming the
reason, only when no server binaries can be found."""

from __future__ import annotations

import secrets

import pytest

from streamanon.harness.local_site import free_ports
from streamanon.harness.pg_server import NoServer, temporary_server


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
