"""The cache of rendered help pages: a cached page is the rendered one, byte for byte.

Every command's ``--help`` (groups too) is rendered once with the cache on (a miss, which
stores the page; for a sample, also with the cache off), then again (a hit, which must not
render): the same text. A changed module file or a changed rendering setting (width, colours)
makes a miss; a fresh interpreter prints a hit without importing typer, rich or click.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

import streamanon.cli
from streamanon.cli import app, helpcache, main


def command_paths() -> list[tuple[str, ...]]:
    """Every command and group of the app, the root included."""
    out: list[tuple[str, ...]] = []

    def walk(path: tuple[str, ...], command: object) -> None:
        out.append(path)
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk((*path, name), sub)

    walk((), typer.main.get_command(app))
    return out


def no_early_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command run earlier in this process may have asked :func:`main` to end the process
    at once (``skip_teardown``): not the test process."""
    monkeypatch.setattr("streamanon.cli.exitcodes._skip_teardown", False)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache directory, a fixed width, the cache on."""
    no_early_exit(monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv(helpcache.OPT_OUT, raising=False)
    return tmp_path / "cache" / "streamanon" / "help"


def page(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         *argv: str) -> str:
    """What ``streamanon ARGV`` prints through the console script's :func:`main` (exit 0)."""
    monkeypatch.setattr(sys, "argv", ["streamanon", *argv])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main()
    out, err = capsys.readouterr()
    assert exc.value.code in (None, 0), err
    assert err == ""
    return out


def hit(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        *argv: str) -> str:
    """``page`` that must come from the cache: rendering it fails the test."""
    def no_render() -> None:
        raise AssertionError(f"rendered {argv}: expected a cached page")

    with monkeypatch.context() as m:
        m.setattr(streamanon.cli, "_run", no_render)
        return page(monkeypatch, capsys, *argv)


def uncached(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
             *argv: str) -> str:
    with monkeypatch.context() as m:
        m.setenv(helpcache.OPT_OUT, "1")
        return page(monkeypatch, capsys, *argv)


#: Commands whose first (cached) rendering is also compared with one with the cache off: the
#: copy of stdout the cache keeps passes every write on unchanged, whatever the command.
BOTH_WAYS = [(), ("z",), ("castle",), ("verify", "castle")]


def test_every_cached_help_is_the_rendered_one(cache, monkeypatch, capsys) -> None:
    """A first run renders (through the copy of stdout) and stores; a second prints the
    stored page without rendering: the same text, for every command and group."""
    paths = command_paths()
    assert len(paths) > 30 and set(BOTH_WAYS) <= set(paths)
    for path in paths:
        argv = (*path, "--help")
        entries = set(os.listdir(cache)) if cache.exists() else set()
        rendered = page(monkeypatch, capsys, *argv)  # a miss: rendered by typer, stored
        assert "Usage: " in rendered and "Options" in rendered, path
        assert len(set(os.listdir(cache)) - entries) == 1, path
        if path in BOTH_WAYS:
            assert uncached(monkeypatch, capsys, *argv) == rendered, path
        assert hit(monkeypatch, capsys, *argv) == rendered, path


def test_the_opt_out_stores_nothing(cache, monkeypatch, capsys) -> None:
    uncached(monkeypatch, capsys, "z", "--help")
    uncached(monkeypatch, capsys, "z", "--help")
    assert not cache.exists()


