"""The read-ahead helper process sends exactly what the reading step would compute itself."""

from __future__ import annotations

import copy
import pickle
import signal

import pytest

from streamanon.castle import RuleSet
from streamanon.data import ashrae
from streamanon.data.traces import write_trace, zipf_trace
from streamanon.flink.castle_rows import CastleChunkParser
from streamanon.flink.readahead import HelperGone, ReadAhead, parse_split
from streamanon.flink.splits import split_count
from streamanon.flink.zbatch import ZChunkParser
from streamanon.io import InputError


def inline(path, split_bytes, parser, start=0):
    parser = copy.deepcopy(parser)
    return [parse_split(str(path), k, split_bytes, parser)
            for k in range(start, split_count(path, split_bytes))]


def ahead(path, split_bytes, parser, start=0):
    helper = ReadAhead(str(path), split_bytes, start, split_count(path, split_bytes), parser)
    try:
        return [helper.take(k) for k in range(start, split_count(path, split_bytes))]
    finally:
        helper.close()


def same(a, b) -> None:
    """Equal results; batches compared as their pickles (Arrow bytes or row lists)."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x[0] == y[0] and x[1] == y[1] and x[3] == y[3] and x[4] == y[4]
        assert pickle.dumps(x[2]) == pickle.dumps(y[2])


def test_z_splits_parsed_ahead_equal_the_inline_ones(tmp_path) -> None:
    path = write_trace(tmp_path / "t.csv", zipf_trace(3000, n_users=40, levels=2, seed=3))
    lines = path.read_text().splitlines()
    lines[500:500] = ["oops", "", "nan,u,v", '7,"x, y",z']  # rejected, blank, quoted
    path.write_text("\n".join(lines) + "\n")
    parser = ZChunkParser("csv", key_groups=8, batch_size=700)
    same(ahead(path, 9000, parser), inline(path, 9000, parser))


def test_castle_splits_parsed_ahead_equal_the_inline_ones_also_from_a_restored_state(
        tmp_path) -> None:
    path = ashrae.write_csv(tmp_path / "a.csv", ashrae.generate(800, seed=4))
    rules = RuleSet.from_toml(ashrae.rules_toml())
    numeric = [r.name for r in rules.qi_rules
               if type(r.generalizer).__name__ == "RangeGeneralizer"]
    parser = CastleChunkParser("csv", rules.id_field, numeric, partitions=3)
    whole = inline(path, 8000, parser)
    same(ahead(path, 8000, parser), whole)
    restored = CastleChunkParser("csv", rules.id_field, numeric, partitions=3)
    restored.restore(whole[2][3])  # as a restored reading step asks from split 3 on
    same(ahead(path, 8000, restored, start=3), whole[3:])


def test_a_parser_error_arrives_as_the_parser_raised_it(tmp_path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("x,y,z\n1,2,3\n")
    with pytest.raises(InputError, match="expected a CSV header naming columns t,u,a"):
        ahead(path, 1 << 16, ZChunkParser("csv"))


def test_a_killed_helper_is_reported_not_waited_for(tmp_path) -> None:
    path = write_trace(tmp_path / "t.csv", zipf_trace(2000, seed=2))
    helper = ReadAhead(str(path), 4000, 0, split_count(path, 4000), ZChunkParser("csv"))
    helper.proc.send_signal(signal.SIGKILL)
    helper.proc.wait()
    with pytest.raises(HelperGone):
        for k in range(split_count(path, 4000)):
            helper.take(k)
    helper.close()


def test_splits_before_send_from_are_parsed_for_the_state_only(tmp_path) -> None:
    """As the reading step uses it: the helper starts where the step parses itself and sends
    from the next split on, with the state that split needs (line numbers, the clock)."""
    path = write_trace(tmp_path / "t.csv", zipf_trace(3000, n_users=40, seed=6))
    parser = ZChunkParser("csv", key_groups=4)
    whole = inline(path, 9000, parser)
    helper = ReadAhead(str(path), 9000, 0, len(whole), parser, send_from=2)
    try:
        same([helper.take(k) for k in range(2, len(whole))], whole[2:])
    finally:
        helper.close()

