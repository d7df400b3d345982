"""The stages list an operator's parameters by reading them back from its signature."""

from __future__ import annotations

import inspect
import tomllib
from typing import Any

import numpy as np

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.data import ashrae
from streamanon.pipeline.positions import LinePositions
from streamanon.pipeline.stages import (
    CASTLE_UNLISTED,
    Z_UNLISTED,
    CastleStage,
    ZStage,
    signature_params,
)
from streamanon.zanon import AdaptiveZAnonymizer, ZAnonymizer


class WiderZ(ZAnonymizer):
    """z-anonymity with one parameter more (what a new operator parameter looks like)."""

    def __init__(self, *, z: int, delta_t: float, separator: str = "*",
                 horizon: int = 7) -> None:
        super().__init__(z=z, delta_t=delta_t, separator=separator)
        self.horizon = horizon


class WiderCastle(CastleAnonymizer):
    def __init__(self, rules: RuleSet, *, k: int = 5, horizon: int = 7) -> None:
        super().__init__(rules, k=k)
        self.horizon = horizon


def keyword_only(cls: type) -> list[str]:
    return [n for n, p in inspect.signature(cls.__init__).parameters.items()
            if p.kind is p.KEYWORD_ONLY]


def rules() -> RuleSet:
    return RuleSet.from_dict(tomllib.loads(ashrae.rules_toml()))


def test_z_stage_lists_the_operators_signature():
    stage = ZStage(ZAnonymizer(z=3, delta_t=60), LinePositions("in.csv"))
    listed = [n for n in keyword_only(ZAnonymizer) if n not in Z_UNLISTED]
    assert list(stage.stats().params) == [*listed, "input"]
    assert [k for k in stage.identity() if k in keyword_only(ZAnonymizer)] == listed


def test_a_parameter_added_to_an_operator_shows_up_without_editing_the_stage():
    stage = ZStage(WiderZ(z=3, delta_t=60, horizon=9), LinePositions("in.csv"))
    assert stage.stats().params["horizon"] == 9 == stage.identity()["horizon"]
    assert stage.stats().to_dict()["params"]["horizon"] == 9
    castle = CastleStage(WiderCastle(rules(), k=3, horizon=11), LinePositions("in.csv"))
    assert castle.stats().params == {"k": 3, "horizon": 11, "input": "in.csv"}
    assert castle.identity()["horizon"] == 11


def test_castle_stage_lists_every_parameter_in_its_identity_in_signature_order():
    op = CastleAnonymizer(rules(), k=3, l=2, suppression="null", max_delay=5.0,
                          loss_field="loss")
    stage = CastleStage(op, LinePositions("in.csv"))
    names = keyword_only(CastleAnonymizer)
    identity = stage.identity()
    assert [k for k in identity if k in names] == names
    assert identity["suppression"] == "null" and identity["max_delay"] == 5.0
    params = stage.stats().params
    assert list(params) == [*(n for n in names if n not in CASTLE_UNLISTED), "input"]
    assert {n: params[n] for n in ("k", "l", "suppression")} == {"k": 3, "l": 2,
                                                                "suppression": "null"}


def test_adaptive_z_lists_its_own_parameters_after_the_windows():
    op = AdaptiveZAnonymizer(delta_t=60, k=2, pk=0.5, rate=100)
    params = ZStage(op, LinePositions("in.csv")).stats().params
    assert params["adaptive"] is True and params["z"] == op.core.z
    assert (params["k"], params["pk"], params["rate"]) == (2, 0.5, 100)


def test_signature_params_takes_a_commands_options_in_signature_order():
    options = {"zeta": 4, "k": 5, "output": "-", "beta": 9, "l": 2, "columns": None}
    got = signature_params(CastleAnonymizer, options)
    assert list(got) == [n for n in keyword_only(CastleAnonymizer) if n in options]
    assert got == {"k": 5, "l": 2, "beta": 9, "zeta": 4}


def _castle_file(n: int, bad_every: int) -> bytes:
    """ASHRAE-shaped rows as a clean CSV file: every ``bad_every``-th row names a use the
    rules do not know (Arrow's lane reads it; the operator refuses it)."""
    import io

    buf = io.StringIO()
    rows = list(ashrae.generate(n, seed=4))
    names = list(rows[0])
    buf.write(",".join(names) + "\n")
    for i, r in enumerate(rows):
        if i % bad_every == 50:
            r = {**r, "primary_use": "Spaceport"}
        buf.write(",".join(str(r[c]) for c in names) + "\n")
    return buf.getvalue().removesuffix("\n").encode()


def _spied_castle(spy: list[int] | None) -> CastleAnonymizer:
    """A CASTLE operator that notes the size of each block given to its block entry point
    in ``spy`` (``None``: not noted)."""

    class Spied(CastleAnonymizer):
        def process_block(self, rows: Any, **kw: Any) -> Any:
            if spy is not None:
                spy.append(kw["n"])
            return super().process_block(rows, **kw)

    return Spied(RuleSet.from_toml(ashrae.rules_toml()), k=5, l=2, delta=300)


