"""The README's quick tour runs literally, top to bottom, in an empty folder.

The block between the ``quick-tour`` markers of README.md is run as one bash script with
``set -e``, except two lines that have tests of their own and need more than this test should
take: ``streamanon cluster up`` (real TLS daemons, ~13 s: tests/net) and ``streamanon flink``
(PyFlink and Java: tests/flink). The README's CASTLE rules example then runs on the demo's data.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = ("streamanon cluster up", "streamanon flink")


def readme_block(name: str) -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"\[start:{name}\] -->\n```\w*\n(.*?)```\n<!-- --8<-- \[end:{name}\]",
                      text, re.S)
    assert match, f"README.md has no {name} block"
    return match.group(1)


@pytest.mark.slow
def test_readme_quick_tour_runs_in_an_empty_folder(tmp_path) -> None:
    lines = readme_block("quick-tour").splitlines()
    run = [ln for ln in lines if not ln.startswith(SKIPPED)]
    assert len(lines) - len(run) == 2, "the skipped lines changed: update SKIPPED"
    script = "set -euo pipefail\n" + "\n".join(run) + "\n"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    res = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    demo = tmp_path / "streamanon-demo"
    for name in ("trace.csv", "in.csv", "rules.toml", "published.csv", "published.jsonl",
                 "out.csv"):
        assert (demo / name).stat().st_size > 0, name
    assert "Traceback" not in res.stderr

    # the README's rules example works on the demo's in.csv, and its output verifies
    (demo / "readme-rules.toml").write_text(readme_block("rules-toml"))
    for args in (["castle", "--rules", "readme-rules.toml", "--k", "5", "--l", "2", "in.csv",
                  "-o", "readme-out.csv"],
                 ["verify", "castle", "readme-out.csv", "--rules", "readme-rules.toml", "--k",
                  "5", "--l", "2", "--input", "in.csv"]):
        res = subprocess.run(["streamanon", *args], cwd=demo, capture_output=True, text=True,
                             env=env, timeout=300)
        assert res.returncode == 0, (args, res.stderr[-2000:])
