"""The example operator of the "Operator contract" page (docs/examples/group_release.py, shown
on the page as it is) passes every conformance check, its docstring example included; and the
same checks catch it once it is broken."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from streamanon.conformance import CHECKS, Case, ConformanceError, yield_checks
from streamanon.errors import BadValueError, MissingFieldError, TimeOrderError
from streamanon.records import Record, Suppressed
from streamanon.zanon.operator import z_stream

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "group_release.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("group_release", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["group_release"] = module  # the docstring check and pickling look it up here
    spec.loader.exec_module(module)
    yield module
    del sys.modules["group_release"]


def line_of(item):
    return (item.record if isinstance(item, Suppressed) else item).line


def case_for(make) -> Case:
    bad = [(Record(0.0, "late", "x"), TimeOrderError, "t"),
           (Record(float("nan"), "u1", "x"), BadValueError, "t"),
           (Record(1e12, "  ", "x"), MissingFieldError, "u"),
           (Record(1e12, "u1", ""), MissingFieldError, "a")]
    return Case("group-release", make, records=z_stream(), bad=bad, line_of=line_of,
                time_of=lambda r: r.t)


def test_the_pages_example_passes_every_check(example) -> None:
    case = case_for(lambda seed: example.GroupRelease(k=3, max_wait=120))
    ran = []
    for check in yield_checks(case):
        check(case)  # raises ConformanceError naming the rule on a failure
        ran.append(check.__name__)
    assert ran == [c.__name__ for c in CHECKS]
    op = case.make(case.seed)
    for r in case.records:
        op.process(r)
    op.flush()
    s = op.summary()  # the stream exercises both outcomes, so the checks are not vacuous
    assert s["released"] > 0 and s["suppressed"] > 0 and s["read"] == len(case.records)


def test_the_checks_catch_the_example_once_broken(example) -> None:
    class ForgetsAtFlush(example.GroupRelease):
        def flush(self):
            self.held.clear()  # held records vanish without being suppressed
            return []

    ForgetsAtFlush.__module__ = "group_release"
    example.ForgetsAtFlush = ForgetsAtFlush
    case = case_for(lambda seed: ForgetsAtFlush(k=3, max_wait=120))
    from streamanon.conformance import check_accounting

    with pytest.raises(ConformanceError, match="accounting"):
        check_accounting(case)