def test_a_changed_module_is_a_miss(cache, tmp_path, monkeypatch, capsys) -> None:
    """Every module loaded while a page renders is a dependency of its entry."""
    (tmp_path / "lib").mkdir()
    probe = tmp_path / "lib" / "helpcache_probe.py"
    probe.write_text("WORDS = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    monkeypatch.delitem(sys.modules, "helpcache_probe", raising=False)
    __import__("helpcache_probe")
    try:
        rendered = page(monkeypatch, capsys, "castle", "--help")
        assert helpcache.lookup(["castle", "--help"]) == rendered
        probe.write_text("WORDS = 22\n", encoding="utf-8")  # another size
        assert helpcache.lookup(["castle", "--help"]) is None
        page(monkeypatch, capsys, "castle", "--help")  # stored again with the new file
        assert helpcache.lookup(["castle", "--help"]) == rendered
        stat = probe.stat()
        os.utime(probe, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # same size
        assert helpcache.lookup(["castle", "--help"]) is None
        probe.unlink()
        assert helpcache.lookup(["castle", "--help"]) is None
    finally:
        sys.modules.pop("helpcache_probe", None)


@pytest.mark.parametrize(("name", "values"), [("COLUMNS", ("100", "60")),
                                              ("FORCE_COLOR", (None, "1")),
                                              ("NO_COLOR", (None, "1")),
                                              ("TERM", ("xterm", "dumb"))])
def test_a_changed_rendering_setting_is_a_miss(cache, monkeypatch, capsys, name,
                                               values) -> None:
    pages = []
    for value in values:
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
        assert helpcache.lookup(["z", "--help"]) is None  # not the other setting's page
        rendered = uncached(monkeypatch, capsys, "z", "--help")
        assert page(monkeypatch, capsys, "z", "--help") == rendered
        pages.append(rendered)
    for value, rendered in zip(values, pages, strict=True):  # both kept, each its own
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
        assert hit(monkeypatch, capsys, "z", "--help") == rendered
    if name in ("COLUMNS", "FORCE_COLOR"):
        assert pages[0] != pages[1]  # the setting does change the page


def test_what_is_not_a_help_page_is_not_stored(cache, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["streamanon", "nosuch", "--help"])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    assert not cache.exists()
    assert not helpcache.is_help(["z", "-o", "--help"])  # -o's value: a run, not a help


def test_an_unwritable_cache_still_prints_the_help(tmp_path, monkeypatch, capsys) -> None:
    no_early_exit(monkeypatch)
    (tmp_path / "file").write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # a file: no directory
    monkeypatch.delenv(helpcache.OPT_OUT, raising=False)
    assert page(monkeypatch, capsys, "z", "--help") == uncached(monkeypatch, capsys, "z",
                                                                 "--help")


def test_a_damaged_entry_is_a_miss_and_replaced(cache, monkeypatch, capsys) -> None:
    rendered = page(monkeypatch, capsys, "verify", "--help")
    (entry,) = cache.iterdir()
    entry.write_bytes(entry.read_bytes()[:100])
    assert helpcache.lookup(["verify", "--help"]) is None
    assert page(monkeypatch, capsys, "verify", "--help") == rendered
    assert hit(monkeypatch, capsys, "verify", "--help") == rendered


#: ``streamanon ARGS`` through the console script's main, then the modules loaded, on stderr.
SCRIPT = """import json, sys
sys.argv = ["streamanon", *json.loads(sys.argv[1])]
try:
    from streamanon.cli import main
    main()
finally:
    sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


@pytest.mark.parametrize("path", [(), ("castle",)], ids=" ".join)
def test_a_fresh_process_prints_the_cached_page_without_typer(tmp_path, path) -> None:
    """Bytes on stdout: uncached, first run (stored), second run (cached) are the same."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "COLUMNS": "90"}
    env.pop(helpcache.OPT_OUT, None)

    def run(**extra: str) -> tuple[bytes, set[str]]:
        res = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps([*path, "--help"])],
                             capture_output=True, env={**env, **extra}, check=False)
        assert res.returncode == 0, res.stderr.decode()[-2000:]
        err = res.stderr.decode()
        return res.stdout, set(json.loads(err.rsplit("MODULES ", 1)[1]))

    rendered, loaded = run(**{helpcache.OPT_OUT: "1"})
    assert "typer" in loaded and b"Usage: streamanon" in rendered
    assert not (tmp_path / "streamanon").exists()
    first, _ = run()
    cached, loaded = run()
    assert rendered == first == cached
    assert not {"typer", "rich", "click", "streamanon.cli.app", "streamanon.errors"} & loaded


def test_the_app_attribute_is_the_typer_app_however_imported() -> None:
    """The submodule ``streamanon.cli.app`` does not replace the package's ``app``."""
    code = ("import streamanon.cli.zanon, streamanon.cli.app as m, importlib, typer\n"
            "from streamanon.cli import app\n"
            "import streamanon.cli\n"
            "assert isinstance(app, typer.Typer) and isinstance(m, typer.Typer)\n"
            "assert streamanon.cli.app is app\n"
            "assert importlib.import_module('streamanon.cli.app').app is app\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stderr
    code = "import sys, streamanon.cli\nassert 'typer' not in sys.modules\n"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stderr


def test_the_test_session_caches_outside_the_home(monkeypatch, capsys) -> None:
    """The session's temporary ``$XDG_CACHE_HOME`` (tests/conftest.py) holds what a help
    through :func:`main` stores, here and in the processes a test starts."""
    no_early_exit(monkeypatch)
    monkeypatch.delenv(helpcache.OPT_OUT, raising=False)
    home = Path.home() / ".cache" / "streamanon" / "help"
    before = set(os.listdir(home)) if home.is_dir() else set()
    here = Path(helpcache.directory())
    assert here.is_relative_to(os.environ["XDG_CACHE_HOME"])
    assert not here.is_relative_to(Path.home() / ".cache")
    shutil.rmtree(here, ignore_errors=True)  # a page an earlier test cached would be a hit
    page(monkeypatch, capsys, "z", "--help")
    stored = set(os.listdir(here))
    assert stored
    res = subprocess.run([sys.executable, "-c", "from streamanon.cli import helpcache\n"
                          "print(helpcache.directory())"], capture_output=True, text=True,
                         check=True)
    assert res.stdout.strip() == str(here)
    assert not stored & ((set(os.listdir(home)) if home.is_dir() else set()) - before)