def _run_castle_stage(data: bytes, *, on_error: str, latency: bool, spy: list[int] | None = None
                      ) -> tuple[dict[str, str], str | None, dict]:
    from streamanon.pipeline.chunks import LineChunk

    stage = CastleStage(_spied_castle(spy), LinePositions("in.csv"), on_error=on_error,
                        latency=latency)
    text: dict[str, str] = {}
    out, error = stage.process(LineChunk(1, data))
    outs = [out] if error is not None else [out, stage.finish()]
    for o in outs:
        for dest, blocks in o.items():
            text[dest] = text.get(dest, "") + "".join(
                (b.header or "") + b.text for b in blocks)
    details = stage.stats().details
    details.pop("latency_ms", None)
    for key in ("best_selection_s", "delay_constraint_s"):
        details.pop(key)
    return text, None if error is None else str(error), details


def test_castle_stage_hands_clean_blocks_to_the_operator_as_columns():
    """A clean file goes through the operator's block entry point, with the outputs, rejects
    and summary of the row-at-a-time path (which ``latency`` keeps)."""
    fast = _blocks_equal_rows(_run_castle_stage, _castle_file(3000, bad_every=211))
    assert fast[1] is not None and "Spaceport" in fast[1]


def _blocks_equal_rows(run: Any, data: Any) -> Any:
    """``run`` on ``data`` under ``skip`` and ``fail``: the block entry point is used, and
    the outputs equal the row-at-a-time path's (``latency`` keeps it); the last outputs."""
    for on_error in ("skip", "fail"):
        spy: list[int] = []
        fast = run(data, on_error=on_error, latency=False, spy=spy)
        assert spy, "the clean blocks did not reach the operator's block entry point"
        assert fast == run(data, on_error=on_error, latency=True)
    return fast


def _run_castle_messages(batches: list[list[bytes]], *, on_error: str, latency: bool,
                         spy: list[int] | None = None) -> tuple[list[tuple], str | None]:
    """Kafka messages (the header as the first one) through a CASTLE stage, batch by batch,
    each message at position ``partition 2, offset 7 + 3 * i``: every output line with the
    position it carries, and the error."""
    from streamanon.pipeline.positions import MessagePositions

    positions = MessagePositions("kafka://h:9092/in")
    stage = CastleStage(_spied_castle(spy), positions, on_error=on_error, latency=latency)
    got: list[tuple] = []
    first = 0
    outs = []
    for values in batches:
        codes = np.array([positions.code(2, 7 + 3 * i)
                          for i in range(first, first + len(values))], dtype=np.int64)
        first += len(values)
        out, error = stage.process_messages(values, codes)
        outs.append(out)
        if error is not None:
            break
    else:
        error = None
        outs.append(stage.finish())
    for o in outs:
        for dest, blocks in o.items():
            for b in blocks:
                lines = b.text.splitlines()
                assert len(lines) == len(b.codes)
                got += [(dest, int(c), line) for c, line in zip(b.codes, lines, strict=True)]
    return got, None if error is None else str(error)


def test_castle_stage_hands_clean_kafka_batches_to_the_operator_as_columns():
    """Clean Kafka batches go through the operator's block entry point too, each released
    or suppressed row carrying its message's position and each refused message named by
    partition and offset, as on the row-at-a-time path (which ``latency`` keeps)."""
    lines = _castle_file(3000, bad_every=211).split(b"\n")
    lines[900] = b""  # an empty message: refused before parsing (its batch is not clean)
    batches = [lines[lo:lo + 700] for lo in range(0, len(lines), 700)]
    _blocks_equal_rows(_run_castle_messages, batches)
    skipped, _ = _run_castle_messages(batches, on_error="skip", latency=False)
    assert sum(dest == "published" for dest, _, _ in skipped) > 2500
    rejects = [line for dest, _, line in skipped if dest == "rejects"]
    # the first unknown use: row 50, message 51 (the header is message 0), offset 7 + 3 * 51
    assert any('"partition": 2, "offset": 160' in r and "Spaceport" in r for r in rejects)
    assert any('"offset": 2707' in r and "empty message" in r for r in rejects)  # message 900
    codes = {c for _, c, _ in skipped}
    assert min(codes) >= (7 << 16 | 2)  # positions, not line numbers

def test_a_parameters_update_keeps_the_identity_and_shows_in_the_summary():
    import pickle

    op = CastleAnonymizer(rules(), k=3, l=2, delta=40)
    stage = CastleStage(op, LinePositions("in.csv"))
    before = stage.identity()
    assert "parameters" not in stage.stats().details
    op.set_rules(RuleSet.from_toml(ashrae.rules_toml() + "\n[parameters]\nk = 6\nbeta = 9\n"))
    assert stage.identity() == before  # a restart from a later checkpoint is accepted
    assert stage.stats().details["parameters"] == {"k": 6, "l": 2, "delta": 40, "beta": 9}
    again = pickle.loads(pickle.dumps(stage))
    assert again.identity() == before and again.op.parameters.k == 6
