"""Run the authors' reference implementation (PyPI ``zanon``, GPL-3) as a test-time oracle.

It writes ``output.txt`` (and other files) into the working directory, so it runs in a
temporary one. With ``z`` fixed its ``z_change`` step is disabled, as the spec prescribes.
For adaptive z, its grouping of users by ``str(set)`` is made order-free (the one documented
difference, see :mod:`streamanon.zanon.adaptive`).
"""

from __future__ import annotations

import builtins
import contextlib
import locale
import os
import tempfile
from collections.abc import Iterable, Iterator

from streamanon.records import Record


def _order_free_str(x: object) -> str:
    return repr(sorted(x)) if isinstance(x, set) else builtins.str(x)


@contextlib.contextmanager
def _in_tempdir() -> Iterator[str]:
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            yield tmp
        finally:
            os.chdir(old)


def oracle_published(
    records: Iterable[Record], z: int | None, delta_t: float, *, k: int = 2, pk: float = 0.8,
    rate: float = 1800,
) -> tuple[list[tuple[float, str, str]], int]:
    """Published ``(t, u, a')`` of ``zanon`` and its final z (``z=None``: adaptive, from 10)."""
    import zanonymity.utils as zutils
    import zanonymity.zanon as zmod

    saved = zmod.z_change
    with _in_tempdir():
        # the release groups users by str(set), whose order depends on insertion history;
        # streamanon groups by the set itself, so the oracle is given an order-free str()
        zutils.str = _order_free_str  # type: ignore[attr-defined]
        try:
            if z is not None:
                zmod.z_change = lambda self, t: None
            oracle = zmod.zanon(delta_t, pk, k)
            oracle.rate = rate
            if z is not None:
                oracle.z = z
            for r in records:
                oracle.anonymize((r.t, r.u, r.a))
            oracle.endFiles()
            # the oracle writes with the locale's encoding: read it back the same way
            with open("output.txt", encoding=locale.getpreferredencoding(False)) as fh:
                rows = [line.rstrip("\n").split("\t") for line in fh if line.strip()]
        finally:
            zmod.z_change = saved
            del zutils.str  # type: ignore[attr-defined]
    return [(float(t), u, a) for t, u, a in rows], oracle.z
