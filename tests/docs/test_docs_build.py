"""The documentation site builds with --strict (a broken link, reference or snippet fails), and
its reference pages cover every command, rules key and exit code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from streamanon.castle import rules as castle_rules
from streamanon.cli import app
from streamanon.cli.exitcodes import ExitCode

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                          str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def command_paths() -> list[str]:
    out = []

    def walk(path: list[str], command: object) -> None:
        out.append(" ".join(["streamanon", *path]))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk([*path, name], sub)

    walk([], typer.main.get_command(app))
    return out


def test_cli_reference_lists_every_command_and_option(site) -> None:
    html = page(site, "reference/cli")
    for path in command_paths():
        assert f"<code>{path}</code>" in html, path
    for opt in ("--input-format", "--on-error", "--suppressed", "--workdir", "--structure"):
        assert f"<code>{opt}</code>" in html, opt


def test_rules_reference_and_readme_document_every_rules_key(site) -> None:
    keys = {"id", "time", "attribute", *castle_rules._COMMON_KEYS,
            *(k for ks in castle_rules._KNOWN_KEYS.values() for k in ks)}
    html = page(site, "reference/rules")
    readme = (ROOT / "README.md").read_text()
    for key in sorted(keys):
        shown = "[[attribute]]" if key == "attribute" else key  # an array of tables
        assert f"<code>{shown}</code>" in html, key
        assert f"`{shown}`" in readme, key


def test_exit_codes_page_lists_every_code(site) -> None:
    html = page(site, "reference/exit-codes")
    for code in ExitCode:
        assert f"<td>{int(code)}</td>" in html and f"<code>{code.name}</code>" in html, code


def test_getting_started_embeds_the_readmes_quick_tour(site) -> None:
    text = re.sub(r"<[^>]+>", "", page(site, "getting-started"))  # without highlighting
    assert "streamanon demo" in text and "cd streamanon-demo" in text
    assert page(site, "reference/api").count('class="doc doc-heading"') > 20
