"""Our key groups are spread evenly over Flink's subtasks, at any parallelism (the JVM's own
assignment decides: needs the flink extra and Java)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.flink.conftest import require_flink

require_flink()
pytestmark = pytest.mark.flink


@pytest.mark.parametrize("groups", [1, 2, 3, 5, 128, 200])
def test_groups_spread_evenly_over_subtasks(groups):
    from pyflink.java_gateway import get_gateway

    from streamanon.flink.env import prepare_python_path

    prepare_python_path()
    from streamanon.flink.runtime import route_keys

    jvm = get_gateway().jvm
    assign = jvm.org.apache.flink.runtime.state.KeyGroupRangeAssignment
    keys = route_keys(groups, 128)
    assert len(set(keys)) == groups
    for parallelism in (1, 2, 3, 4, 8):
        per_subtask: Counter = Counter()
        for key in keys:
            row = jvm.org.apache.flink.types.Row(1)
            row.setField(0, key)
            per_subtask[assign.assignKeyToParallelOperator(row, 128, parallelism)] += 1
        counts = [per_subtask[i] for i in range(parallelism)]
        assert max(counts) - min(counts) <= 1, (groups, parallelism, counts)
