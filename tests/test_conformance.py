"""Every check of the operator contract (streamanon.conformance) on every registered operator:
ZAnonymizer, AdaptiveZAnonymizer, CastleAnonymizer and the deZent ring (DezentRing over the
protocol's Gateway, whose extra check is that exact counting equals the centralized rule).

Each check also has to fail on an operator that breaks its rule: the mutants below.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from streamanon import conformance
from streamanon.conformance import CASES, Case, ConformanceError, yield_checks
from streamanon.records import Suppressed

CHECKS = [(name, check) for name, factory in CASES.items() for check in yield_checks(factory())]


@pytest.mark.parametrize(("name", "check"), CHECKS,
                         ids=[f"{n}-{c.__name__.removeprefix('check_')}" for n, c in CHECKS])
def test_contract(name: str, check) -> None:
    check(CASES[name]())


def test_every_public_operator_carries_a_case() -> None:
    ops = conformance.public_operators()
    assert {c.__name__ for c in ops} == {"ZAnonymizer", "AdaptiveZAnonymizer",
                                         "CastleAnonymizer", "DezentRing"}
    for cls in ops:
        assert conformance.case_of(cls).cls is cls
    assert set(CASES) == {"z", "z-adaptive", "castle", "dezent-ring"}


def test_a_public_operator_without_a_case_fails() -> None:
    with pytest.raises(ConformanceError, match="without a conformance case"):
        conformance.case_of(Loses)


def test_params_reads_back_the_keyword_parameters() -> None:
    from streamanon.castle import CastleAnonymizer
    from streamanon.zanon import ZAnonymizer

    assert ZAnonymizer(z=4, delta_t=60.0).params() == {"z": 4, "delta_t": 60.0,
                                                       "separator": "*"}
    case = CASES["castle"]()
    op = case.make(case.seed)
    params = op.params()
    assert list(params) == ["k", "l", "delta", "beta", "mu", "zeta", "suppression",
                            "max_delay", "loss_field"]
    assert (params["k"], params["l"], params["delta"], params["max_delay"]) == (3, 2, 25, 200)
    again = CastleAnonymizer(op.rules, **params)  # rebuilt from its parameters: same output
    assert conformance.run(case, again, case.records) == conformance.run(
        case, case.make(case.seed), case.records)


# -- the checks catch broken operators ---------------------------------------------------------
class Loses:
    """Drops every tenth record without a word."""

    def __init__(self, *, z: int = 2) -> None:
        """An operator that loses records.

        >>> Loses().flush()
        []
        """
        self.read = self.released = 0

    def process(self, record):
        self.read += 1
        if record.line % 10 == 0:
            return []
        self.released += 1
        return [record]

    def advance(self, now):
        return []

    def flush(self):
        return []

    def summary(self):
        return {"read": self.read, "released": self.released, "suppressed": 0, "held": 0}


class Leaky(Loses):
    """Holds records in a cache the pickle forgets; accepts anything."""

    def __init__(self, z: int = 2) -> None:
        super().__init__()
        self.cache: list = []

    def process(self, record):
        self.read += 1
        self.cache.append(record)
        if len(self.cache) < 3:
            return []
        out, self.cache = self.cache, []
        self.released += len(out)
        return out

    def flush(self):
        out, self.cache = self.cache, []
        self.released += len(out)
        return out

    def summary(self):
        return {"read": self.read, "released": self.released, "suppressed": 0,
                "held": len(self.cache)}

    def __getstate__(self):
        return {**self.__dict__, "cache": []}


def broken_case(cls) -> Case:
    base = CASES["z"]()
    return Case("mutant", lambda seed: cls(), base.records, base.bad, base.line_of,
                base.time_of)


@pytest.mark.parametrize(("cls", "check", "rule"), [
    (Loses, conformance.check_accounting, "accounting"),
    (Leaky, conformance.check_pickling, "pickling"),
    (Leaky, conformance.check_bad_records, "bad_records"),
    (Leaky, conformance.check_keyword_only, "keyword_only"),
    (Leaky, conformance.check_docstring_example, "docstring_example"),
])
def test_each_check_catches_an_operator_breaking_its_rule(cls, check, rule) -> None:
    with pytest.raises(ConformanceError, match=rule):
        check(broken_case(cls))


def test_the_ring_check_catches_a_ring_publishing_too_much() -> None:
    case = CASES["dezent-ring"]()

    def lax(seed):
        ring = case.make(seed)
        loose = dataclasses.replace(ring.config, z=1)
        for g in ring.gateways:  # the gateways count with z = 1, the check with z = 3
            g.config = loose
        return ring

    with pytest.raises(ConformanceError, match="centralized_rule"):
        conformance.check_ring_equals_centralized_rule(Case(
            case.name, lax, case.records, case.bad, case.line_of, case.time_of))


def test_determinism_catches_an_operator_that_ignores_its_seed() -> None:
    class Coin(Loses):
        def process(self, record):
            self.read += 1
            if random.random() < 0.5:
                self.released += 1
                return [record]
            return [Suppressed(record)]

    base = CASES["z"]()
    case = Case("coin", lambda seed: Coin(), base.records, [], base.line_of, base.time_of)
    with pytest.raises(ConformanceError, match="determinism"):
        conformance.check_determinism(case)
