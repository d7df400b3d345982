"""CASTLE on Flink: the CASTLE checker's guarantees, the same accounting, exact per partition,
and a kill after a checkpoint plus a restore at another parallelism that changes nothing.

With P partitions the job runs one CASTLE operator per partition of the individuals, so its
released rows must be exactly (as a multiset) those of the pure-Python ``run_castle`` on each
partition's sub-stream; across partitions the checker must still find k and l in every
equivalence class, and every input line must be accounted for as with ``streamanon castle``.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.cli.castle import run_castle
from streamanon.data import ashrae
from streamanon.flink.castle_rows import partition_of
from streamanon.io import OnError
from streamanon.io.rows import read_rows
from streamanon.verify.castle import check_castle
from tests.flink.conftest import require_flink, run_and_kill_after_checkpoint, streamanon

require_flink()
pytestmark = pytest.mark.flink

K, L, DELTA, PARTITIONS = 5, 2, 150, 2
N = 3000
PARAMS = {"k": K, "l": L, "delta": DELTA, "beta": 50, "mu": 10, "zeta": 10}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("castle")
    path = ashrae.write_csv(root / "ashrae.csv", ashrae.generate(N, seed=3))
    lines = path.read_text().splitlines()
    lines[2001:2001] = ["", "1,2,3"]  # blank (skipped) and too few fields (rejected)
    lines[501:501] = ["," + lines[500].split(",", 1)[1]]  # an empty building_id: rejected
    path.write_text("\n".join(lines) + "\n")
    rules = root / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    return path, rules


def castle_args(data: Path, rules: Path, out: Path, parallelism: int = 2) -> list[str]:
    return ["flink", "castle", "--rules", str(rules), "--k", str(K), "--l", str(L), "--delta",
            str(DELTA), "-p", str(parallelism), "--partitions", str(PARTITIONS), str(data),
            "-o", str(out), "--on-error", "skip"]


@pytest.fixture(scope="module")
def uninterrupted(data, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("castle-flink") / "released.csv"
    return out, streamanon(*castle_args(*data, out))


def pure_per_partition(data: Path, rules: Path, work: Path) -> Counter:
    """Released rows of the pure operator run on each partition's sub-stream."""
    with data.open(newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    id_col = header.index(RuleSet.load(rules).id_field)
    released: Counter = Counter()
    for p in range(PARTITIONS):
        part = work / f"part{p}.csv"
        with part.open("w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(header)
            w.writerows(r for r in body if len(r) == len(header) and r[id_col].strip()
                        and partition_of(r[id_col], PARTITIONS) == p)
        out = work / f"released{p}.csv"
        run_castle(part, out, CastleAnonymizer(RuleSet.load(rules), **PARAMS))
        released.update(out.read_text().splitlines()[1:])
    return released


def test_flink_castle_is_castle_per_partition_and_passes_the_checker(data, uninterrupted,
                                                                      tmp_path):
    (path, rules), (out, summary) = data, uninterrupted
    assert Counter(out.read_text().splitlines()[1:]) == pure_per_partition(path, rules,
                                                                           tmp_path)
    rs = RuleSet.load(rules)
    report = check_castle(read_rows(out), rs.id_field, rs.quasi_identifiers, rs.sensitive,
                          k=K, l=L, inputs=read_rows(path, on_error="skip"))
    assert report.ok, report.first_problem
    pure = run_castle(path, tmp_path / "pure.csv", CastleAnonymizer(rs, **PARAMS),
                      on_error=OnError.skip)
    assert summary["read"] == pure.read and summary["rejected"] == pure.rejected == 2
    assert summary["balanced"] and summary["released"] == report.rows > 0
    assert summary["released"] + summary["suppressed"] == pure.released + pure.suppressed
    assert Path(f"{out}.rejects.jsonl").read_text().count("\n") == 2


def test_castle_kill_after_checkpoint_and_restore_at_another_parallelism_changes_nothing(
        data, uninterrupted, tmp_path):
    """Killed at parallelism 1 (both partitions in one subtask), resumed at 2: each partition
    is a key group whose state (snapshot + redo log) moves whole to its new subtask."""
    work, out = tmp_path / "work", tmp_path / "restored.csv"
    fixed = ["--snapshot-every", "400", "--batch-size", "100"]
    written = run_and_kill_after_checkpoint([*castle_args(*data, out, parallelism=1), *fixed,
                                             "--checkpoint-interval", "1000",
                                             "--unaligned-checkpoints", "--pace", "0.004"],
                                            work)
    assert written < N, "the kill came after the job had written everything"
    summary = streamanon(*castle_args(*data, out), *fixed, "--work-dir", str(work),
                         "--restore", "latest")
    assert summary["params"]["parallelism"] == 2
    flink_out, flink_summary = uninterrupted
    assert out.read_bytes() == flink_out.read_bytes()
    for key in ("read", "released", "suppressed", "rejected", "suppressed_by_reason"):
        assert summary[key] == flink_summary[key], key


def test_flink_castle_takes_entropy_diversity_and_t_closeness(tmp_path):
    import random

    rnd = random.Random(4)
    data = tmp_path / "in.csv"
    with data.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["u", "a", "s"])
        for _ in range(600):
            w.writerow([f"p{rnd.randrange(30)}", rnd.randint(0, 99),
                        rnd.choices("vwxyz", weights=[50, 20, 15, 10, 5])[0]])
    rules = tmp_path / "rules.toml"
    rules.write_text('id = "u"\n[[attribute]]\nname = "a"\ngeneralizer = "range"\n'
                     '[[attribute]]\nname = "s"\nsensitive = true\n')
    options = ["--k", "3", "--l", "3", "--delta", "60", "--beta", "8", "--diversity",
               "entropy", "--t", "0.2", "--t-reference", str(data)]
    out = tmp_path / "flink.csv"
    summary = streamanon("flink", "castle", "--rules", str(rules), *options, "-p", "1",
                         "--partitions", "1", str(data), "-o", str(out))
    assert summary["params"]["t"] == 0.2 and "reference" not in summary["params"]
    pure = tmp_path / "pure.csv"
    streamanon("castle", "--rules", str(rules), *options, str(data), "-o", str(pure))
    assert Counter(out.read_text().splitlines()) == Counter(pure.read_text().splitlines())
    assert summary["released"] > 0
    streamanon("verify", "castle", str(out), "--rules", str(rules), *options[:4],
               "--diversity", "entropy", "--t", "0.2", "--t-reference", str(data),
               "--input", str(data))


def test_flink_castle_takes_hierarchical_closeness_and_the_dp_options(tmp_path):
    import random

    rnd = random.Random(6)
    data = tmp_path / "in.csv"
    with data.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["u", "a", "s"])
        for _ in range(600):
            w.writerow([f"p{rnd.randrange(30)}", rnd.randint(0, 99),
                        rnd.choices("vwxyz", weights=[50, 20, 15, 10, 5])[0]])
    rules = tmp_path / "rules.toml"
    rules.write_text('id = "u"\n[[attribute]]\nname = "a"\ngeneralizer = "range"\n'
                     'domain = [0, 99]\n[[attribute]]\nname = "s"\nsensitive = true\n')
    tree = tmp_path / "tree.toml"
    tree.write_text('[s]\npaths = [["c", "v"], ["c", "w"], ["r", "x"], ["r", "y"], '
                    '["r", "z"]]\n')
    options = ["--k", "3", "--l", "2", "--delta", "60", "--beta", "8", "--t", "0.1",
               "--t-reference", str(data), "--closeness", "hierarchical", "--t-hierarchy",
               str(tree)]
    out = tmp_path / "flink.csv"
    summary = streamanon("flink", "castle", "--rules", str(rules), *options, "-p", "1",
                         "--partitions", "1", str(data), "-o", str(out))
    assert summary["params"]["closeness"] == "hierarchical"
    assert "t_hierarchy" not in summary["params"]
    pure = tmp_path / "pure.csv"
    streamanon("castle", "--rules", str(rules), *options, str(data), "-o", str(pure))
    assert Counter(out.read_text().splitlines()) == Counter(pure.read_text().splitlines())
    streamanon("verify", "castle", str(out), "--rules", str(rules), *options[:4], *options[8:],
               "--input", str(data))
    # DP: the left-out tuples are counted per partition, the classes still verify
    dp = tmp_path / "dp.csv"
    summary = streamanon("flink", "castle", "--rules", str(rules), *options[:8], "-p", "1",
                         "--partitions", "1", "--dp-epsilon", "4", "--dp-beta", "0.6",
                         str(data), "-o", str(dp))
    assert summary["params"]["dp_beta"] == 0.6
    left_out = summary["suppressed_by_reason"]["not sampled (dp-beta)"]
    assert 150 < left_out < 330  # Binomial(600, 0.4): mean 240, sd 12
    assert summary["read"] == summary["released"] + summary["suppressed"]
    streamanon("verify", "castle", str(dp), "--rules", str(rules), *options[:4])
