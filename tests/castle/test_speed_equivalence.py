"""The compiled best selection and the block-wise file adapters change nothing: same output.

Three checks. (1) Byte for byte against the code of commit dc80046 (the last before the
kernel), unpacked from git history: ``benchmarks/castle_cases.py`` runs seeded random streams
and rule sets (ranges with configured or adaptive domains, hierarchies with GLM/NCP/PRL and
growth, reduction, a plug-in, max_delay, every suppression mode, rule changes, bad tuples)
and an ASHRAE-shaped stream on both, and every output line must agree. (2) The kernel's
choice equals the rule written out with numpy (the previous implementation's formulas: loss
rows as a matrix product, ties within 1e-12, τ, β, fewest individuals) on random cluster sets
whose values lie on coarse grids, so that exact ties are common. (3) The file adapters
(``RowReader`` by blocks with Arrow's parser for clean ones, ``RowWriter`` without the csv
module for plain rows) against commit 5461bb8, the last that read line by line: random streams
written as CSV files with broken lines, read, anonymized and written, same text and rejections.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamanon.castle import CastleAnonymizer, CastleRow, RuleSet
from streamanon.castle.cluster import OPEN, TIED

REPO = Path(__file__).resolve().parents[2]
REFERENCE = "dc80046"
#: The last commit that read CSV files line by line and wrote rows with the csv module (its
#: rejections already echo lines as written, which dc80046's did not).
IO_REFERENCE = "5461bb8"
EPS = 1e-12


def _reference_sources(tmp: Path, commit: str = REFERENCE) -> Path | None:
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"],
                                 capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(tmp, filter="data")
    return tmp / "src"


def _cases(pythonpath: Path | None, *args: str) -> str:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    cmd = [sys.executable, str(REPO / "benchmarks" / "castle_cases.py"),
           *(args or ("--cases", "80", "--ashrae", "2500"))]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True,
                          timeout=600).stdout


def test_output_is_byte_identical_to_the_numpy_best_selection(tmp_path: Path) -> None:
    old = _reference_sources(tmp_path)
    if old is None:
        pytest.skip(f"commit {REFERENCE} is not in this clone's history")
    before, after = _cases(old), _cases(None)
    kinds = [line.split(" ", 1)[0] for line in after.splitlines()]
    assert kinds.count("summary") == 80 + 2  # every case ran to its end
    assert kinds.count("R") > 10_000 and kinds.count("S") > 1_000
    for number, (x, y) in enumerate(zip(before.splitlines(), after.splitlines(),
                                        strict=True), start=1):
        assert x == y, f"line {number} differs:\nbefore {x}\nafter  {y}"


def test_file_adapters_read_and_write_what_the_line_by_line_code_did(tmp_path: Path) -> None:
    """Streams written as CSV files with broken lines mixed in, read by blocks (clean ones
    through Arrow), anonymized and written: the same text and rejections as commit 5461bb8."""
    old = _reference_sources(tmp_path, IO_REFERENCE)
    if old is None:
        pytest.skip(f"commit {IO_REFERENCE} is not in this clone's history")
    args = ("--cases", "0", "--files", "40")
    before, after = _cases(old, *args), _cases(None, *args)
    kinds = [line.split(" ", 1)[0] for line in after.splitlines()]
    assert kinds.count("file") == 40 and kinds.count("W") > 2_000 and kinds.count("J") > 300
    for number, (x, y) in enumerate(zip(before.splitlines(), after.splitlines(),
                                        strict=True), start=1):
        assert x == y, f"line {number} differs:\nbefore {x}\nafter  {y}"


def _numpy_rule(lh: np.ndarray, nodes: np.ndarray, x: np.ndarray, cat: list[int],
                inv: np.ndarray, hloss: list[np.ndarray], lca: list[np.ndarray],
                sizes: list[int], tau: float, beta: int) -> int:
    """The best selection as the numpy code before the kernel wrote it (-1: open)."""
    xx = np.concatenate((-x, x))
    grown = np.maximum(lh, xx)
    cur, new = lh @ inv, grown @ inv
    for j, (loss, table) in enumerate(zip(hloss, lca, strict=True)):
        cur = cur + loss[nodes[:, j], nodes[:, j]]
        new = new + loss[table[nodes[:, j], cat[j]], table[nodes[:, j], cat[j]]]
    e = new - cur
    i = int(e.argmin())
    ties = e <= float(e[i]) + EPS
    n = len(lh)
    if np.count_nonzero(ties) == 1:
        return i if float(new[i]) <= tau + EPS or n >= beta else -1
    cand = np.flatnonzero(ties)
    ok = cand[new[cand] <= tau + EPS]
    pick = ok if ok.size else (cand if n >= beta else None)
    if pick is None:
        return -1
    if pick.size == 1:
        return int(pick[0])
    return int(pick[int(np.argmin([sizes[int(p)] for p in pick]))])


@st.composite
def cluster_sets(draw: st.DrawFn) -> dict:
    rules = {"id": "u", "attribute": [
        {"name": f"x{i}", "generalizer": "range",
         "weight": draw(st.sampled_from([1.0, 0.5, 0.0]))}
        for i in range(draw(st.integers(1, 4)))]}
    if draw(st.booleans()):
        rules["attribute"].append({"name": "p", "generalizer": "hierarchy", "paths": [
            ["EU", "FR", "Paris"], ["EU", "FR", "Lyon"], ["EU", "DE"], ["US", "NY"]]})
    grid = st.integers(-4, 4).map(lambda v: v / 2)
    leaves = st.sampled_from(["Paris", "Lyon", "DE", "NY", "FR"])

    def row(i: int) -> dict:
        r = {"u": f"p{draw(st.integers(0, 6))}", "line": i}
        for a in rules["attribute"]:
            r[a["name"]] = draw(leaves) if a["generalizer"] == "hierarchy" else draw(grid)
        return r

    return {"rules": rules, "rows": [row(i) for i in range(draw(st.integers(2, 40)))],
            "tau": draw(st.sampled_from([0.0, 0.05, 0.2, 1.0])),
            "beta": draw(st.integers(1, 8))}


@settings(max_examples=150, deadline=None)
@given(cluster_sets())
def test_the_kernel_chooses_what_the_rule_written_in_numpy_chooses(case: dict) -> None:
    op = CastleAnonymizer(RuleSet.from_dict(case["rules"]), k=50, l=0, delta=10_000,
                          beta=case["beta"], split="prink")  # CASTLE's best selection
    rows = case["rows"]
    for r in rows[:-1]:
        op.process(CastleRow(r))
    cset = op._current
    assert cset is not None
    item, hier_raw, other_raw = cset.parse(CastleRow(rows[-1]), 10_000)
    cset.observe(item, hier_raw, other_raw)
    dom = np.array([[g.lo for g in cset.num], [g.hi for g in cset.num]])
    if ((item.numbers < dom[0]) | (item.numbers > dom[1])).any():
        cset._widen(item.numbers)
    n = len(cset.clusters)
    lh, nodes = cset.bounds.copy(), cset.nodes.copy()
    hloss, lca = [], []
    for j, g in enumerate(cset.hier):
        m = len(g.tree.names)
        table = g.tree.lca_table()[:m, :m]
        lca.append(table)
        hloss.append(cset.w_hier[j] * g.loss_vector()[table])
    sizes = [len(c.individuals) for c in cset.clusters]
    expected = _numpy_rule(lh, nodes, item.numbers, item.nodes, cset._inv, hloss, lca, sizes,
                           case["tau"], case["beta"])
    cset.place(item, case["tau"], case["beta"], EPS)
    if expected == OPEN:
        assert len(cset.clusters) == n + 1 and cset.clusters[-1].items == [item]
    else:
        assert item.cluster is cset.clusters[expected]
        assert np.array_equal(cset.bounds[expected], np.maximum(
            lh[expected], np.concatenate((-item.numbers, item.numbers))))
    assert TIED < OPEN
