"""Both checkers read a ``kafka://HOST:PORT/TOPIC`` input and output with their own reader
(a real broker; real ``streamanon`` processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamanon.data import ashrae
from tests.pipeline.kafka.conftest import cli, require_kafka, summary_of, write_lines, z_trace

require_kafka()

pytestmark = pytest.mark.kafka


def test_verify_z_reads_input_and_output_topics(kafka_broker, tmp_path: Path) -> None:
    k = kafka_broker
    src = write_lines(tmp_path / "t.csv", "t,u,a", z_trace(800, seed=5))
    out = tmp_path / "out.csv"
    cli("z", "--z", "3", "--delta-t", "20", str(src), "-o", str(out))
    t_in, t_out = k.names("in", "out")
    cli("kafka", "produce", str(src), k.url(t_in))
    cli("kafka", "produce", str(out), k.url(t_out))
    ref = summary_of(cli("verify", "z", "--z", "3", "--delta-t", "20", str(src), str(out),
                         "--json"))
    got = summary_of(cli("verify", "z", "--z", "3", "--delta-t", "20", k.url(t_in),
                         k.url(t_out), "--json"))
    assert got == ref and ref["input_tuples"] == 800
    # a wrong z on the same topics is a problem found (exit 1), not an input error
    bad = cli("verify", "z", "--z", "4", "--delta-t", "20", k.url(t_in), k.url(t_out),
              check=False)
    assert bad.returncode == 1, bad.stderr
    missing = cli("verify", "z", "--z", "3", "--delta-t", "20", k.url(k.names("nope")[0]),
                  str(out), check=False)
    assert missing.returncode == 2 and "no such topic" in missing.stderr, missing.stderr


def test_verify_castle_reads_input_and_output_topics(kafka_broker, tmp_path: Path) -> None:
    k = kafka_broker
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(300, seed=8))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    out, sup = tmp_path / "out.csv", tmp_path / "sup.csv"
    cli("castle", "--rules", str(rules), "--k", "4", "--l", "2", "--delta", "100", str(data),
        "-o", str(out), "--suppressed", str(sup))
    t_in, t_out, t_sup = k.names("in", "out", "sup")
    for path, topic in ((data, t_in), (out, t_out), (sup, t_sup)):
        cli("kafka", "produce", str(path), k.url(topic))
    args = ("--rules", str(rules), "--k", "4", "--l", "2", "--json")
    ref = summary_of(cli("verify", "castle", str(out), "--input", str(data), "--suppressed",
                         str(sup), *args))
    got = summary_of(cli("verify", "castle", k.url(t_out), "--input", k.url(t_in),
                         "--suppressed", k.url(t_sup), *args))
    assert got == ref and ref["rows"] > 0 and ref["input_rows"] == 300
    bad = cli("verify", "castle", k.url(t_out), "--rules", str(rules), "--k", "400",
              "--l", "2", check=False)
    assert bad.returncode == 1, bad.stderr
