"""CASTLEGUARD's differential-privacy mode: β-sampling (counted, never lost), Laplace noise of
scale R/ε on the range attributes (clamped to a configured domain), the randomness source, and
the guarantees of the released (perturbed) classes, checked by the independent checker."""

from __future__ import annotations

import math
import pickle
import random

import numpy as np
import pytest

from streamanon.castle import CastleAnonymizer, CastleRow, Released, RuleSet
from streamanon.castle.cluster import ClusterSet
from streamanon.castle.dp import NOT_SAMPLED, OsRandom, Perturbation
from streamanon.errors import ConfigError
from streamanon.records import Suppressed
from streamanon.verify.castle import check_castle, rules_from_toml

CHECKER_RULES = """id = "u"
[[attribute]]
name = "age"
generalizer = "range"
domain = [0, 100]
[[attribute]]
name = "city"
generalizer = "hierarchy"
paths = [["EU", "FR"], ["EU", "DE"], ["US"]]
[[attribute]]
name = "dx"
sensitive = true
"""


def _rules(domain: bool = True) -> RuleSet:
    age = {"name": "age", "generalizer": "range"}
    if domain:
        age["domain"] = [0, 100]
    return RuleSet.from_dict({"id": "u", "attribute": [
        age, {"name": "city", "generalizer": "hierarchy",
              "paths": [["EU", "FR"], ["EU", "DE"], ["US"]]},
        {"name": "dx", "sensitive": True}]})


def _rows(n: int = 3000, seed: int = 2) -> list[dict]:
    rnd = random.Random(seed)
    return [{"u": f"p{rnd.randrange(60)}", "age": rnd.randint(20, 80),
             "city": rnd.choice(["FR", "DE", "US"]), "dx": rnd.choice("abcd")}
            for _ in range(n)]


def _run(rows: list[dict], **kw) -> tuple[list, CastleAnonymizer]:
    op = CastleAnonymizer(_rules(kw.pop("domain", True)), k=4, l=2, delta=80, beta=10, **kw)
    out = [r for i, row in enumerate(rows) for r in op.process(CastleRow(row, i + 1))]
    return out + op.flush(), op


class _Item:
    def __init__(self, *values: float) -> None:
        self.numbers = np.array(values, dtype=np.float64)


@pytest.mark.parametrize("kw", [{"epsilon": 0, "beta": None}, {"epsilon": -1, "beta": None},
                                {"epsilon": math.inf, "beta": None},
                                {"epsilon": None, "beta": 0}, {"epsilon": None, "beta": 1.5}])
def test_bad_parameters_are_refused(kw) -> None:
    with pytest.raises(ConfigError, match="dp_"):
        Perturbation(**kw)
    with pytest.raises(ConfigError, match="dp_"):
        CastleAnonymizer(_rules(), dp_epsilon=kw["epsilon"], dp_beta=kw["beta"])


def test_left_out_tuples_are_suppressed_with_their_reason_and_counted() -> None:
    rows = _rows()
    out, op = _run(rows, dp_beta=0.7, dp_rng=np.random.default_rng(5))
    s = op.summary()
    left_out = [r for r in out if isinstance(r, Suppressed) and r.reason == NOT_SAMPLED]
    assert s["suppressed_by_reason"][NOT_SAMPLED] == len(left_out)
    assert s["read"] == len(rows) == s["released"] + s["suppressed"] and s["held"] == 0
    # a Binomial(3000, 0.3) count: within 5 standard deviations of its mean
    assert abs(len(left_out) - 900) < 5 * math.sqrt(3000 * 0.3 * 0.7)
    assert len(out) == len(rows)  # every tuple comes out once: released or suppressed


def test_an_injected_generator_makes_a_run_reproducible() -> None:
    rows = _rows(1500)
    a, _ = _run(rows, dp_epsilon=2.0, dp_beta=0.8, dp_rng=np.random.default_rng(11))
    b, _ = _run(rows, dp_epsilon=2.0, dp_beta=0.8, dp_rng=np.random.default_rng(11))
    c, _ = _run(rows, dp_epsilon=2.0, dp_beta=0.8, dp_rng=np.random.default_rng(12))

    def values(out: list) -> list:
        return [(type(r).__name__, getattr(r, "values", None)) for r in out]

    assert values(a) == values(b)
    assert values(a) != values(c)


