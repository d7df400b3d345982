"""The conformance check every streaming operator passes (in the spirit of river's checks).

An operator has ``process(record)`` returning what that arrival releases: a record, a
:class:`~streamanon.records.Suppressed`, or a list of those; and ``flush()`` returning the rest
at end of stream. :func:`check_operator` asserts the house rules on a given input:

* accounting: every input record ends exactly once, released or suppressed;
* determinism: two fresh operators give identical outputs;
* checkpointing: pickling the operator mid-stream and resuming changes nothing;
* bad records are refused with an exception naming them, never dropped silently.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

from streamanon.records import Suppressed


def _as_list(out: Any) -> list[Any]:
    if out is None:
        return []
    return list(out) if isinstance(out, list | tuple) else [out]


def run_operator(operator: Any, records: Sequence[Any]) -> list[Any]:
    """Everything the operator emits for ``records`` (process each, then flush), in order."""
    emitted: list[Any] = []
    for r in records:
        emitted.extend(_as_list(operator.process(r)))
    emitted.extend(_as_list(operator.flush()))
    return emitted


def check_operator(
    make: Callable[[], Any],
    records: Sequence[Any],
    *,
    bad_record: Any | None = None,
    released_count: Callable[[list[Any]], int] | None = None,
) -> list[Any]:
    """Assert the conformance rules for ``make()`` on ``records``; returns the emitted items.

    ``released_count`` maps emitted items to the number of input records they stand for
    (default: one per non-suppressed item).
    """
    first = run_operator(make(), records)
    suppressed = sum(1 for x in first if isinstance(x, Suppressed))
    released = [x for x in first if not isinstance(x, Suppressed)]
    n_released = released_count(released) if released_count else len(released)
    assert n_released + suppressed == len(records), (
        f"accounting: {len(records)} read but {n_released} released + {suppressed} suppressed"
    )
    assert run_operator(make(), records) == first, "output differs between identical runs"
    for cut in sorted({0, len(records) // 3, len(records) // 2, len(records)}):
        op = make()
        head: list[Any] = []
        for r in records[:cut]:
            head.extend(_as_list(op.process(r)))
        op = pickle.loads(pickle.dumps(op))
        rest = run_operator(op, records[cut:])
        assert head + rest == first, f"pickling after {cut} records changed the output"
    if bad_record is not None:
        op = make()
        run_operator_prefix = records[: len(records) // 2]
        for r in run_operator_prefix:
            op.process(r)
        try:
            op.process(bad_record)
        except (ValueError, TypeError) as exc:
            assert str(exc), "the error for a bad record must say what is wrong"
        else:
            raise AssertionError(f"bad record {bad_record!r} was accepted")
    return first
