"""CASTLE on Flink with rule sets replaced while the job runs (``--rules-from tcp://...``).

One job, three loopback sockets the test owns: the input (CSV lines), the rules connection
and the release connection (every outcome line and note as it leaves). The test steps the
job through a rule change without any sleep: it sends the first half of the input, waits
until outcomes of it come back (those tuples were certainly processed under version 1),
sends version 2 (``square_feet`` switches from ``range`` to ``reduction``), waits until every
subtask notes it installed version 2, sends two bad rule sets and waits for their refusals,
then sends the second half (every tuple of which therefore meets version 2 or nothing newer).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from streamanon.castle import RuleSet
from streamanon.data import ashrae
from streamanon.flink.castle_rows import RULES_END, partition_of
from streamanon.io.rows import read_rows
from streamanon.verify.castle import check_castle
from tests.flink.conftest import DEADLINE, STREAMANON, Released, require_flink

require_flink()
pytestmark = pytest.mark.flink

K, L, DELTA, PARTITIONS, N = 5, 2, 150, 2, 3000
HALF = 1500  # rows sent under version 1; header = line 1, so they are lines 2 .. HALF + 1
V1 = ashrae.rules_toml()
V2 = V1.replace('name = "square_feet"\ngeneralizer = "range"',
                'name = "square_feet"\ngeneralizer = "reduction"\nweight = 0.5')
# switches air_temperature too, but its last attribute is unusable: refused whole
BAD_HALF = V2.replace('name = "air_temperature"\ngeneralizer = "range"',
                      'name = "air_temperature"\ngeneralizer = "reduction"') + (
    '\n[[attribute]]\nname = "wind_speed_2"\ngeneralizer = "bogus"\n')
BAD_TOML = 'id = "building_id"\n[[attribute]\nname = "square_feet"\n'


def installed(released: Released, version: int) -> bool:
    return {n["subtask"] for n in released.notes()
            if n["event"] == "installed" and n["version"] == version} == set(range(2))


def test_rules_replaced_while_running(tmp_path: Path) -> None:
    data = ashrae.write_csv(tmp_path / "ashrae.csv", ashrae.generate(N, seed=3))
    lines = data.read_text().splitlines()
    header, rows = lines[0], [*lines[1:], "1,2,3"]  # the last line is refused (too few)
    data.write_text("\n".join([header, *rows]) + "\n")  # the inputs, for the checker
    rules_file = tmp_path / "v1.toml"
    rules_file.write_text(V1)
    out, err = tmp_path / "released.csv", tmp_path / "stderr.txt"

    servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(3)]
    for s in servers:
        s.settimeout(DEADLINE)
    data_srv, rules_srv, rel_srv = servers
    port = [s.getsockname()[1] for s in servers]
    proc = subprocess.Popen(
        [*STREAMANON, "flink", "castle", f"tcp://127.0.0.1:{port[0]}", "--rules",
         str(rules_file), "--rules-from", f"tcp://127.0.0.1:{port[1]}", "--release-to",
         f"127.0.0.1:{port[2]}", "--k", str(K), "--l", str(L), "--delta", str(DELTA), "-p",
         "2", "--partitions", str(PARTITIONS), "--buffer-timeout", "0", "-o", str(out),
         "--on-error", "skip", "--json"],
        stdout=subprocess.PIPE, stderr=err.open("w"), text=True)
    try:
        released = Released(rel_srv)
        data_conn, _ = data_srv.accept()
        rules_conn, _ = rules_srv.accept()
        released.wait(lambda: installed(released, 1), "version 1 on both subtasks", proc, err)

        data_conn.sendall(("\n".join([header, *rows[:HALF]]) + "\n").encode())
        released.wait(lambda: len(released.outcomes()) >= 600, "600 outcomes", proc, err)
        before = {int(x.split("\t", 1)[0]) for x in released.outcomes()}

        rules_conn.sendall(f"{V2}\n{RULES_END}\n".encode())
        released.wait(lambda: installed(released, 2), "version 2 on both subtasks", proc, err)
        rules_conn.sendall(f"{BAD_HALF}\n{RULES_END}\n{BAD_TOML}\n{RULES_END}\n".encode())
        released.wait(lambda: sum(n["event"] == "refused" for n in released.notes()) == 2,
                      "two refusals", proc, err)

        data_conn.sendall(("\n".join(rows[HALF:]) + "\n").encode())
        data_conn.close()
        rules_conn.sendall(b'id = "building_id"\n')  # no end line: refused as incomplete
        rules_conn.close()
        stdout, _ = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for s in servers:
            s.close()
    stderr = err.read_text()
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    released.thread.join(timeout=DEADLINE)

    # the fate of every rule set, reported (and the refusals warned about on stderr)
    fates = [(n["message"], n["from"], n["event"], n.get("version")) for n in summary["rules"]]
    assert fates == [(1, "--rules", "accepted", 1), (2, "--rules-from", "accepted", 2),
                     (3, "--rules-from", "refused", None), (4, "--rules-from", "refused", None),
                     (5, "--rules-from", "refused", None)]
    assert all(n["installed_by"] == [0, 1] for n in summary["rules"][:2])
    reasons = [n["reason"] for n in summary["rules"][2:]]
    assert "bogus" in reasons[0] and "not valid TOML" in reasons[1]
    assert "incomplete" in reasons[2] and stderr.count("refused, the rules in force stay") == 3

    # accounting: every input line read is released, suppressed or rejected
    assert summary["read"] == len(rows) == N + 1 and summary["rejected"] == 1
    assert summary["read"] == summary["released"] + summary["suppressed"] + summary["rejected"]
    assert summary["balanced"]

    # guarantees: every equivalence class of the merged output has >= k individuals, is
    # l-diverse, and every released row stands for its own input row
    rs = RuleSet.from_toml(V1)
    report = check_castle(read_rows(out), rs.id_field, rs.quasi_identifiers, rs.sensitive,
                          k=K, l=L, inputs=read_rows(data, on_error="skip"))
    assert report.ok, report.first_problem
    assert report.rows == summary["released"] > 0

    # the generalization each released tuple got, by input line (live outcome lines)
    published = {int(x.split("\t", 1)[0]): json.loads(x.split("\t", 3)[3])
                 for x in released.outcomes() if x.split("\t")[1] == "P"}
    assert len(published) == summary["released"]
    old = {seq for seq, v in published.items() if v["square_feet"].startswith("[")}
    new = set(published) - old
    assert all(re.fullmatch(r"\d*\**", published[seq]["square_feet"]) for seq in new)
    assert before & set(published) <= old and before & old, "v1 tuples must stay ranges"
    after = {seq for seq in published if seq > HALF + 1}
    assert after and after <= new, "tuples sent after version 2 was installed are masked"
    # the refused rule set was not applied in part: air_temperature stays a range everywhere
    assert all(v["air_temperature"].startswith("[") for v in published.values())
    # per partition, version 2 takes over at one point of its tuple sequence, for good
    for p in range(PARTITIONS):
        seqs = sorted(s for s, v in published.items()
                      if partition_of(v[rs.id_field], PARTITIONS) == p)
        first_new = next((i for i, s in enumerate(seqs) if s in new), len(seqs))
        assert all(s in new for s in seqs[first_new:]), f"partition {p} went back to v1"


def test_bad_rules_fail_stops_the_job_with_the_reason(tmp_path: Path) -> None:
    """``--bad-rules fail``: a refused live rule set stops the job, naming the reason."""
    data = ashrae.write_csv(tmp_path / "ashrae.csv", ashrae.generate(200, seed=3))
    rules_file = tmp_path / "v1.toml"
    rules_file.write_text(V1)
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(DEADLINE)
        proc = subprocess.Popen(
            [*STREAMANON, "flink", "castle", str(data), "--rules", str(rules_file),
             "--rules-from", f"tcp://127.0.0.1:{server.getsockname()[1]}", "--bad-rules",
             "fail", "--k", str(K), "--l", str(L), "-p", "2", "-o", str(tmp_path / "o.csv")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            conn, _ = server.accept()
            with conn:
                conn.sendall(f"{BAD_HALF}\n{RULES_END}\n".encode())
                _, stderr = proc.communicate(timeout=DEADLINE)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode != 0
    assert "rule set 2 (--rules-from) refused" in stderr and "bogus" in stderr, stderr[-3000:]
