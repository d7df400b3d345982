"""The partition merge's one-partition pass (a Flink job's reading step keeps the values)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.errors import ProtocolError
from streamanon.pipeline.kafka.merge import PartitionMerge


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-5, 100), min_size=1, max_size=8), max_size=6))
def test_passing_a_partitions_records_on_leaves_the_state_add_and_take_leave(batches):
    added, passed = PartitionMerge([3]), PartitionMerge([3])
    offset = 0
    for stamps in batches:
        offsets = np.arange(offset, offset + len(stamps), dtype=np.int64)
        offset += len(stamps)
        added.add(3, offsets, np.array(stamps, np.int64), [b"v"] * len(stamps))
        got = added.take(exhausted=lambda p: False)
        assert got is not None and got.offsets.tolist() == offsets.tolist()
        passed.pass_on(3, offsets, np.array(stamps, np.int64))
        assert passed.with_buffers() == added.with_buffers()


def test_only_a_one_partition_merge_passes_records_on():
    with pytest.raises(ProtocolError):
        PartitionMerge([0, 1]).pass_on(0, np.array([0]), np.array([5]))
