"""The CE's PostgreSQL store (driver psycopg 3): ``store = "postgresql://..."`` in ``ce.toml``.

The DSN is libpq's URI (``postgresql://ce@db.example:5432/dezent?sslmode=verify-full``); keep
the password out of the file with ``~/.pgpass`` or ``PGPASSFILE``. One transaction per batch:
``INSERT ... ON CONFLICT DO NOTHING`` keyed by ``(gateway, incarnation, seq)`` (a retried batch
changes nothing), committed with the server's ``synchronous_commit = on`` (checked at connect:
the commit returns after its WAL record is flushed, so an ack after it survives a crash of the
CE or of the database server). A lost connection raises
:class:`~streamanon.errors.StoreUnavailable` with nothing of the batch committed; the next batch
reconnects.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from streamanon.errors import ConfigError
from streamanon.net.framing import WireTuple
from streamanon.net.store.base import MIX_GATEWAY, Row, StoreUnavailable

SCHEMA = ("CREATE TABLE IF NOT EXISTS published (gateway TEXT NOT NULL, "
          "incarnation TEXT NOT NULL, seq BIGINT NOT NULL, cycle BIGINT NOT NULL, "
          "t DOUBLE PRECISION NOT NULL, u TEXT NOT NULL, a TEXT NOT NULL, "
          "received DOUBLE PRECISION NOT NULL, PRIMARY KEY (gateway, incarnation, seq))")
INSERT = ("INSERT INTO published VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
          "ON CONFLICT DO NOTHING")


class PostgresStore:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn = None
        self._connect()  # fail at start-up when the database is not reachable

    def _connect(self):  # type: ignore[no-untyped-def]
        import psycopg

        if self.conn is not None and not self.conn.closed:
            return self.conn
        try:
            conn = psycopg.connect(self.dsn, connect_timeout=5, autocommit=True)
            with conn.transaction():
                conn.execute(SCHEMA)
                (sync,) = conn.execute("SHOW synchronous_commit").fetchone()  # type: ignore[misc]
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL: {exc}".strip()) from exc
        if sync not in ("on", "remote_write", "remote_apply"):
            conn.close()
            raise ConfigError(f"PostgreSQL has synchronous_commit = {sync}: an acknowledged "
                              "batch could be lost in a crash; set it to on")
        self.conn = conn
        return conn

    def store(self, gateway: str, incarnation: bytes, tuples: tuple[WireTuple, ...]) -> int:
        inc = incarnation.hex()
        return self._insert([(gateway, inc, tp) for tp in tuples])

    def store_mix(self, tuples: list[tuple[bytes, WireTuple]]) -> int:
        return self._insert([(MIX_GATEWAY, uid.hex(), tp) for uid, tp in tuples])

    def _insert(self, rows: list[tuple[str, str, WireTuple]]) -> int:
        import psycopg

        now = time.time()
        conn = self._connect()
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(INSERT, [(g, inc, tp.seq, tp.cycle, tp.t, tp.id,
                                          str(tp.value), now) for g, inc, tp in rows])
                return max(0, cur.rowcount)
        except psycopg.OperationalError as exc:
            conn.close()
            raise StoreUnavailable(f"PostgreSQL: {exc}".strip()) from exc

    def count(self) -> int:
        conn = self._connect()
        with conn.transaction():
            (n,) = conn.execute("SELECT COUNT(*) FROM published").fetchone()  # type: ignore[misc]
        return int(n)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def iter_rows(dsn: str) -> Iterator[Row]:
    import psycopg

    with psycopg.connect(dsn, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute("SELECT gateway, incarnation, seq, cycle, t, u, a, received FROM published "
                    "ORDER BY t, gateway, incarnation, seq")
        yield from cur  # type: ignore[misc]


def clear(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, connect_timeout=5, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute("DELETE FROM published")