def test_noise_is_laplace_of_scale_domain_over_epsilon_clamped_to_the_domain() -> None:
    wide = ClusterSet(RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "x", "generalizer": "range", "domain": [-10_000, 10_000]}]}))
    dp = Perturbation(epsilon=40.0, beta=None, rng=np.random.default_rng(3))
    n = 40_000
    xs = np.empty(n)
    for i in range(n):
        it = _Item(0.0)
        assert dp.admit(wide, it)
        xs[i] = it.numbers[0]
    # scale 20000/40 = 500, 20 scales from the ends: E|X| = b, sd = b sqrt 2, median 0
    assert abs(np.mean(np.abs(xs)) - 500) < 15
    assert abs(np.std(xs) - 500 * math.sqrt(2)) < 30
    assert abs(np.median(xs)) < 15
    narrow = ClusterSet(RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "y", "generalizer": "range", "domain": [0, 10]}]}))
    dp = Perturbation(epsilon=4.0, beta=None, rng=np.random.default_rng(4))
    ys = np.empty(n)
    for i in range(n):
        it = _Item(5.0)
        dp.admit(narrow, it)
        ys[i] = it.numbers[0]
    # scale 10/4 = 2.5, clamped into [0, 10]: each end takes its tail's mass
    assert ys.min() == 0 and ys.max() == 10
    tail = math.exp(-5 / 2.5) / 2  # P(Laplace(2.5) > 5)
    assert abs(np.mean(ys == 10) - tail) < 0.01 and abs(np.mean(ys == 0) - tail) < 0.01
    # E|clamped noise| = b (1 - e^(-5/b))
    assert abs(np.mean(np.abs(ys - 5)) - 2.5 * (1 - math.exp(-2))) < 0.05
    far = _Item(1e9)  # a value outside the domain is clamped into it before the noise
    dp.admit(narrow, far)
    assert 0 <= far.numbers[0] <= 10


def test_without_a_domain_the_scale_is_the_range_seen_so_far_at_least_one(monkeypatch) -> None:
    import streamanon.castle.dp as dp_module

    monkeypatch.setattr(dp_module, "_BLOCK", 1)  # each fresh operator below draws one tuple
    cset = ClusterSet(RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "x", "generalizer": "range"}]}))
    first = []
    for _ in range(2000):  # every value alike: the range is 0, the scale the floor 1/2
        fresh = Perturbation(epsilon=2.0, beta=None, rng=np.random.default_rng(len(first)))
        it = _Item(7.0)
        fresh.admit(cset, it)
        first.append(it.numbers[0] - 7.0)
    assert abs(np.mean(np.abs(first)) - 0.5) < 0.05
    monkeypatch.setattr(dp_module, "_BLOCK", 4096)
    dp = Perturbation(epsilon=2.0, beta=None, rng=np.random.default_rng(4))
    for v in (0.0, 1000.0):
        dp.admit(cset, _Item(v))
    noise = []
    for _ in range(20_000):
        it = _Item(500.0)
        dp.admit(cset, it)
        noise.append(it.numbers[0] - 500.0)
    assert abs(np.mean(np.abs(noise)) - 500) < 15  # scale 1000/2


def test_released_classes_keep_k_and_l_on_the_perturbed_values() -> None:
    rows = _rows()
    out, op = _run(rows, dp_epsilon=1.0, dp_beta=0.9, dp_rng=np.random.default_rng(8))
    released = [r.values for r in out if isinstance(r, Released)]
    assert len(released) > 2000
    spec = rules_from_toml(CHECKER_RULES)
    report = check_castle(released, spec, k=4, l=2)
    assert report.ok, report.first_problem
    assert report.k_violations == 0 and report.l_violations == 0
    # the coverage check against the input cannot hold for perturbed values (documented)
    pairs = [(r.line, r.values) for r in out if isinstance(r, Released)]
    covered = check_castle(pairs, spec, k=4, l=2,
                           inputs=[(i + 1, row) for i, row in enumerate(rows)],
                           suppressed=[(r.record.line, r.record.values) for r in out
                                       if isinstance(r, Suppressed)])
    assert not covered.ok and covered.not_covered > 0
    for v in released:  # ranges inside the configured domain: nothing widened
        lo, hi = (float(x) for x in v["age"].strip("[]").split(","))
        assert 0 <= lo <= hi <= 100
    assert op.summary()["domains_widened"] == {}
    # the noise moved values: some released range no longer holds its tuple's true age
    moved = 0
    for r in out:
        if isinstance(r, Released):
            lo, hi = (float(x) for x in r.values["age"].strip("[]").split(","))
            moved += not lo <= rows[r.line - 1]["age"] <= hi
    assert moved > 0


def test_categorical_and_sensitive_values_are_not_perturbed() -> None:
    rows = _rows(800)
    out, _ = _run(rows, dp_epsilon=0.5, dp_rng=np.random.default_rng(1))
    for r in out:
        if isinstance(r, Released):
            given = rows[r.line - 1]
            assert r.values["dx"] == given["dx"] and r.values["u"] == given["u"]
            assert r.values["city"] in {given["city"], "EU", "*"}


