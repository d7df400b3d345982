"""``streamanon.flink.z_anonymize`` and ``castle`` inside a user's own PyFlink job (a
collection source, a collected output): the released records are the pure operators'."""

from __future__ import annotations

import csv
import json
import random
from collections import Counter

import pytest

from tests.flink.conftest import require_flink

require_flink()
pytestmark = pytest.mark.flink


def records(n: int) -> list[dict]:
    rng = random.Random(3)
    t, out = 0.0, []
    for i in range(n):
        t += rng.random()
        out.append({"t": round(t, 3), "u": f"u{rng.randrange(40)}",
                    "a": f"R{rng.randrange(3)}*C{rng.randrange(4)}*V{rng.randrange(5)}",
                    "id": i})
    return out


def user_stream(env, items: list[dict]):
    from pyflink.common import Types

    return (env.from_collection([json.dumps(r) for r in items], type_info=Types.STRING())
            .map(json.loads, output_type=Types.PICKLED_BYTE_ARRAY()).set_parallelism(1))


def test_z_anonymize_releases_what_the_pure_operator_releases_at_parallelism_two():
    from streamanon.flink import z_anonymize
    from streamanon.flink.env import make_env
    from streamanon.records import Record, Suppressed
    from streamanon.zanon.operator import ZAnonymizer

    items = records(3000)
    op = ZAnonymizer(z=3, delta_t=30)
    want: Counter = Counter()
    for r in items:
        out = op.process_one(Record(r["t"], r["u"], r["a"], str(r["t"])))
        if not isinstance(out, Suppressed):
            want[(r["id"], r["t"], r["u"], out.a)] += 1
    env = make_env(parallelism=2, checkpoint_interval_ms=500)
    released = z_anonymize(user_stream(env, items), z=3, delta_t=30, batch_size=64)
    got = Counter((r["id"], r["t"], r["u"], r["a"]) for r in released.execute_and_collect())
    assert got == want and 0 < sum(want.values()) < len(items)


def test_castle_releases_what_the_pure_operator_releases(tmp_path):
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.castle.records import CastleRow, Released
    from streamanon.data import ashrae
    from streamanon.flink import castle
    from streamanon.flink.castle_job import numeric_columns
    from streamanon.flink.env import make_env

    path = ashrae.write_csv(tmp_path / "a.csv", ashrae.generate(1500, seed=3))
    rows = list(csv.DictReader(path.open()))
    text = ashrae.rules_toml()
    rules = RuleSet.from_toml(text)
    op = CastleAnonymizer(rules, k=5, l=2, delta=150)
    want: Counter = Counter()
    for i, r in enumerate(rows):
        values = {**r, **{c: float(r[c]) for c in numeric_columns(rules)}}
        out = [*op.process(CastleRow(values, i))]
        want.update(json.dumps(x.values, sort_keys=True) for x in out
                    if isinstance(x, Released))
    want.update(json.dumps(x.values, sort_keys=True) for x in op.flush()
                if isinstance(x, Released))
    env = make_env(parallelism=1, checkpoint_interval_ms=500)
    released = castle(user_stream(env, rows), rules=text, k=5, l=2, delta=150)
    got = Counter(json.dumps(r, sort_keys=True) for r in released.execute_and_collect())
    assert got == want and sum(want.values()) > 0


def test_castle_takes_the_diversity_closeness_and_dp_options_and_checks_them() -> None:
    from streamanon.errors import ConfigError
    from streamanon.flink.operator import castle

    text = ('id = "u"\n[[attribute]]\nname = "a"\ngeneralizer = "range"\n'
            '[[attribute]]\nname = "s"\nsensitive = true\n')
    # refused while the job is built, by the operator the partitions will run
    with pytest.raises(ConfigError, match="needs c > 0"):
        castle(None, rules=text, k=3, l=2, delta=10, diversity="recursive")
    with pytest.raises(ConfigError, match="dp_beta"):
        castle(None, rules=text, k=3, l=2, delta=10, dp_beta=0)
    with pytest.raises(ConfigError, match="hierarchy"):
        castle(None, rules=text, k=3, l=2, delta=10, t=0.2, reference={"s": {"x": 1}},
               closeness="hierarchical")
    with pytest.raises(ConfigError, match="hierarchy_scope must be one of shared, cluster"):
        castle(None, rules=text, k=3, l=2, delta=10, hierarchy_scope="tree")
