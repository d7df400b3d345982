"""Guards: a clean CSV file given to ``streamanon castle`` or ``streamanon z`` is parsed by the
C parser's lane (Arrow's without a C build), LF or CRLF alike: a spy on the lane's entry
point sees every block accepted, so a command that bypasses the lane fails here, not only in
a benchmark."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from streamanon.cli import app
from streamanon.data import ashrae, traces
from streamanon.io import _native, fastcsv, lane, readers
from streamanon.io import rows as rows_module

runner = CliRunner()


def _spy(monkeypatch: pytest.MonkeyPatch, module: object, name: str,
         source: object = fastcsv) -> list[bool]:
    calls: list[bool] = []
    real = getattr(source, name)

    def spy(*args: object, **kw: object) -> object:
        got = real(*args, **kw)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(module, name, spy)
    return calls


NATIVE = pytest.mark.skipif(_native.load() is None, reason="no C build of the lane's parser")


@NATIVE
@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_castle_command_reads_a_clean_file_through_the_c_lane(tmp_path, monkeypatch,
                                                              end) -> None:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(600, seed=3))
    data.write_bytes(data.read_bytes().replace(b"\n", end.encode()))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    calls = _spy(monkeypatch, rows_module, "parse_native_rows", lane)
    arrow = _spy(monkeypatch, fastcsv, "parse_clean_rows")
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "2",
                              "--delta", "100", str(data), "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 0, res.output
    assert calls and all(calls)  # every block of rows after the header: the C lane
    assert arrow == []


def test_castle_command_reads_through_arrow_without_the_c_parser(tmp_path, monkeypatch) -> None:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(600, seed=3))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    monkeypatch.setattr(lane, "_NATIVE", [None])
    calls = _spy(monkeypatch, fastcsv, "parse_clean_rows")
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "2",
                              "--delta", "100", str(data), "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 0, res.output
    assert calls and all(calls)


@NATIVE
@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_z_command_reads_a_clean_file_through_the_c_lane(tmp_path, monkeypatch, end) -> None:
    path = tmp_path / "in.csv"
    rows = traces.zipf_trace(3000, n_users=50, n_values=40, seed=1)
    path.write_text("t,u,a" + end + "".join(f"{t},{u},{a}{end}" for t, u, a in rows),
                    newline="")
    calls = _spy(monkeypatch, readers, "parse_native_chunk", lane)
    arrow = _spy(monkeypatch, fastcsv, "parse_clean_chunk")
    res = runner.invoke(app, ["z", "--z", "3", "--delta-t", "600", str(path),
                              "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 0, res.output
    assert calls and all(calls)
    assert arrow == []  # nor did any block need Arrow's reader


def test_z_command_reads_through_arrow_without_the_c_parser(tmp_path, monkeypatch) -> None:
    path = tmp_path / "in.csv"
    rows = traces.zipf_trace(3000, n_users=50, n_values=40, seed=1)
    path.write_text("t,u,a\n" + "".join(f"{t},{u},{a}\n" for t, u, a in rows))
    monkeypatch.setattr(lane, "_NATIVE", [None])
    calls = _spy(monkeypatch, fastcsv, "parse_clean_chunk")
    res = runner.invoke(app, ["z", "--z", "3", "--delta-t", "600", str(path),
                              "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 0, res.output
    assert calls and all(calls)


@NATIVE
@pytest.mark.parametrize(("delimiter", "sep"), [(";", b";"), ("tab", b"\t")])
def test_castle_reads_a_clean_delimited_file_through_the_c_lane(tmp_path, monkeypatch, delimiter,
                                                           sep) -> None:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(600, seed=3))
    assert b'"' not in data.read_bytes()
    data.write_bytes(data.read_bytes().replace(b",", sep))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    calls = _spy(monkeypatch, rows_module, "parse_native_rows", lane)
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "5", "--l", "2",
                              "--delta", "100", "--delimiter", delimiter, str(data),
                              "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 0, res.output
    assert calls and all(calls)


@NATIVE
@pytest.mark.parametrize(("delimiter", "sep"), [(";", ";"), ("\\t", "\t")])
def test_z_reads_a_clean_delimited_file_through_the_c_lane(tmp_path, monkeypatch, delimiter,
                                                      sep) -> None:
    path = tmp_path / "in.csv"
    rows = traces.zipf_trace(3000, n_users=50, n_values=40, seed=1)
    path.write_text(sep.join("tua") + "\n"
                    + "".join(f"{t}{sep}{u}{sep}{a}\n" for t, u, a in rows))
    calls = _spy(monkeypatch, readers, "parse_native_chunk", lane)
    res = runner.invoke(app, ["z", "--z", "3", "--delta-t", "600", "--delimiter", delimiter,
                              str(path), "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 0, res.output
    assert calls and all(calls)
