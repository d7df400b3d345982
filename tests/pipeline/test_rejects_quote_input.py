"""A rejected row is quoted as its input line was, byte for byte (numbers not re-serialized:
``186291`` stays ``186291``, ``000`` stays ``000``), so that a fixed rejects file can be fed
again without changing the data. Files (fast lane and text path) and Kafka messages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamanon.castle import CastleAnonymizer, RuleSet
from streamanon.data import ashrae
from streamanon.pipeline import CastleStage, MessagePositions, ZStage, run_castle, run_z
from streamanon.zanon import ZAnonymizer

# the operator refuses it (no sensitive value) after the reader took it
BAD_CASTLE = "000,1451606400,0,Office,186291,1982,3,1.1,0.0,-9.4,-1.0,1007.8,000,0.0,"


def _castle_lines(tmp_path, broken: bool) -> list[str]:
    lines = ashrae.write_csv(tmp_path / "gen.csv",
                             ashrae.generate(300, seed=3)).read_text().splitlines()
    lines.insert(150, BAD_CASTLE)
    if broken:  # a line the fast lane cannot read: the block goes line by line
        lines.insert(40, "not,a,row")
    return lines


def _op(rules):
    return CastleAnonymizer(RuleSet.load(rules), k=4, l=2, delta=50, beta=10)


@pytest.mark.parametrize("broken", [False, True], ids=["fast lane", "text path"])
def test_castle_file_rejects_quote_the_input_line(tmp_path, broken):
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    lines = _castle_lines(tmp_path, broken)
    src = tmp_path / "in.csv"
    src.write_text("\n".join(lines) + "\n")
    rej = tmp_path / "rej.jsonl"
    run_castle(src, tmp_path / "out.csv", _op(rules), on_error="skip", rejects_path=rej)
    got = [json.loads(x) for x in rej.read_text().splitlines()]
    texts = {r["line"]: r["text"] for r in got}
    assert texts[lines.index(BAD_CASTLE) + 1] == BAD_CASTLE


def test_castle_kafka_rejects_quote_the_message(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml())
    lines = _castle_lines(tmp_path, False)
    for values in ([x.encode() for x in lines],  # clean messages: one block
                   [x.encode() for x in lines[:10]] + [b""] +  # a bad message: line by line
                   [x.encode() for x in lines[10:]]):
        codes = np.arange(len(values), dtype=np.int64)
        stage = CastleStage(_op(rules), MessagePositions("kafka://h:1/in"), on_error="skip")
        res, err = stage.process_messages(values, codes)
        assert err is None
        rejects = [json.loads(x) for b in res.get("rejects", []) for x in b.text.splitlines()]
        assert BAD_CASTLE in [r["text"] for r in rejects]


def test_z_file_and_kafka_rejects_quote_the_input_line(tmp_path):
    bad = "186291.50,,000"  # no user
    lines = ["t,u,a", *(f"{i}.0,u{i % 7},v{i % 3}" for i in range(200))]
    lines.insert(100, bad)
    src = tmp_path / "in.csv"
    src.write_text("\n".join(lines) + "\n")
    rej = tmp_path / "rej.jsonl"
    run_z(src, tmp_path / "out.csv", ZAnonymizer(z=2, delta_t=10), on_error="skip",
          rejects_path=rej)
    assert bad in [json.loads(x)["text"] for x in rej.read_text().splitlines()]
    values = [x.encode() for x in lines[1:]]
    stage = ZStage(ZAnonymizer(z=2, delta_t=10), MessagePositions("kafka://h:1/in"),
                   on_error="skip")
    res, _ = stage.process_messages(values, np.arange(len(values), dtype=np.int64))
    texts = [json.loads(x)["text"] for b in res.get("rejects", []) for x in b.text.splitlines()]
    assert bad in texts
