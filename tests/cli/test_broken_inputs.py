"""Every command that reads a user's file, fed a corpus of broken inputs.

For each input and command: the exit code means something (2: usage or input error), the message
is one line naming the file (and the line when there is one) with no traceback, and nothing was
half-written: the output that existed before keeps its content and no temporary file is left.
``streamanon simulate``, ``demo`` and the experiments read no user file; their bad options are
tested in their own modules.
"""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.data import ashrae

runner = CliRunner()
PREVIOUS = "previous content\n"

Z_GOOD = "t,u,a\n1,alice,x\n2,bob,x\n3,carol,y\n"


def castle_good(tmp_path: Path) -> tuple[str, Path]:
    """A small valid CASTLE input (as text) and its rules file."""
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    buf = io.StringIO()
    ashrae.write_csv(tmp_path / "good.csv", ashrae.generate(30, seed=1))
    buf.write((tmp_path / "good.csv").read_text())
    return buf.getvalue(), rules


def corpus(good: str) -> dict[str, tuple[bytes | None, str]]:
    """name -> (file content or None for special cases, what the message must contain)."""
    lines = good.splitlines()
    header, first = lines[0], lines[1]
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("in.csv", good)
    return {
        "random-bytes": (bytes(range(256)) * 4, "binary data"),
        "gzip": (gzip.compress(good.encode()), "gunzip -c"),
        "zip": (zipped.getvalue(), "ZIP archive"),
        "nul-bytes": (good.replace(",", "\x00,", 1).encode(), "binary data"),
        "huge-line": ((header + "\n" + "1," * 600_000 + "\n" + good.split("\n", 1)[1]).encode(),
                      ":2:"),
        "unclosed-quote": ((header + "\n" + first.replace(",", ',"', 1) + "\n"
                            + "\n".join(lines[2:]) + "\n").encode(), ":2: unclosed quote"),
        "unclosed-quote-last-field": ((header + "\n" + first + ',"' + "\n"
                                       + "\n".join(lines[2:]) + "\n").encode(), ":2:"),
        "not-utf8": ((header + "\n" + first.replace(lines[1][0], "\xe9", 1) + "\n").encode(
            "latin-1"), "not UTF-8"),
        "wrong-header": (("x,y,z\n" + "\n".join(lines[1:]) + "\n").encode(), ":1:"),
        "jsonl-in-csv": (b'{"t": 1, "u": "a", "a": "x"}\n', "--input-format jsonl"),
    }


def run(args: list[str]) -> tuple[int, str]:
    res = runner.invoke(app, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stderr


def assert_untouched(out: Path) -> None:
    assert out.read_text() == PREVIOUS
    assert not [p.name for p in out.parent.iterdir() if ".partial" in p.name]


def command(kind: str, src: Path, out: Path, rules: Path | None) -> list[str]:
    if kind == "z":
        return ["z", "--z", "1", "--delta-t", "10", str(src), "-o", str(out)]
    return ["castle", "--rules", str(rules), "--k", "2", "--l", "0", str(src), "-o", str(out)]


@pytest.mark.parametrize("kind", ["z", "castle"])
def test_every_broken_input_is_one_clear_line_and_writes_nothing(tmp_path, kind) -> None:
    good, rules = (Z_GOOD, None) if kind == "z" else castle_good(tmp_path)
    for name, (content, expected) in corpus(good).items():
        src = tmp_path / f"{name}.csv"
        src.write_bytes(content)
        out = tmp_path / "out.csv"
        out.write_text(PREVIOUS)
        code, err = run(command(kind, src, out, rules))
        assert code == 2, (name, err)
        assert "Traceback" not in err, (name, err)
        first = err.splitlines()[0]
        assert first.startswith(f"error: {src}"), (name, err)
        assert expected in first, (name, err)
        assert "not written" in err and str(out) in err, (name, err)
        assert_untouched(out)


@pytest.mark.parametrize("kind", ["z", "castle"])
def test_skip_keeps_every_good_record_and_names_the_bad_lines(tmp_path, kind) -> None:
    """Under --on-error skip a broken line is set aside by number; an unclosed quote never
    takes the next record with it (the finding: 'read 1', a merged value published)."""
    good, rules = (Z_GOOD, None) if kind == "z" else castle_good(tmp_path)
    lines = good.splitlines()
    n_good = len(lines) - 1
    broken = lines[1] + ',"'  # unclosed quote in the last field, then every good line
    src = tmp_path / "in.csv"
    src.write_text("\n".join([lines[0], broken, *lines[1:]]) + "\n")
    out = tmp_path / "out.csv"
    res = runner.invoke(app, [*command(kind, src, out, rules), "--on-error", "skip", "--json"])
    assert res.exit_code == 0, res.output
    import json

    summary = json.loads(res.stdout)
    assert summary["read"] == n_good + 1 and summary["rejected"] == 1
    assert summary["balanced"]
    rejects = (tmp_path / "out.csv.rejects.jsonl").read_text().splitlines()
    assert len(rejects) == 1
    entry = json.loads(rejects[0])
    assert entry["line"] == 2 and entry["text"] == broken  # the line as it was in the file
    assert "unclosed quote" in entry["reason"]


@pytest.mark.parametrize("kind", ["z", "castle"])
def test_missing_folder_and_bad_format_inputs(tmp_path, kind) -> None:
    good, rules = (Z_GOOD, None) if kind == "z" else castle_good(tmp_path)
    src = tmp_path / "in.csv"
    src.write_text(good)
    out = tmp_path / "out.csv"
    out.write_text(PREVIOUS)
    cases = {
        "missing": (command(kind, tmp_path / "missing.csv", out, rules), "no such file"),
        "folder": (command(kind, tmp_path, out, rules), "is a folder"),
        "xml": ([*command(kind, src, out, rules), "--input-format", "xml"],
                "--input-format xml: use csv or jsonl"),
        "no out folder": (command(kind, src, tmp_path / "nodir" / "o.csv", rules),
                          "'" + str(tmp_path / "nodir") + "' does not exist"),
    }
    for name, (args, expected) in cases.items():
        code, err = run(args)
        assert code == 2, (name, err)
        assert expected in err and "Traceback" not in err, (name, err)
        assert len(err.strip().splitlines()) == 1, (name, err)
        assert_untouched(out)


def test_bom_header_is_accepted(tmp_path) -> None:
    src = tmp_path / "bom.csv"
    src.write_bytes(b"\xef\xbb\xbf" + Z_GOOD.encode())
    res = runner.invoke(app, ["z", "--z", "1", "--delta-t", "10", str(src), "-o",
                              str(tmp_path / "o.csv"), "--json"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o.csv").read_text() == Z_GOOD


def test_castle_bom_header_is_accepted(tmp_path) -> None:
    good, rules = castle_good(tmp_path)
    src = tmp_path / "bom.csv"
    src.write_bytes(b"\xef\xbb\xbf" + good.encode())
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "2", "--l", "0", str(src),
                              "-o", str(tmp_path / "o.csv"), "--json"])
    assert res.exit_code == 0, res.output