def test_no_dp_options_change_nothing() -> None:
    rows = _rows(1500)
    plain, _ = _run(rows)
    off, _ = _run(rows, dp_epsilon=None, dp_beta=None)
    assert [getattr(r, "values", None) for r in plain] == \
        [getattr(r, "values", None) for r in off]


def test_the_os_source_gives_uniforms_in_the_half_open_unit_interval_and_keeps_no_draws() -> None:
    u = OsRandom().random(100_000)
    assert u.min() > 0 and u.max() <= 1 and abs(u.mean() - 0.5) < 0.01
    dp = Perturbation(epsilon=1.0, beta=0.5)
    cset = ClusterSet(_rules())
    dp.admit(cset, _Item(30.0))
    assert dp._draws  # a block was drawn
    copy = pickle.loads(pickle.dumps(dp))
    assert copy._draws == [] and len(copy._by_set) == 1  # unused noise is not kept
    seeded = Perturbation(epsilon=1.0, beta=0.5, rng=np.random.default_rng(0))
    seeded.admit(cset, _Item(30.0))
    assert pickle.loads(pickle.dumps(seeded))._draws == seeded._draws  # reproducible


def test_the_observed_range_survives_a_pickle_of_the_operator() -> None:
    rows = _rows(400)
    op = CastleAnonymizer(_rules(domain=False), k=4, l=2, delta=80, dp_epsilon=1.0,
                          dp_rng=np.random.default_rng(2))
    for row in rows[:200]:
        op.process(row)
    again = pickle.loads(pickle.dumps(op))
    entry = again._dp._by_set[0]
    assert entry[0] is again._current  # the rule set and its ranges travel together
    assert 20 <= entry[3][0] < 30 and 70 < entry[4][0] <= 80
    assert [getattr(r, "values", None) for row in rows[200:] for r in again.process(row)] == \
        [getattr(r, "values", None) for row in rows[200:] for r in op.process(row)]


def test_the_block_entry_samples_and_perturbs_as_process_does() -> None:
    from streamanon.data import ashrae

    rules = RuleSet.from_toml(ashrae.rules_toml())
    numeric = set(ashrae.NUMERIC_QI) | {"timestamp"}
    data = [{k: float(v) if k in numeric else str(v) for k, v in r.items()}
            for r in ashrae.generate(1200, seed=4)]
    options = {"k": 5, "delta": 200, "dp_epsilon": 3.0, "dp_beta": 0.8}
    one = CastleAnonymizer(rules, **options, dp_rng=np.random.default_rng(9))
    expected = [x for i, r in enumerate(data) for x in one.process(CastleRow(r, i + 2))]
    expected += one.flush()
    block = CastleAnonymizer(rules, **options, dp_rng=np.random.default_rng(9))
    got: list = []
    for lo in range(0, len(data), 300):
        part = data[lo:lo + 300]
        numbers = {name: [r[name] for r in part] for name in part[0] if name in numeric}
        texts = {}
        for name in part[0]:
            if name not in numeric:
                distinct: dict[str, int] = {}
                codes = [distinct.setdefault(r[name], len(distinct)) for r in part]
                texts[name] = (list(distinct), codes)
        rows = iter([CastleRow(r, lo + i + 2) for i, r in enumerate(part)])
        items, taken, error = block.process_block(rows, n=len(part), numbers=numbers,
                                                  texts=texts)
        assert error is None and taken == len(part)
        got += items
    got += block.flush()

    def outcome(items: list) -> list:
        return [(type(x).__name__, getattr(x, "line", None), getattr(x, "reason", None),
                 sorted(getattr(x, "values", {}).items(), key=str)) for x in items]

    assert outcome(got) == outcome(expected)
    assert block.summary() == one.summary()
    assert one.summary()["suppressed_by_reason"][NOT_SAMPLED] > 100


def test_a_checkpoint_identity_lists_the_options_as_json_and_a_generator_by_its_kind() -> None:
    import json

    from streamanon.pipeline.positions import LinePositions
    from streamanon.pipeline.stages import CastleStage

    def identity(**kw) -> dict:
        op = CastleAnonymizer(_rules(), k=3, l=2, dp_epsilon=1.5, dp_beta=0.5, **kw)
        return json.loads(json.dumps(CastleStage(op, LinePositions("in.csv")).identity()))

    os_run = identity()
    assert os_run["dp_epsilon"] == 1.5 and os_run["dp_beta"] == 0.5
    assert os_run["dp_rng"] is None
    assert identity(dp_rng=np.random.default_rng(1))["dp_rng"] == "Generator"
    stats = CastleStage(CastleAnonymizer(_rules(), dp_beta=0.5),
                        LinePositions("in.csv")).stats()
    assert stats.params["dp_beta"] == 0.5 and "dp_rng" not in stats.params
