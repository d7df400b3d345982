"""The checkers share no code with what they check.

* Source: every module of ``streamanon.verify`` imports, of streamanon, only
  ``streamanon.records``, ``streamanon.errors`` and the package's own modules (read from the
  source, so that a lazy import inside a function counts too).
* Import graph, in a fresh interpreter: checking files with ``streamanon.verify.z`` and with
  ``streamanon.verify.castle`` loads nothing of ``streamanon.io``, ``streamanon.zanon`` or
  ``streamanon.castle``.
* Call graph of the commands: ``streamanon verify z`` and ``verify castle`` run (traced with
  ``sys.setprofile``) without calling a single function of the readers, the operators, the
  rules or the generalizers, although the CLI process has them loaded for other commands.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import streamanon
from streamanon.cli import app
from streamanon.data import ashrae
from streamanon.data.traces import write_trace, zipf_trace

SRC = Path(streamanon.__file__).parent
OPERATOR_CODE = [SRC / "io", SRC / "zanon" / "operator.py", SRC / "zanon" / "adaptive.py",
                 *(SRC / "castle" / f"{m}.py" for m in ("operator", "cluster", "rules",
                                                       "generalizers", "hierarchy", "loss"))]


#: What ``streamanon.verify`` may import of streamanon, besides its own modules.
ALLOWED = {"streamanon.records", "streamanon.errors"}


def streamanon_imports(path: Path) -> set[str]:
    """The streamanon modules a source file imports (anywhere in it)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.add("streamanon.verify")  # a relative import stays in the package
            elif node.module:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names
                             if node.module == "streamanon")
    return {n for n in names if n == "streamanon" or n.startswith("streamanon.")}


def test_the_checkers_import_only_records_and_errors() -> None:
    files = sorted((SRC / "verify").rglob("*.py"))
    assert {f.name for f in files} >= {"__init__.py", "z.py", "castle.py", "_read.py"}
    for f in files:
        outside = {n for n in streamanon_imports(f)
                   if n != "streamanon.verify" and not n.startswith("streamanon.verify.")}
        assert outside <= ALLOWED, (f.name, sorted(outside - ALLOWED))


def test_the_source_rule_catches_a_forbidden_import(tmp_path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from streamanon.io.rows import read_rows\n"
                   "from streamanon import zanon\nfrom . import _read\n")
    assert streamanon_imports(bad) == {"streamanon.io.rows", "streamanon", "streamanon.zanon",
                                       "streamanon.verify"}


def loaded_outside(loaded: list[str]) -> list[str]:
    """The loaded streamanon modules that a check may not load."""
    return [m for m in loaded if m not in ALLOWED and m not in ("streamanon", "streamanon._lazy")
            and m != "streamanon.verify" and not m.startswith("streamanon.verify.")]


def modules_after(code: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def z_files(tmp_path: Path) -> tuple[Path, Path]:
    src = write_trace(tmp_path / "trace.csv", zipf_trace(400, n_users=30, n_values=40,
                                                          levels=2, seed=3))
    out = tmp_path / "out.csv"
    res = CliRunner().invoke(app, ["z", "--z", "3", "--delta-t", "600", str(src), "-o",
                                   str(out)])
    assert res.exit_code == 0, res.output
    return src, out


def castle_files(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(500, seed=4))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    out, sup = tmp_path / "out.csv", tmp_path / "sup.csv"
    res = CliRunner().invoke(app, ["castle", "--rules", str(rules), "--k", "4", "--l", "2",
                                   "--delta", "200", str(data), "-o", str(out),
                                   "--suppressed", str(sup)])
    assert res.exit_code == 0, res.output
    return data, rules, out, sup


def test_the_z_checker_loads_neither_the_readers_nor_the_operators(tmp_path) -> None:
    src, out = z_files(tmp_path)
    loaded = modules_after(
        "import json, sys\n"
        "from streamanon.verify.z import check_z_files\n"
        "report = check_z_files(sys.argv[1], sys.argv[2], 3, 600.0)\n"
        "assert report.ok and report.input_tuples == 400, report.first_problem\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('streamanon'))))\n",
        str(src), str(out))
    assert "streamanon.verify.z" in loaded
    assert loaded_outside(loaded) == []


def test_the_castle_checker_loads_nothing_of_the_operator(tmp_path) -> None:
    data, rules, out, sup = castle_files(tmp_path)
    loaded = modules_after(
        "import json, sys\n"
        "from streamanon.verify.castle import check_castle_files, load_rules\n"
        "report = check_castle_files(sys.argv[1], load_rules(sys.argv[2]), k=4, l=2,\n"
        "                            source=sys.argv[3], suppressed=sys.argv[4])\n"
        "assert report.ok and report.unverified == 0, report.first_problem\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('streamanon'))))\n",
        str(out), str(rules), str(data), str(sup))
    assert "streamanon.verify.castle" in loaded
    assert loaded_outside(loaded) == []


def traced(args: list[str]) -> tuple[int, set[str]]:
    """Run a command in this process; the files of every Python function it called."""
    files: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            files.add(frame.f_code.co_filename)

    runner = CliRunner()
    sys.setprofile(profile)
    try:
        res = runner.invoke(app, args)
    finally:
        sys.setprofile(None)
    return res.exit_code, files


def operator_files(files: set[str]) -> list[str]:
    hits = []
    for f in files:
        path = Path(f).resolve()
        if any(path == p or p in path.parents for p in OPERATOR_CODE):
            hits.append(str(path.relative_to(SRC)))
    return sorted(hits)


def test_verify_commands_call_no_reader_and_no_operator_code(tmp_path) -> None:
    src, out = z_files(tmp_path)
    code, files = traced(["verify", "z", "--z", "3", "--delta-t", "600", str(src), str(out),
                          "--json"])
    assert code == 0
    assert any(f.endswith(str(Path("verify") / "z.py")) for f in files)
    assert operator_files(files) == []
    data, rules, out, sup = castle_files(tmp_path)
    code, files = traced(["verify", "castle", str(out), "--rules", str(rules), "--k", "4",
                          "--l", "2", "--input", str(data), "--suppressed", str(sup), "--json"])
    assert code == 0
    assert any(f.endswith(str(Path("verify") / "castle.py")) for f in files)
    assert operator_files(files) == []
