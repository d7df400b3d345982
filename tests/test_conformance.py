"""Every check of the operator contract (streamanon.conformance) on every public operator:
ZAnonymizer, AdaptiveZAnonymizer, CastleAnonymizer and the deZent ring (DezentRing over the
protocol's Gateway, whose extra check is that exact counting equals the centralized rule), each
from the plain data its class carries (_conformance_params).

Each check also has to fail on an operator that breaks its rule: the mutants below.
"""

from __future__ import annotations

import dataclasses
import inspect
import random

import pytest

from streamanon import conformance
from streamanon.base import OperatorBase
from streamanon.conformance import CASES, Case, ConformanceError, yield_checks
from streamanon.records import Suppressed
from streamanon.zanon import ZAnonymizer

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


def test_every_public_operator_reads_its_parameters_back() -> None:
    for cls in conformance.public_operators():
        assert issubclass(cls, OperatorBase)
        case = conformance.case_of(cls)
        assert conformance.check_params in case.extra
        op = case.make(case.seed)
        given = op.params()
        assert set(given) | set(case.positional) == set(
            inspect.signature(cls).parameters), cls.__name__
        again = cls(**{n: getattr(op, n) for n in case.positional}, **given)
        assert again.params() == given


def test_the_operators_data_names_its_keys_and_checks() -> None:
    class Typo(ZAnonymizer):
        @classmethod
        def _conformance_params(cls):
            return {**super()._conformance_params(), "record": []}

    class UnknownCheck(ZAnonymizer):
        @classmethod
        def _conformance_params(cls):
            return {**super()._conformance_params(), "checks": ("no_such_rule",)}

    class OldStyle(ZAnonymizer):
        @classmethod
        def _conformance_params(cls):
            return CASES["z"]()

    with pytest.raises(ConformanceError, match="unknown keys \\['record'\\]"):
        conformance.case_of(Typo)
    with pytest.raises(ConformanceError, match="no extra check 'no_such_rule'"):
        conformance.case_of(UnknownCheck)
    with pytest.raises(ConformanceError, match="must give a dict"):
        conformance.case_of(OldStyle)
    ring = CASES["dezent-ring"]()
    assert ring.extra == [conformance.check_params,
                          conformance.check_ring_equals_centralized_rule]
    assert (ring.make(5).seed, ring.make(5).params()["seed"]) == (5, 5)


def test_params_reads_back_the_keyword_parameters() -> None:
    from streamanon.castle import CastleAnonymizer
    from streamanon.zanon import ZAnonymizer

    assert ZAnonymizer(z=4, delta_t=60.0).params() == {"z": 4, "delta_t": 60.0,
                                                       "separator": "*"}
    case = CASES["castle"]()
    op = case.make(case.seed)
    params = op.params()
    assert list(params) == ["k", "l", "delta", "beta", "mu", "zeta", "suppression",
                            "max_delay", "loss_field", "split", "diversity", "c", "t",
                            "reference", "closeness", "t_hierarchy", "missing", "dp_epsilon",
                            "dp_beta", "dp_rng", "hierarchy_scope", "static", "static_ttl",
                            "static_max"]
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


class Tightens(ZAnonymizer):
    """Raises its z as records arrive, so that its parameters no longer say how it was built."""

    def __init__(self, *, z: int = 3, delta_t: float = 300, separator: str = "*") -> None:
        super().__init__(z=z, delta_t=delta_t, separator=separator)

    def process(self, record):
        if self.read % 50 == 49:
            self.z += 1
        return super().process(record)


class Unsaved(OperatorBase, Loses):
    """Takes a parameter it keeps no attribute for."""

    def __init__(self, *, z: int = 2, every: int = 10) -> None:
        super().__init__(z=z)


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
    (Loses, conformance.check_params, "params"),
    (Tightens, conformance.check_params, "params"),
    (Unsaved, conformance.check_params, "params"),
])
def test_each_check_catches_an_operator_breaking_its_rule(cls, check, rule) -> None:
    with pytest.raises(ConformanceError, match=rule):
        check(broken_case(cls))


def test_the_ring_check_catches_a_ring_publishing_too_much() -> None:
    case = CASES["dezent-ring"]()

    def lax(seed):
        ring = case.make(seed)
        loose = dataclasses.replace(ring.config, z=1)
        for g in ring.nodes:  # the gateways count with z = 1, the check with z = 3
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
