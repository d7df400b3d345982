"""``--config FILE.toml`` of ``z``, ``castle``, ``flink z`` and ``flink castle``, as real
processes: the file's keys are the long option names, the command line wins, unknown keys
are refused with the key and the file named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamanon.data import ashrae
from streamanon.data.traces import write_trace, zipf_trace

EXE = Path(sys.executable).with_name("streamanon")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "trace.csv", zipf_trace(600, n_users=30, n_values=40,
                                                           levels=2, seed=7))


def test_z_takes_its_options_from_the_file_and_the_command_line_wins(tmp_path, trace) -> None:
    ref3, ref5, got, won = (tmp_path / f"{n}.csv" for n in ("ref3", "ref5", "got", "won"))
    assert run("z", "--z", "3", "--delta-t", "600", "--on-error", "skip", str(trace), "-o",
               str(ref3)).returncode == 0
    assert run("z", "--z", "5", "--delta-t", "600", "--on-error", "skip", str(trace), "-o",
               str(ref5)).returncode == 0
    assert ref3.read_bytes() != ref5.read_bytes()
    cfg = tmp_path / "z.toml"
    cfg.write_text('z = 3\ndelta_t = 600.0\non-error = "skip"\n')
    res = run("z", "--config", str(cfg), str(trace), "-o", str(got))
    assert res.returncode == 0, res.stderr
    assert got.read_bytes() == ref3.read_bytes()
    res = run("z", "--z", "5", str(trace), "-o", str(won), "--config", str(cfg))
    assert res.returncode == 0, res.stderr
    assert won.read_bytes() == ref5.read_bytes()


def test_castle_takes_its_options_from_the_file(tmp_path) -> None:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(300, seed=2))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    ref, got = tmp_path / "ref.csv", tmp_path / "got.csv"
    assert run("castle", "--rules", str(rules), "--k", "4", "--delta", "100", str(data), "-o",
               str(ref)).returncode == 0
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'rules = "{rules}"\nk = 4\ndelta = 100\n')
    res = run("castle", "--config", str(cfg), str(data), "-o", str(got))
    assert res.returncode == 0, res.stderr
    assert got.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize("command", [["z"], ["castle"], ["flink", "z"], ["flink", "castle"]])
def test_an_unknown_key_is_refused_naming_the_key_and_the_file(tmp_path, command) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("delta-tt = 5\n")
    res = run(*command, "--config", str(cfg), str(tmp_path / "in.csv"), "-o",
              str(tmp_path / "out.csv"))
    assert res.returncode == 2
    assert "'delta-tt'" in res.stderr and str(cfg) in res.stderr, res.stderr
    assert not (tmp_path / "out.csv").exists()


def test_a_file_that_is_not_toml_is_refused(tmp_path, trace) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("z = = 3\n")
    res = run("z", "--config", str(cfg), str(trace), "-o", str(tmp_path / "o.csv"))
    assert res.returncode == 2 and "not a TOML file" in res.stderr, res.stderr
