"""Hypothesis strategies for (t, u, a) streams: ties in time, repeated users, hierarchies.

Values and users include the awkward cases of z semantics: spaces inside values, surrounding
spaces (not part of a value), empty levels (``EU**Paris``, ``EU*``), and non-ASCII text.
"""

from __future__ import annotations

from hypothesis import strategies as st

from streamanon.records import Record

FLAT_VALUES = [f"v{i}" for i in range(4)] + ["New York", " v0 ", "Zürich", "東京"]
HIER_VALUES = [
    f"{a}*{b}*{c}" for a in ("EU", "US") for b in ("x", "y") for c in ("1", "2", "3")
] + ["EU", "EU*x", "US*y", "EU**Paris", "EU**Lyon", "EU*", " EU*x*1 ", "EU*San José*1",
     "Ασία*Αθήνα"]
USERS = [f"u{i}" for i in range(10)] + ["user 10", "Zoë"]


@st.composite
def streams(draw: st.DrawFn, hierarchical: bool | None = None, max_size: int = 120) -> list[Record]:
    """A non-decreasing stream of records over a small universe (so counts reach z)."""
    hier = draw(st.booleans()) if hierarchical is None else hierarchical
    values = HIER_VALUES if hier else FLAT_VALUES
    n_users = draw(st.integers(1, len(USERS)))
    steps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 3.25, 10.0]),
                          max_size=max_size))
    t = draw(st.sampled_from([0.0, 1_000.0, 1_451_606_400.0]))
    records = []
    for i, step in enumerate(steps):
        t += step
        u = USERS[draw(st.integers(0, n_users - 1))]
        a = draw(st.sampled_from(values))
        records.append(Record(t, u, a, repr(t), i + 2))
    return records
