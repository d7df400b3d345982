"""The stages list an operator's parameters by reading them back from its signature."""

from __future__ import annotations

import inspect
import tomllib

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
