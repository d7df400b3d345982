"""``castle --metrics-port 0``: a real run (rows fed on stdin, the process left running)
serves its live figures over HTTP on the port it says; a scrape mid-run gives the operator's
accounting and the re-identification risk gauges of exactly the rows released so far (the
library's figures on the final output's first rows), for the whole release and for the last
complete --risk-window; the summary names the address."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from streamanon.data import ashrae
from streamanon.risk import reidentification_risk

FIGURES = ("prosecutor", "prosecutor_avg", "journalist", "marketer", "sample_uniques",
           "smallest_class", "classes", "rows")


def _scrape(address: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as resp:
        body = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            name = s.name.removesuffix("_total")
            if s.labels:
                name += "{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}"
            out[name] = s.value
    return out


def _live_run(tmp_path: Path, *extra: str) -> tuple[dict[str, float], dict, Path, list[str]]:
    """Feed the whole input on stdin, scrape once every row is read (the tail still held),
    then close stdin: the scrape, the summary, the output and the quasi-identifiers."""
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(1200, seed=6))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    out = tmp_path / "out.csv"
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamanon", "castle", "--rules", str(rules), "--delta",
         "200", "-", "-o", str(out), "--metrics-port", "0", "--json", *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ})
    try:
        said = proc.stderr.readline().decode()
        address = re.search(r"metrics on http://(\S+)/metrics", said).group(1)
        assert address.startswith("127.0.0.1:") and not address.endswith(":0")
        proc.stdin.write(data.read_bytes())
        proc.stdin.flush()
        scraped: dict[str, float] = {}
        deadline = time.monotonic() + 120
        while scraped.get("streamanon_castle_read", 0) < 1200:
            assert time.monotonic() < deadline, scraped
            time.sleep(0.3)
            scraped = _scrape(address)
        stdout, stderr = proc.communicate(timeout=120)  # closes stdin: the end of the input
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr.decode()[-2000:]
    summary = json.loads(stdout.decode().strip().splitlines()[-1])
    qis = [line.split('"')[1] for line in rules.read_text().splitlines()
           if line.startswith("name = ") and "meter_reading" not in line]
    return scraped, summary, out, qis


def _first_rows(out: Path, qis: list[str], n: int) -> list[list[str]]:
    with open(out, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))[:n]
    return [[r[q] for r in rows] for q in qis]


def test_a_live_scrape_gives_the_accounting_and_the_risk_of_the_rows_released_so_far(
        tmp_path: Path) -> None:
    scraped, summary, out, qis = _live_run(tmp_path)
    assert re.fullmatch(r"127\.0\.0\.1:\d+", summary["metrics"]["address"])
    released = int(scraped["streamanon_castle_released"])
    held = int(scraped["streamanon_castle_held"])
    suppressed = sum(v for k, v in scraped.items()
                     if k.startswith("streamanon_castle_suppressed{"))
    assert 0 < released < 1200 and held > 0  # the tail is still held
    assert released + held + suppressed == scraped["streamanon_castle_read"] == 1200
    assert summary["read"] == 1200 == summary["released"] + summary["suppressed"]
    expected = reidentification_risk(_first_rows(out, qis, released)).overall.to_dict()
    for name in FIGURES:
        assert scraped[f"streamanon_release_{name}"] == expected[name], name
    assert scraped["streamanon_release_rows"] == released
    assert scraped["streamanon_release_smallest_class"] >= 5  # k = 5: every class


def test_the_risk_gauges_follow_the_last_complete_window(tmp_path: Path) -> None:
    scraped, _, out, qis = _live_run(tmp_path, "--risk-window", "250", "--static",
                                     "square_feet,year_built")
    released = int(scraped["streamanon_castle_released"])
    assert released >= 250
    windows = reidentification_risk(_first_rows(out, qis, released), window=250).windows
    last = windows[released // 250 - 1].to_dict()
    for name in FIGURES:
        assert scraped[f"streamanon_release_{name}"] == last[name], name
    assert scraped["streamanon_release_rows"] == 250
    assert scraped["streamanon_castle_anchors_kept"] > 0
    assert scraped["streamanon_castle_anchors_forgotten"] == 0
