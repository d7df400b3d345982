"""The CE's SQLite store (the default): one durable transaction per batch.

``synchronous=FULL`` in WAL mode makes a returned commit durable across a crash of the CE or
of the machine; ``INSERT OR IGNORE`` keyed by ``(gateway, incarnation, seq)`` makes a retried
batch change nothing.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from streamanon.errors import ConfigError
from streamanon.net.framing import WireTuple
from streamanon.net.outbox import connect_durable
from streamanon.net.store.base import MIX_GATEWAY, Row, StoreUnavailable

SCHEMA = ("CREATE TABLE IF NOT EXISTS published (gateway TEXT NOT NULL, "
          "incarnation TEXT NOT NULL, seq INTEGER NOT NULL, cycle INTEGER NOT NULL, "
          "t REAL NOT NULL, u TEXT NOT NULL, a TEXT NOT NULL, received REAL NOT NULL, "
          "PRIMARY KEY (gateway, incarnation, seq))")


class SQLiteStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = connect_durable(path)
        self.db.execute(SCHEMA)
        cols = [r[1] for r in self.db.execute("PRAGMA table_info(published)")]
        if "incarnation" not in cols:
            raise ConfigError(f"{path} was written by an older CE (no incarnation column); "
                              "export it and start a new database")

    def store(self, gateway: str, incarnation: bytes, tuples: tuple[WireTuple, ...]) -> int:
        inc = incarnation.hex()
        return self._insert([(gateway, inc, tp) for tp in tuples])

    def store_mix(self, tuples: list[tuple[bytes, WireTuple]]) -> int:
        return self._insert([(MIX_GATEWAY, uid.hex(), tp) for uid, tp in tuples])

    def _insert(self, rows: list[tuple[str, str, WireTuple]]) -> int:
        now = time.time()
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                before = self.db.total_changes
                self.db.executemany(
                    "INSERT OR IGNORE INTO published VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(g, inc, tp.seq, tp.cycle, tp.t, tp.id, str(tp.value), now)
                     for g, inc, tp in rows])
                return self.db.total_changes - before
        except sqlite3.OperationalError as exc:  # disk full, locked by another writer
            raise StoreUnavailable(f"SQLite {self.path}: {exc}") from exc

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM published").fetchone()[0])

    def close(self) -> None:
        self.db.close()


def iter_rows(path: Path) -> Iterator[Row]:
    if not path.exists():
        raise FileNotFoundError(f"no CE database at {path}")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield from db.execute("SELECT gateway, incarnation, seq, cycle, t, u, a, received "
                              "FROM published ORDER BY t, gateway, incarnation, seq")
    finally:
        db.close()
