"""The operator's cached cluster arrays agree with computing from the tuples, on random streams.

The best selection and ``_output`` read a cluster's generalization from rows kept
incrementally (``ClusterSet.bounds``/``nodes``, grown rows copied by ``insert``); these must equal
``state_of`` over the cluster's tuples after every arrival.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streamanon.castle import CastleAnonymizer
from tests.castle.strategies import make_rules, rule_sets, streams


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    spec = draw(rule_sets())
    rows = draw(streams(spec))
    params = {"k": draw(st.integers(1, 4)), "l": 0, "delta": draw(st.integers(1, 30)),
              "beta": draw(st.integers(1, 8)), "mu": draw(st.integers(1, 5))}
    return spec, rows, params


@given(cases())
def test_cluster_rows_equal_a_fresh_computation_from_the_tuples(case) -> None:
    spec, rows, params = case
    op = CastleAnonymizer(make_rules(spec), **params)
    for row in rows:
        op.process(row)
        for cset in op._sets:
            for i, c in enumerate(cset.clusters):
                fresh, kept = cset.state_of(c.items), cset.cluster_state(c)
                assert np.array_equal(fresh.lo, kept.lo) and np.array_equal(fresh.hi, kept.hi)
                assert np.array_equal(fresh.nodes, kept.nodes)
                assert fresh.plugin_states == kept.plugin_states
                d = len(cset.num)
                assert np.array_equal(cset.bounds[i], np.concatenate((-fresh.lo, fresh.hi)))
                assert d == 0 or np.array_equal(cset.bounds[i, :d], -np.min(
                    [it.bounds_row[d:] for it in c.items], axis=0))


@given(cases())
def test_the_kernels_tables_equal_a_fresh_packing(case) -> None:
    """Widening a range domain updates the kernel's weights and domains in place; after every
    arrival they equal packing everything anew (when the packing is current)."""
    spec, rows, params = case
    op = CastleAnonymizer(make_rules(spec), **params)
    for row in rows:
        op.process(row)
        for cset in op._sets:
            key = (cset._beta, cset._eps, *[g.loss_version for g in cset.hier])
            if cset._packed != key:
                continue  # repacked before the next selection
            fl, it = cset._kernel_floats.copy(), cset._kernel_ints.copy()
            cset._pack(key, cset._beta, cset._eps)
            assert np.array_equal(fl, cset._kernel_floats) and np.array_equal(it, cset._kernel_ints)


def test_the_kernels_constants_are_the_clusters() -> None:
    from streamanon.castle import _kernel, cluster

    assert (cluster.OPEN, cluster.OUTSIDE, cluster.TIED, cluster.HEAD) == (
        _kernel.OPEN, _kernel.OUTSIDE, _kernel.TIED, _kernel.HEAD)
