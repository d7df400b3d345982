"""The gateway's outbox: published tuples kept on disk (SQLite) until the CE acknowledges them.

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

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from streamanon.dezent.protocol import PublishedTuple
from streamanon.net.framing import INCARNATION_BYTES, WireTuple

MIX_RETRY_FIRST = 2  # cycles without an acknowledgement before a tuple is mixed again
MIX_RETRY_MAX = 64
MIX_CARRY_MAX = 64  # earlier tuples one gateway adds to a batch at most (bounds frames)


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
        self.db.execute("CREATE TABLE IF NOT EXISTS mix_pending (uid BLOB PRIMARY KEY, "
                        "cycle INTEGER NOT NULL, t REAL NOT NULL, id TEXT NOT NULL, "
                        "value TEXT NOT NULL, is_int INTEGER NOT NULL, "
                        "mixed_in INTEGER, tries INTEGER NOT NULL, next_cycle INTEGER NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS mix_out (cycle INTEGER PRIMARY KEY, "
                        "items BLOB NOT NULL, size INTEGER NOT NULL)")
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

    # -- the mix --------------------------------------------------------------------------
    def mix_add(self, tuples: Sequence[PublishedTuple]) -> None:
        """Keep tuples this gateway published (with their uids) until a batch is acked."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")  # one durable commit for all of them
            self.db.executemany(
                "INSERT OR IGNORE INTO mix_pending VALUES (?, ?, ?, ?, ?, ?, NULL, 0, ?)",
                [(p.uid, p.cycle, p.t, p.id, str(p.value), int(isinstance(p.value, int)),
                  p.cycle + MIX_RETRY_FIRST) for p in tuples])

    def mix_due(self, cycle: int, limit: int = MIX_CARRY_MAX) -> list[PublishedTuple]:
        """Tuples of earlier cycles to seal into the batch of ``cycle`` (no ack in time)."""
        rows = self.db.execute(
            "SELECT uid, cycle, t, id, value, is_int FROM mix_pending WHERE cycle < ? AND "
            "next_cycle <= ? ORDER BY cycle, uid LIMIT ?", (cycle, cycle, limit)).fetchall()
        return [PublishedTuple(c, t, u, int(v) if is_int else v, "", -1, bytes(uid))
                for uid, c, t, u, v, is_int in rows]

    def mix_mark(self, cycle: int, carried: Sequence[bytes]) -> None:
        """The batch of ``cycle`` holds this gateway's tuples of ``cycle`` and ``carried``."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("UPDATE mix_pending SET mixed_in = ?, next_cycle = ? + ? "
                            "WHERE cycle = ?", (cycle, cycle, MIX_RETRY_FIRST, cycle))
            self.db.executemany(
                "UPDATE mix_pending SET mixed_in = ?, tries = tries + 1, next_cycle = ? + "
                "min(?, ? << min(tries + 1, 6)) WHERE uid = ?",
                [(cycle, cycle, MIX_RETRY_MAX, MIX_RETRY_FIRST, uid) for uid in carried])

    def mix_acked(self, cycle: int) -> int:
        """The CE stored the batch of ``cycle``: forget the tuples it was the last to carry."""
        with self.db:
            return self.db.execute("DELETE FROM mix_pending WHERE mixed_in = ?",
                                   (cycle,)).rowcount

    def mix_pending_count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM mix_pending").fetchone()[0])

    def mix_out_add(self, cycle: int, items: Sequence[bytes]) -> None:
        """Keep the batch this gateway must deliver until the CE acknowledges it."""
        size = len(items[0]) if items else 0
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO mix_out VALUES (?, ?, ?)",
                            (cycle, b"".join(items), size))

    def mix_out_pending(self) -> list[tuple[int, tuple[bytes, ...]]]:
        rows = self.db.execute("SELECT cycle, items, size FROM mix_out ORDER BY cycle")
        return [(c, tuple(bytes(b[i : i + n]) for i in range(0, len(b), n)) if n else ())
                for c, b, n in rows.fetchall()]

    def mix_out_done(self, cycle: int) -> None:
        with self.db:
            self.db.execute("DELETE FROM mix_out WHERE cycle = ?", (cycle,))

    def close(self) -> None:
        self.db.close()
