"""``streamanon flink z`` kafka -> kafka SIGKILLed after a checkpoint and restored with
``--restore latest``, on the real broker and the PyFlink mini-cluster: the output holds the
pure command's messages, each once (a file of its own, so that ./dev test's workers can run
the connector's long tests side by side; the other connector tests: test_kafka_connector.py)."""

from __future__ import annotations

import subprocess

from tests.flink.conftest import require_flink
from tests.flink.test_kafka_connector import per_user, tagged
from tests.kill_and_compare import assert_each_message_once, kill_mid_run, start_pure
from tests.pipeline.kafka.conftest import produce, require_kafka, summary_of, z_trace

require_flink()
require_kafka()


def test_flink_z_kafka_killed_and_restored_writes_each_message_once(kafka_broker, tmp_path):
    """SIGKILL of the whole process group at a random moment after a checkpoint, then
    ``--restore latest``: the output holds the pure run's messages, each once (same tag, same
    text): the restored message step read what the killed run wrote past the checkpoint and
    dropped its replay."""
    from tests.flink.conftest import STREAMANON

    b = kafka_broker
    (inp,) = b.topics("in")
    out, pure_out = b.names("flink", "pure")
    produce(b.bootstrap, inp, z_trace(20_000, seed=9))
    # the reference runs while the job under test runs
    reference = start_pure(b, "z", inp, pure_out, "--z", "3", "--delta-t", "30", "--until-end")
    work = tmp_path / "work"
    args = ["flink", "z", b.url(inp), "-o", b.url(out), "--z", "3", "--delta-t", "30",
            "--until-end", "-p", "2", "--checkpoint-interval", "300", "--batch-ms", "20",
            "--batch-size", "500", "--work-dir", str(work)]
    # small batches (a backlog is otherwise read in batches of up to a second's records, and
    # the whole topic here would be one batch), slowed down (a barrier waits behind the
    # records queued before the reading step), so that a kill lands mid-run after a checkpoint
    at_kill, delay = kill_mid_run(b.bootstrap, [*args, "--pace", "0.0005"], work, out,
                                  seed=9)
    proc = subprocess.run([*STREAMANON, *args, "--restore", "latest", "--json"],
                          capture_output=True, text=True, timeout=300)
    s = summary_of(proc)
    ref = reference()
    got, want = tagged(b.bootstrap, out), tagged(b.bootstrap, pure_out)
    # 0 repeats, 0 missing, nothing else: the pure run's messages as a multiset
    assert_each_message_once(got, want, ref, at_kill, delay)
    assert per_user(got) == per_user(want)  # one user's records in input order
    assert s["read"] <= 20_000 and s["params"]["delivery"] == "exactly-once"
    assert 0 <= s.get("reconfirmed_outputs", 0) <= at_kill  # the dropped replay
