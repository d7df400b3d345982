"""The z job on a slow stream: a batch closes on time, not only on count or end of input.

A test-owned TCP server feeds the job a few lines at a time and waits, before it sends more,
until every line sent so far has its outcome back on the release connection. With the
default ``--batch-size`` (262,144 lines) no batch ever fills, and the input stays open, so
only ``--batch-ms`` can release them: z-anonymity keeps (almost) zero delay on Flink. The
merged output must equal ``streamanon z`` on the same lines.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from streamanon.cli.zanon import run_z
from streamanon.data.traces import zipf_trace
from streamanon.io import OnError
from streamanon.zanon import ZAnonymizer
from tests.flink.conftest import DEADLINE, STREAMANON, Released, require_flink

require_flink()
pytestmark = pytest.mark.flink


def test_slow_stream_outcomes_come_back_before_the_input_ends(tmp_path: Path) -> None:
    rows = zipf_trace(60, n_users=6, n_values=12, levels=2, seed=8)
    lines = ["t,u,a", *(",".join(r) for r in rows[:20]), "oops", *(
        f"{t},{u},{a}\r" for t, u, a in rows[20:40]), *(",".join(r) for r in rows[40:])]
    rounds = [lines[i:i + 9] for i in range(0, len(lines), 9)]
    src = tmp_path / "in.csv"
    src.write_text("\n".join(lines) + "\n")
    out, err = tmp_path / "flink.csv", tmp_path / "stderr.txt"
    servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    for s in servers:
        s.settimeout(DEADLINE)
    data_srv, rel_srv = servers
    proc = subprocess.Popen(
        [*STREAMANON, "flink", "z", f"tcp://127.0.0.1:{data_srv.getsockname()[1]}",
         "--release-to", f"127.0.0.1:{rel_srv.getsockname()[1]}", "--z", "2", "--delta-t",
         "600", "-p", "1", "-o", str(out), "--on-error", "skip", "--json"],
        stdout=subprocess.PIPE, stderr=err.open("w"), text=True)
    waits = []
    try:
        released = Released(rel_srv)
        conn, _ = data_srv.accept()
        sent = 0
        for block in rounds:
            conn.sendall(("\n".join(block) + "\n").encode())
            sent += len(block)
            start = time.monotonic()
            # every line sent has an outcome line (the header and the bad line too)
            released.wait(lambda n=sent: len(released.outcomes()) >= n, f"{sent} outcomes",
                          proc, err)
            waits.append(time.monotonic() - start)
        conn.close()
        stdout, _ = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for s in servers:
            s.close()
    assert proc.returncode == 0, err.read_text()[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    pure = tmp_path / "pure.csv"
    stats = run_z(src, pure, ZAnonymizer(z=2, delta_t=600), on_error=OnError.skip)
    assert out.read_bytes() == pure.read_bytes()
    assert (summary["read"], summary["released"], summary["rejected"]) == (
        stats.read, stats.released, stats.rejected)
    assert stats.read == 61 and stats.rejected == 1 and stats.released > 0
    seqs = sorted(int(x.split("\t", 1)[0]) for x in released.outcomes())
    assert seqs == list(range(1, len(lines) + 1))
    assert len(waits) == len(rounds) and max(waits) < DEADLINE
