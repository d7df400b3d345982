"""The diversity checker (entropy, recursive (c,l)) finds deliberately broken releases."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.errors import ConfigError
from streamanon.verify.diversity import check_diversity, check_diversity_file

QI, SA = ["a"], ["s"]


def _release(measure: str, l: int, c: float | None = None) -> list[dict]:  # noqa: E741
    rules = RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "a", "generalizer": "range"}, {"name": "s", "sensitive": True}]})
    rnd = random.Random(3)
    rows = [{"u": f"p{rnd.randrange(20)}", "a": rnd.randint(0, 50),
             "s": rnd.choices("wxyz", weights=[6, 2, 1, 1])[0]} for _ in range(400)]
    op = CastleAnonymizer(rules, k=3, l=l, delta=50, beta=6, diversity=measure, c=c)
    out = [x for r in rows for x in op.process(r)] + op.flush()
    return [dict(x.values) for x in out if isinstance(x, Released)]


def _classes(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        out[r["a"]].append(r)
    return out


@pytest.mark.parametrize(("measure", "l", "c"), [("entropy", 2, None), ("recursive", 2, 2.0),
                                                 ("recursive", 3, 3.0)])
def test_genuine_release_passes_and_each_mutation_is_caught(measure: str, l: int,  # noqa: E741
                                                            c: float | None) -> None:
    rows = _release(measure, l, c)
    assert rows
    assert check_diversity(rows, qi=QI, sensitive=SA, measure=measure, l=l, c=c).ok
    biggest = max(_classes(rows).values(), key=len)
    # 1. one class's sensitive values all made the most frequent one but one
    broken = [dict(r) for r in rows]
    victims = [r for r in broken if r["a"] == biggest[0]["a"]]
    for r in victims[1:]:
        r["s"] = victims[0]["s"] if victims[0]["s"] != victims[-1]["s"] else "w"
    if len({r["s"] for r in victims}) == 1:
        victims[0]["s"] = "other"
    report = check_diversity(broken, qi=QI, sensitive=SA, measure=measure, l=l, c=c)
    assert not report.ok and report.violations == 1
    assert biggest[0]["a"] in (report.first_problem or "")
    # 2. rows of the most frequent value moved into another class (a skewed merge)
    broken = [dict(r) for r in rows]
    target = biggest[0]["a"]
    extra = [dict(r, a=target) for r in broken if r["s"] == "w" and r["a"] != target]
    report = check_diversity(broken + extra * 3, qi=QI, sensitive=SA, measure=measure, l=l,
                             c=c)
    assert not report.ok
    # 3. the sensitive value of a class's rows erased (a missing value is no value)
    broken = [dict(r) for r in rows]
    for r in broken:
        if r["a"] == target:
            r["s"] = None
    assert not check_diversity(broken, qi=QI, sensitive=SA, measure=measure, l=l, c=c).ok


def test_worst_figures_and_off_rule() -> None:
    rows = [{"a": "x", "s": v} for v in "aabc"] + [{"a": "y", "s": v} for v in "ab"]
    ent = check_diversity(rows, qi=QI, sensitive=SA, measure="entropy", l=2)
    assert ent.ok and ent.classes == 2 and ent.worst["s"] == 2.0
    rec = check_diversity(rows, qi=QI, sensitive=SA, measure="recursive", l=2, c=1.5)
    assert rec.ok and rec.worst["s"] == 1.0  # class y: r1 / r2 = 1; class x: 2 / 2
    assert not check_diversity(rows, qi=QI, sensitive=SA, measure="recursive", l=2, c=1).ok
    assert check_diversity(rows, qi=QI, sensitive=SA, measure="entropy", l=1).ok
    with pytest.raises(ConfigError):
        check_diversity(rows, qi=QI, sensitive=SA, measure="recursive", l=2)
    with pytest.raises(ConfigError):
        check_diversity(rows, qi=QI, sensitive=SA, measure="gini", l=2)


def test_numbers_by_value_and_files_read_alike(tmp_path) -> None:
    rows = [{"a": 1, "s": 1}, {"a": 1.0, "s": 1.0}, {"a": "1", "s": 2}]
    report = check_diversity(rows, qi=QI, sensitive=SA, measure="entropy", l=2)
    assert report.classes == 1 and not report.ok  # counts [2, 1]: entropy 0.64 < ln 2
    path = tmp_path / "out.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = check_diversity_file(path, qi=QI, sensitive=SA, measure="entropy", l=2)
    assert again.to_dict() == report.to_dict()


def test_closeness_mutations_are_caught() -> None:
    from streamanon.castle.diversity import reference_of
    from streamanon.verify.diversity import check_closeness, reference_from_rows

    rules = RuleSet.from_dict({"id": "u", "attribute": [
        {"name": "a", "generalizer": "range"}, {"name": "s", "sensitive": True}]})
    rnd = random.Random(8)
    rows = [{"u": f"p{rnd.randrange(20)}", "a": rnd.randint(0, 50),
             "s": rnd.choice("wxyz")} for _ in range(400)]
    op = CastleAnonymizer(rules, k=3, l=0, delta=50, beta=6, t=0.2,
                          reference=reference_of(rows, ["s"]))
    out = [x for r in rows for x in op.process(r)] + op.flush()
    released = [dict(x.values) for x in out if isinstance(x, Released)]
    ref = reference_from_rows(rows, ["s"])
    assert check_closeness(released, qi=QI, sensitive=SA, t=0.2, reference=ref).ok
    target = max(_classes(released).values(), key=len)[0]["a"]
    broken = [dict(r, s="w") if r["a"] == target else r for r in released]
    report = check_closeness(broken, qi=QI, sensitive=SA, t=0.2, reference=ref)
    assert not report.ok and report.violations == 1 and target in (report.first_problem or "")
    # a reference skewed away from the one the release was made with: classes now stray
    skewed = {"s": {"w": 97, "x": 1, "y": 1, "z": 1}}
    assert not check_closeness(released, qi=QI, sensitive=SA, t=0.2, reference=skewed).ok
    with pytest.raises(ConfigError, match="no reference"):
        check_closeness(released, qi=QI, sensitive=SA, t=0.2, reference={})
