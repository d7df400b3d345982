"""The central entity's store: one interface, a module per backend.

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from streamanon.net.store.base import MIX_GATEWAY, Row, Store, StoreUnavailable, is_postgres


def open_store(spec: str | Path) -> Store:
    if is_postgres(spec):
        from streamanon.net.store.postgres import PostgresStore

        return PostgresStore(str(spec))
    from streamanon.net.store.sqlite import SQLiteStore

    return SQLiteStore(Path(spec))


def iter_rows(spec: str | Path) -> Iterator[Row]:
    """Every stored tuple in time order (read-only)."""
    if is_postgres(spec):
        from streamanon.net.store.postgres import iter_rows as pg_rows

        yield from pg_rows(str(spec))
    else:
        from streamanon.net.store.sqlite import iter_rows as sqlite_rows

        yield from sqlite_rows(Path(spec))


def format_time(t: float) -> str:
    """``900.0 -> '900'``; fractional times keep their digits.

    >>> format_time(900.0), format_time(0.5)
    ('900', '0.5')
    """
    return str(int(t)) if float(t).is_integer() else repr(float(t))


def export_csv(spec: str | Path, out: str | Path) -> int:
    """Write the CE's tuples as ``t,u,a`` CSV (time order); returns the row count."""
    from streamanon.io import RecordWriter

    n = 0
    with RecordWriter(out, "csv") as w:
        for _g, _i, _s, _c, t, u, a, _r in iter_rows(spec):
            w.write_columns([format_time(t)], [u], [a])
            n += 1
    return n


def stored_rows(spec: str | Path) -> int:
    """How many tuples a store holds (0 for a SQLite file that does not exist)."""
    if not is_postgres(spec) and not Path(spec).exists():
        return 0
    store = open_store(spec)
    try:
        return store.count()
    finally:
        store.close()


def clear_store(spec: str | Path) -> None:
    """Delete every stored tuple (``cluster up --force`` on a PostgreSQL store)."""
    if is_postgres(spec):
        from streamanon.net.store.postgres import clear

        clear(str(spec))
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(str(spec) + suffix).unlink(missing_ok=True)


__all__ = [
    "MIX_GATEWAY",
    "Row",
    "Store",
    "StoreUnavailable",
    "clear_store",
    "export_csv",
    "format_time",
    "is_postgres",
    "iter_rows",
    "open_store",
    "stored_rows",
]
