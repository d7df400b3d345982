"""Start-up stays instant: which modules a bare ``--help`` loads, never its time.

``streamanon --help`` must list every command without importing one, and ``streamanon z
--help`` must load the z command's module and nothing of the engine (numpy, pyarrow, the
pipeline, the readers): each runs in a fresh interpreter, which then reports ``sys.modules``
(``-X importtime`` does not see modules loaded through ``importlib.import_module``, as the
lazy groups load commands). The lazy table of commands must show what the commands
themselves say.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys

import pytest
import typer.main

from streamanon.cli import app
from streamanon.cli.app import (
    ATTACK_COMMANDS,
    COMMANDS,
    EXPERIMENT_COMMANDS,
    VERIFY_COMMANDS,
    LazyCommands,
)

#: Loaded by no bare --help: the engine, the network, the optional extras.
HEAVY = re.compile(r"^(numpy|pyarrow|cryptography|matplotlib|pydantic|pandas|pyflink|"
                   r"confluent_kafka|streamanon\.(pipeline|io|castle|dezent|net|flink|sim|data|"
                   r"zanon|plots))(\.|$)")


#: ``streamanon ARGS`` (the app that ``python -m streamanon`` runs, without the console
#: script's early exit), then the names in ``sys.modules`` on stderr, however it exits.
RUN = """import json, sys
sys.argv = ["streamanon", *json.loads(sys.argv[1])]
try:
    from streamanon.cli import app
    app()
finally:
    sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def modules_after(code: str, *args: str, **env_vars: str) -> set[str]:
    """The modules loaded by the end of ``code`` run in a fresh interpreter (exit 0), with
    ``env_vars`` added to its environment."""
    env = {**os.environ, "COLUMNS": "100", **env_vars}
    res = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True,
                         text=True, env=env, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    return set(json.loads(res.stderr.rsplit("MODULES ", 1)[1]))


def imported(*args: str) -> set[str]:
    """The modules ``streamanon ARGS`` loads."""
    names = modules_after(RUN, *args)
    assert "streamanon.cli.app" in names  # it ran
    return names


def test_the_bare_help_imports_no_command_and_nothing_heavy() -> None:
    names = imported("--help")
    commands = sorted(n for n in names if n.startswith("streamanon.cli.")
                      and n not in ("streamanon.cli.app", "streamanon.cli.exitcodes",
                                    "streamanon.cli.coercion"))
    assert commands == []
    assert sorted(n for n in names if HEAVY.match(n)) == []


@pytest.mark.parametrize("path", [("z",), ("castle",), ("verify",), ("verify", "z"),
                                  ("verify", "castle"), ("experiment",),
                                  ("kafka",), ("pki",), ("risk",), ("attack",),
                                  ("attack", "intersect")], ids=" ".join)
def test_a_command_help_imports_its_module_and_nothing_heavy(path: tuple[str, ...]) -> None:
    names = imported(*path, "--help")
    light = {"streamanon.castle", "streamanon.castle.defaults"}  # castle's defaults, lazy package
    assert sorted(n for n in names - light if HEAVY.match(n)) == []
    # typer's help renderer without what only markdown help and rich tracebacks need
    assert "typer.rich_utils" in names
    assert not {"rich.markdown", "markdown_it", "rich.traceback", "rich.syntax"} & names
    if path == ("z",):
        assert "streamanon.cli.zanon" in names
        assert not {"streamanon.cli.castle", "streamanon.cli.dezent", "streamanon.cli.demo",
                    "streamanon.cli.verify", "streamanon.cli.flink"} & names


Z_RUN = RUN.replace("sys.argv = [", "import tempfile, os\nd = tempfile.mkdtemp()\n"
                    "open(os.path.join(d, 'in.csv'), 'w').write('t,u,a\\n1,u1,x\\n')\n"
                    "os.chdir(d)\nsys.argv = [")
Z_ARGS = ("z", "--z", "1", "--delta-t", "1", "in.csv", "-o", "out.csv")


def test_the_heavy_pattern_catches_what_a_run_loads() -> None:
    """The guard can fail: a real run of z (on Arrow's lane: no C build) loads the engine, and
    the report shows it."""
    names = modules_after(Z_RUN, *Z_ARGS, STREAMANON_NATIVE="0")
    assert {"numpy", "pyarrow", "streamanon.pipeline", "streamanon.io",
            "streamanon.cli.zanon"} <= names
    assert "pydantic" not in names  # plain option values: typer's adapters never built
    assert "cloudpickle" not in names  # pyarrow imported with the standard pickle


def test_a_z_run_on_clean_csv_loads_no_pyarrow() -> None:
    """The C parser's lane reads and writes a clean file: pyarrow (about a fifth of a short
    run's CPU) is never imported, and the summary table is drawn without rich."""
    from streamanon.io import _native

    if _native.load() is None:
        pytest.skip(f"no C build: {_native.unavailable}")
    names = modules_after(Z_RUN, *Z_ARGS)
    assert {"numpy", "streamanon.io._native", "streamanon.zanon._native"} <= names
    assert not {n for n in names if n.split(".")[0] in ("pyarrow", "rich")}  # nor the
    # summary table's rich (off a terminal the table is drawn as plain text)


