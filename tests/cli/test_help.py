"""Help that teaches: brackets rendered, usage names that match, every option described, an
example per command; and progress that stays silent off a terminal."""

from __future__ import annotations

import io
import re

import pytest
import typer.main
import typer.rich_utils  # imported here, not first inside an invoke that sets TERMINAL_WIDTH
from rich.console import Console
from typer.testing import CliRunner

from streamanon.cli import app, common

# typer.rich_utils reads TERMINAL_WIDTH once, when it is imported: had an invoke below with
# TERMINAL_WIDTH=200 imported it, every later help page of the process would be 200 wide
runner = CliRunner()

#: Commands whose help must show an example.
WITH_EXAMPLE = [("z",), ("castle",), ("simulate",), ("demo",), ("experiment", "castle"),
       ("experiment", "dezent"), ("flink", "z"), ("flink", "castle"), ("flink", "merge")]
#: Commands whose options are not yet all described: checked for rendering only.
RENDERING_ONLY = {("verify", "castle"), ("verify", "z"), ("cluster", "up"), ("cluster", "init")}


def commands() -> list[tuple[tuple[str, ...], object]]:
    out = []

    def walk(path: tuple[str, ...], command: object) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk((*path, name), sub)
        else:
            out.append((path, command))

    walk((), typer.main.get_command(app))
    return out


def flat(text: str) -> str:
    """Rendered help without box drawing and line breaks, for substring checks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.mark.parametrize(("path", "command"), commands(), ids=lambda x: " ".join(x)
                         if isinstance(x, tuple) else "")
def test_every_help_renders_its_brackets_and_argument_names(path, command) -> None:
    res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert res.exit_code == 0, res.output
    shown = flat(res.stdout)
    for param in command.params:  # type: ignore[attr-defined]
        help_text = (getattr(param, "help", None) or "").replace("\\[", "[")
        for bracketed in re.findall(r"\[[^\]]*\]", help_text):
            assert bracketed in shown, (path, param.name, bracketed)
        if param.param_type_name == "argument":
            assert param.metavar and param.metavar.isupper(), (path, param.name)
            assert param.metavar in res.stdout.split("Usage:")[1].splitlines()[0]


@pytest.mark.parametrize(("path", "command"), [c for c in commands() if c[0] not in RENDERING_ONLY],
                         ids=lambda x: " ".join(x) if isinstance(x, tuple) else "")
def test_every_option_is_described(path, command) -> None:
    for param in command.params:  # type: ignore[attr-defined]
        if param.name != "help":
            assert getattr(param, "help", None), (path, param.name)


@pytest.mark.parametrize("path", WITH_EXAMPLE, ids=" ".join)
def test_commands_show_an_example(path) -> None:
    res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert f"streamanon {' '.join(path)} " in res.stdout.split("Example")[1], path


def test_the_castle_output_help_shows_its_range_format() -> None:
    """The finding: 'ranges as );' because rich ate [lo,hi]."""
    res = runner.invoke(app, ["castle", "--help"], env={"COLUMNS": "200"})
    assert "ranges as [lo,hi]" in flat(res.stdout)


def test_format_options_name_what_they_set() -> None:
    for path in (("z",), ("castle",), ("flink", "z"), ("flink", "castle")):
        command = typer.main.get_command(app)
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        opts = {o for p in command.params for o in p.opts}
        assert {"--input-format", "--output-format"} <= opts and "--format" not in opts


def test_progress_only_on_a_terminal(tmp_path, monkeypatch) -> None:
    big = tmp_path / "big.csv"
    big.write_bytes(b"t,u,a\n" + b"1,a,x\n" * 2000)
    monkeypatch.setattr(common, "err_console", Console(file=io.StringIO()))
    with common.file_progress(big, "reading", min_bytes=1) as progress:
        assert progress is None  # not a terminal: silent
    screen = io.StringIO()
    monkeypatch.setattr(common, "err_console", Console(file=screen, force_terminal=True))
    with common.file_progress(big, "reading", min_bytes=1) as progress:
        assert progress is not None
        progress(big.stat().st_size)
    assert "reading" in screen.getvalue()
    with common.file_progress(big, "reading") as progress:
        assert progress is None  # a small file: no bar even on a terminal


@pytest.mark.parametrize(("path", "command"), commands(), ids=lambda x: " ".join(x)
                         if isinstance(x, tuple) else "")
def test_flags_are_shown_as_flags_not_as_bool_values(path, command) -> None:
    res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output


def test_cluster_help_promises_no_report_that_only_simulate_makes() -> None:
    for path in (["cluster", "up"], ["cluster", "init"]):
        text = flat(runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output)
        assert "Reported:" not in text and "linkability" not in text, path
        assert "position bias" not in text
    text = flat(runner.invoke(app, ["simulate", "--help"], env={"COLUMNS": "200"}).output)
    assert "Reported: gateway linkability" in text and "position bias" in text


def test_version_and_completion() -> None:
    import os
    import subprocess
    import sys

    import streamanon

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"streamanon {streamanon.__version__}"
    script = [sys.executable, "-c", "import sys; sys.argv[0] = 'streamanon'; "
              "from streamanon.cli import main; main()"]
    env = {**os.environ, "_STREAMANON_COMPLETE": "source_bash"}
    done = subprocess.run(script, env=env, capture_output=True, text=True, timeout=60)
    assert "complete" in done.stdout and "_streamanon_completion" in done.stdout, done.stderr
    env.update(_STREAMANON_COMPLETE="complete_bash", COMP_WORDS="streamanon ca",
               COMP_CWORD="1")
    done = subprocess.run(script, env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["castle"], done.stderr


def test_the_root_exit_table_names_the_kafka_exception() -> None:
    text = flat(runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output)
    assert "130 interrupted" in text and "Kafka topic" in text and "exits 0" in text


def test_ce_export_of_a_missing_store_writes_nothing_to_stdout(tmp_path) -> None:
    res = runner.invoke(app, ["ce", "export", "--store", str(tmp_path / "nosuch.sqlite")])
    assert res.exit_code == 2
    assert res.stdout == "" and "no such SQLite file" in res.stderr
    assert not (tmp_path / "nosuch.sqlite").exists()
