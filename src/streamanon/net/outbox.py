"""The gateway's outbox: published tuples kept on disk (SQLite) until the CE acknowledges them.

Every tuple gets the next sequence number of this outbox (never reused: the counter lives in
the same transaction as the tuples). An outbox also has an **incarnation**: 16 random bytes
drawn when its database is created. The central entity stores idempotently by
``(gateway, incarnation, sequence)``: a retried batch is harmless, and if the outbox's file is
lost (disk replaced, state folder wiped) the new outbox starts again at sequence 1 under a new
incarnation, so its tuples are new to the CE instead of being taken for duplicates.

A tuple leaves the outbox only when an acknowledgement covering its sequence number arrives,
which the CE sends after its commit. A tuple the CE refuses as invalid (an ``N`` frame naming
it) moves to the ``refused`` table with the CE's reason: it is kept, counted and logged, never
silently dropped, and never sent again (no retry storm).

>>> import tempfile, os
>>> d = tempfile.mkdtemp()
>>> box = Outbox(os.path.join(d, "outbox.sqlite"))
>>> box.append([(0, 0.0, "a", 5), (0, 0.0, "b", "x")])
[1, 2]
>>> box.ack(1); inc = box.incarnation; box.close()
1
>>> box = Outbox(os.path.join(d, "outbox.sqlite"))
>>> [(tp.seq, tp.id, tp.value) for tp in box.pending(10)], box.append([(1, 900.0, "c", 7)])
([(2, 'b', 'x')], [3])
>>> box.refuse([(3, "value out of domain")]), box.count(), box.refused_count()
(1, 1, 1)
>>> box.incarnation == inc
True
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from streamanon.net.framing import INCARNATION_BYTES, WireTuple


def connect_durable(path: Path) -> sqlite3.Connection:
    """SQLite where a returned commit is on disk (WAL, synchronous=FULL, autocommit).

    Both ends of the CE link rely on it: the CE acks only after a commit, and a gateway
    deletes an outbox row only after that ack.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db


class Outbox:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.db = connect_durable(self.path)
        self.db.execute("CREATE TABLE IF NOT EXISTS outbox (seq INTEGER PRIMARY KEY, "
                        "cycle INTEGER NOT NULL, t REAL NOT NULL, id TEXT NOT NULL, "
                        "value TEXT NOT NULL, is_int INTEGER NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS refused (seq INTEGER PRIMARY KEY, "
                        "cycle INTEGER NOT NULL, t REAL NOT NULL, id TEXT NOT NULL, "
                        "value TEXT NOT NULL, is_int INTEGER NOT NULL, reason TEXT NOT NULL, "
                        "refused_at REAL NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, "
                        "value NOT NULL)")
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('next_seq', 1)")
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('incarnation', ?)",
                            (secrets.token_hex(INCARNATION_BYTES),))
        (inc,) = self.db.execute(
            "SELECT value FROM meta WHERE key = 'incarnation'").fetchone()
        self.incarnation = bytes.fromhex(inc)

    def append(self, tuples: Sequence[tuple[int, float, str, int | str]]) -> list[int]:
        """Store ``(cycle, t, id, value)`` tuples durably; returns their sequence numbers."""
        if not tuples:
            return []
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            (first,) = self.db.execute("SELECT value FROM meta WHERE key = 'next_seq'").fetchone()
            seqs = list(range(first, first + len(tuples)))
            self.db.executemany(
                "INSERT INTO outbox VALUES (?, ?, ?, ?, ?, ?)",
                [(s, c, t, u, str(v), int(isinstance(v, int)))
                 for s, (c, t, u, v) in zip(seqs, tuples, strict=True)])
            self.db.execute("UPDATE meta SET value = ? WHERE key = 'next_seq'",
                            (first + len(tuples),))
        return seqs

    def pending(self, limit: int) -> list[WireTuple]:
        rows = self.db.execute("SELECT seq, cycle, t, id, value, is_int FROM outbox "
                               "ORDER BY seq LIMIT ?", (limit,)).fetchall()
        return [WireTuple(s, c, t, u, int(v) if is_int else v) for s, c, t, u, v, is_int in rows]

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])

    def refused_count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM refused").fetchone()[0])

    def ack(self, seq: int) -> int:
        """Drop every tuple up to ``seq`` (acknowledged by the CE); returns how many."""
        with self.db:
            cur = self.db.execute("DELETE FROM outbox WHERE seq <= ?", (seq,))
        return cur.rowcount

    def refuse(self, items: Sequence[tuple[int, str]]) -> int:
        """Move the tuples the CE refused (``(seq, reason)``) to the ``refused`` table."""
        now = time.time()
        moved = 0
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            for seq, reason in items:
                cur = self.db.execute(
                    "INSERT OR IGNORE INTO refused SELECT seq, cycle, t, id, value, is_int, ?, ? "
                    "FROM outbox WHERE seq = ?", (reason, now, seq))
                self.db.execute("DELETE FROM outbox WHERE seq = ?", (seq,))
                moved += cur.rowcount
        return moved

    def close(self) -> None:
        self.db.close()