def test_arrow_loads_without_cloudpickle_which_stays_importable() -> None:
    """pyarrow, imported after the app, binds the standard ``pickle``; a later ``import
    cloudpickle`` (PyFlink's) still gets the real module."""
    code = ("import sys\nimport streamanon.cli.app\nimport pyarrow, pyarrow.lib\n"
            "assert 'cloudpickle' not in sys.modules\n"
            "assert pyarrow.lib.pickle is __import__('pickle')\n"
            "import cloudpickle\nassert cloudpickle.dumps(lambda: 1)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stderr[-2000:]


def castle_run(rows: int) -> str:
    """:data:`RUN` in a fresh folder holding ``in.csv`` (``rows`` ASHRAE-shaped rows) and
    ``rules.toml``."""
    setup = ("import tempfile, os\nd = tempfile.mkdtemp()\nos.chdir(d)\n"
             "from streamanon.data import ashrae\n"
             f"ashrae.write_csv('in.csv', ashrae.generate({rows}, seed=1))\n"
             "open('rules.toml', 'w').write(ashrae.rules_toml())\n")
    return RUN.replace("sys.argv = [", setup + "sys.argv = [")


def test_a_castle_run_loads_no_pydantic() -> None:
    """Path options (the rules file, the input, -o) coerced without typer's pydantic adapter:
    a plain run of castle, and of verify castle on its output, loads no pydantic."""
    run = castle_run(60)
    names = modules_after(run, "castle", "--rules", "rules.toml", "--k", "2", "--l", "1",
                          "in.csv", "-o", "out.csv", "--json")
    assert {"numpy", "streamanon.cli.castle", "streamanon.castle"} <= names
    assert "pydantic" not in names
    again = run.replace("sys.argv = [", "from streamanon.cli import app as _app\n"
                        "try:\n    _app(['castle', '--rules', 'rules.toml', '--k', '2', "
                        "'--l', '1', 'in.csv', '-o', 'out.csv', '--json'])\n"
                        "except SystemExit:\n    pass\nsys.argv = [")
    names = modules_after(again, "verify", "castle", "out.csv", "--rules", "rules.toml",
                          "--k", "2", "--l", "1", "--input", "in.csv", "--json")
    assert "streamanon.verify.castle" in names
    assert "pydantic" not in names
    # a check without rules nor --diversity (the input as its own release, k = 1)
    plain = modules_after(run, "verify", "castle", "in.csv", "--id", "building_id", "--qi",
                          "square_feet", "--k", "1", "--l", "0", "--input", "in.csv", "--json")
    assert "streamanon.verify.castle" in plain
    assert not {"tomllib", "streamanon.verify.diversity", "streamanon.verify.z",
                "numpy.char"} & plain


@pytest.mark.parametrize("path", [(), ("castle",), ("verify", "z")], ids=" ".join)
def test_the_light_help_renderer_renders_as_typers(path: tuple[str, ...]) -> None:
    """The help is the same, byte for byte, as typer's renderer with everything it imports
    (rich.markdown and rich.traceback loaded first, so that nothing is stood in for)."""
    show = RUN.replace("sys.argv = [", "import io, contextlib\nout = io.StringIO()\n"
                       "sys.argv = [").replace(
        "    app()\n", "    with contextlib.redirect_stdout(out):\n        try:\n"
        "            app()\n        except SystemExit:\n            pass\n"
        "    sys.stderr.write('\\nHELP ' + json.dumps(out.getvalue()))\n")
    assert "HELP" in show

    def helps(code: str) -> tuple[str, set[str]]:
        env = {**os.environ, "COLUMNS": "100", "TERMINAL_WIDTH": "100"}
        res = subprocess.run([sys.executable, "-c", code, json.dumps([*path, "--help"])],
                             capture_output=True, text=True, env=env, check=False)
        assert res.returncode == 0, res.stderr[-2000:]
        text = res.stderr.split("\nHELP ", 1)[1].split("\nMODULES ", 1)[0]
        return json.loads(text), set(json.loads(res.stderr.rsplit("MODULES ", 1)[1]))

    light, light_names = helps(show)
    full, full_names = helps("import rich.markdown, rich.traceback\n" + show)
    assert "rich.markdown" not in light_names and "rich.markdown" in full_names
    assert "Usage:" in light
    assert light == full


def _first_paragraph(command: object) -> str:
    return inspect.cleandoc(command.help or "").split("\n\n")[0]  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", [(), ("verify",), ("experiment",), ("attack",)],
                         ids=" ".join)
def test_the_lazy_table_shows_what_each_command_says(path: tuple[str, ...]) -> None:
    """Each row of the listing (built from the table, nothing imported) is the first
    paragraph of the command's own help, in the table's order, and no command is missing."""
    table = {(): COMMANDS, ("verify",): VERIFY_COMMANDS,
             ("experiment",): EXPERIMENT_COMMANDS, ("attack",): ATTACK_COMMANDS}[path]
    group = typer.main.get_command(app)
    for name in path:
        group = group.commands[name]  # type: ignore[attr-defined]
    commands = group.commands  # type: ignore[attr-defined]
    assert isinstance(commands, LazyCommands)
    assert list(commands) == list(table)
    for name in table:
        row = commands.row(name)
        built = commands[name]
        assert _first_paragraph(row) == _first_paragraph(built), name
    source = type(group).source  # every command the modules register is in the table
    registered = {c.name for c in source.registered_commands} | {
        g.name for g in source.registered_groups}
    assert registered == set(table)


def test_a_castle_run_on_clean_csv_loads_neither_pyarrow_nor_rich() -> None:
    """A clean file's blocks are read by the C parser's lane and the summary table drawn as
    plain text: neither pyarrow nor rich (about 0.15 s of a short run's CPU between them) is
    imported by a plain castle run."""
    from streamanon.io import _native

    if _native.load() is None:
        pytest.skip(f"no C build: {_native.unavailable}")
    run = castle_run(600)
    names = modules_after(run, "castle", "--rules", "rules.toml", "--k", "5", "--l", "2",
                          "in.csv", "-o", "out.csv")
    assert {"streamanon.cli.castle", "streamanon.castle", "streamanon.io._native"} <= names
    assert not {n for n in names if n.split(".")[0] in ("pyarrow", "rich")}
