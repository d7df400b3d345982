"""``--delimiter``: semicolon and tab separated inputs of ``z`` and ``castle`` (real processes)
give the released output, byte for byte, and the rejects of the same comma file, and ``verify``
reads them with the same option."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamanon.data import ashrae, traces

SEPARATORS = [(";", ";", "';'-separated"), ("tab", "\t", "tab-separated"),
              ("\\t", "\t", "tab-separated")]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamanon", *args], capture_output=True,
                          text=True, env=os.environ.copy(), timeout=300, check=False)


def _rejects(path: Path, sep: str, wording: str) -> list[dict[str, object]]:
    """The rejects as the comma file's would read (the line's text and the field-count
    wording follow the input's delimiter; source names differ by file name)."""
    out = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        obj.pop("source")
        obj["text"] = str(obj["text"]).replace(sep, ",")
        obj["reason"] = str(obj["reason"]).replace(wording, "comma-separated")
        out.append(obj)
    return out


def _delimited(src: Path, dst: Path, sep: str) -> Path:
    text = src.read_text()
    assert '"' not in text and sep not in text
    dst.write_text(text.replace(",", sep))
    return dst


@pytest.mark.parametrize(("option", "sep", "wording"), SEPARATORS)
def test_z_reads_semicolon_and_tab_files_as_the_comma_file(tmp_path, option, sep,
                                                           wording) -> None:
    rows = traces.zipf_trace(4000, n_users=40, n_values=30, seed=5)
    lines = ["t,u,a", *(f"{t},{u},{a}" for t, u, a in rows)]
    lines[40:40] = ["soon,u1,x", "12,u2", "13,,x"]
    comma = tmp_path / "in.csv"
    comma.write_text("\n".join(lines) + "\n")
    other = _delimited(comma, tmp_path / "in.txt", sep)
    outs = {}
    for name, path, extra in (("comma", comma, []), ("other", other, ["--delimiter", option])):
        out = tmp_path / f"{name}.csv"
        res = _run("z", "--z", "3", "--delta-t", "600", "--on-error", "skip", *extra,
                   str(path), "-o", str(out))
        assert res.returncode == 0, res.stderr
        outs[name] = out
    assert outs["comma"].read_bytes() == outs["other"].read_bytes()
    assert outs["comma"].read_bytes().startswith(b"t,u,a\n")
    assert _rejects(Path(f"{outs['other']}.rejects.jsonl"), sep, wording) == _rejects(
        Path(f"{outs['comma']}.rejects.jsonl"), ",", "comma-separated")
    assert len(_rejects(Path(f"{outs['comma']}.rejects.jsonl"), ",", "")) == 3
    res = _run("verify", "z", "--z", "3", "--delta-t", "600", "--delimiter", option,
               str(other), str(outs["other"]))
    assert res.returncode == 0, res.stdout + res.stderr
    # without the option the checker cannot read the semicolon file as t,u,a
    assert _run("verify", "z", "--z", "3", "--delta-t", "600", str(other),
                str(outs["other"])).returncode != 0


@pytest.mark.parametrize(("option", "sep", "wording"), SEPARATORS[:2])
def test_castle_reads_semicolon_and_tab_files_as_the_comma_file(tmp_path, option, sep,
                                                                wording) -> None:
    comma = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(800, seed=4))
    lines = comma.read_text().splitlines()
    header = lines[0].split(",")
    lines[30:30] = [",".join(["x"] * (len(header) - 1)), ",".join(["y"] * len(header))]
    comma.write_text("\n".join(lines) + "\n")
    other = _delimited(comma, tmp_path / "in.txt", sep)
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    outs = {}
    for name, path, extra in (("comma", comma, []), ("other", other, ["--delimiter", option])):
        out = tmp_path / f"{name}.csv"
        res = _run("castle", "--rules", str(rules), "--k", "4", "--l", "2", "--delta", "80",
                   "--on-error", "skip", "--suppressed", str(tmp_path / f"{name}.sup.csv"),
                   *extra, str(path), "-o", str(out))
        assert res.returncode == 0, res.stderr
        outs[name] = out
    assert outs["comma"].read_bytes() == outs["other"].read_bytes()
    assert (tmp_path / "comma.sup.csv").read_bytes() == (tmp_path / "other.sup.csv").read_bytes()
    got = _rejects(Path(f"{outs['other']}.rejects.jsonl"), sep, wording)
    assert got == _rejects(Path(f"{outs['comma']}.rejects.jsonl"), ",", "comma-separated")
    assert len(got) == 2
    res = _run("verify", "castle", "--rules", str(rules), "--k", "4", "--l", "2",
               "--input", str(other), "--delimiter", option,
               "--rejects", f"{outs['other']}.rejects.jsonl",
               "--suppressed", str(tmp_path / "other.sup.csv"), str(outs["other"]))
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_delimiter_that_names_no_character_is_refused(tmp_path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("t,u,a\n1,u,x\n")
    res = _run("z", "--z", "1", "--delta-t", "1", "--delimiter", "ab", str(path))
    assert res.returncode == 2
    assert "--delimiter" in res.stderr
