"""The core install works without any extra, and a command of a missing extra says which one
to install in one line (no traceback).

Each check runs a fresh interpreter whose ``sitecustomize`` (given through ``PYTHONPATH``)
refuses to import the modules of every extra and reports each refused import on stderr, as
an install without the extras would behave.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamanon.extras import EXTRA_OF_MODULE, install_hint, missing_extra

BLOCKER = """import importlib.abc, sys

BLOCKED = frozenset({names!r})


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            sys.stderr.write(f"BLOCKED-IMPORT {{name}}\\n")
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.fixture(scope="module")
def core_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("no-extras")
    (folder / "sitecustomize.py").write_text(BLOCKER.format(names=sorted(EXTRA_OF_MODULE)))
    src = Path(__file__).resolve().parents[1] / "src"
    path = os.pathsep.join([str(folder), str(src), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "100"}


def run(env: dict[str, str], *args: str, cwd: Path | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600, check=False)


def test_the_blocker_blocks(core_env):
    res = run(core_env, "-c", "import cryptography")
    assert res.returncode != 0 and "BLOCKED-IMPORT cryptography" in res.stderr


def test_the_core_runs_z_and_castle_without_any_extra(core_env, tmp_path):
    setup = """if True:
    import streamanon, streamanon.cli
    from streamanon import CastleAnonymizer, ZAnonymizer, run_castle, run_z
    from streamanon.data import ashrae

    with open("in.csv", "w") as fh:
        fh.write("t,u,a\\n")
        for i in range(200):
            fh.write(f"{i},u{i % 7},v{i % 3}\\n")
    ashrae.write_csv("castle.csv", ashrae.generate(120, seed=2))
    with open("rules.toml", "w") as fh:
        fh.write(ashrae.rules_toml())
"""
    res = run(core_env, "-c", setup, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "BLOCKED-IMPORT" not in res.stderr, res.stderr[-3000:]
    for argv in (["z", "--z", "2", "--delta-t", "30", "in.csv", "-o", "z.csv"],
                 ["verify", "z", "--z", "2", "--delta-t", "30", "in.csv", "z.csv"],
                 ["castle", "--rules", "rules.toml", "--k", "3", "--l", "0", "--delta", "60",
                  "castle.csv", "-o", "castle-out.csv"]):
        res = run(core_env, "-m", "streamanon", *argv, cwd=tmp_path)
        assert res.returncode == 0, (argv, res.stderr[-3000:])
        assert "BLOCKED-IMPORT" not in res.stderr, (argv, res.stderr[-3000:])
    assert (tmp_path / "z.csv").read_text().startswith("t,u,a")
    assert len((tmp_path / "castle-out.csv").read_text().splitlines()) > 1


def test_the_help_imports_no_extra(core_env):
    res = run(core_env, "-m", "streamanon", "--help")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "simulate" in res.stdout and "cluster" in res.stdout
    assert "BLOCKED-IMPORT" not in res.stderr


@pytest.mark.parametrize("args", [
    ("simulate", "--days", "0.1"),
    ("pki", "init", "pki-folder", "--gateways", "3"),
])
def test_a_command_of_a_missing_extra_names_it_in_one_line(core_env, tmp_path, args):
    res = run(core_env, "-m", "streamanon", *args, cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-3000:]
    lines = [ln for ln in res.stderr.splitlines() if not ln.startswith("BLOCKED-IMPORT")]
    assert lines == [lines[0]] and "pip install 'streamanon[dezent]'" in lines[0], lines
    assert "Traceback" not in res.stderr


def test_install_hint_names_the_extra_of_a_module_and_nothing_else():
    assert missing_extra(ModuleNotFoundError(name="matplotlib.pyplot")) == "plots"
    assert "streamanon[kafka]" in (install_hint(ModuleNotFoundError(name="confluent_kafka"))
                                   or "")
    assert install_hint(ModuleNotFoundError(name="numpy")) is None
