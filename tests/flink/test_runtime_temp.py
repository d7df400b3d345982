"""A Flink command keeps its temporary files in one private folder and removes it on every
way out: the end of the job, Ctrl-C and SIGTERM (real signals to a real ``streamanon flink
z`` process). The JVM's ``java.io.tmpdir`` (the mini-cluster's folders, the blob store with
the jars) is inside it too, so nothing of a run stays in the machine's temporary folder."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.flink.conftest import STREAMANON, require_flink

require_flink()
pytestmark = pytest.mark.flink


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(tmp)}


def test_a_finished_job_leaves_no_temporary_folder(tmp_path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    src = tmp_path / "in.csv"
    src.write_text("t,u,a\n1,a,x\n2,b,y\n3,a,x\n")
    out = tmp_path / "out.csv"
    proc = subprocess.run([*STREAMANON, "flink", "z", "--z", "1", "--delta-t", "10", "-p", "1",
                           str(src), "-o", str(out), "--json"], capture_output=True, text=True,
                          timeout=300, env=_env(tmp))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.is_file()
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_job_removes_its_private_temporary_folder(tmp_path, signum,
                                                                 code) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(120)
    port = server.getsockname()[1]
    out = tmp_path / "out.csv"
    proc = subprocess.Popen([*STREAMANON, "flink", "z", "--z", "1", "--delta-t", "10", "-p",
                             "1", f"tcp://127.0.0.1:{port}", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=_env(tmp))
    try:
        conn, _ = server.accept()  # the job runs: its source connected
        conn.sendall(b"t,u,a\n1,a,x\n2,b,y\n")
        time.sleep(1.0)
        # while the job runs: one folder, private, holding the JVM's temporary files too
        (root,) = tmp.iterdir()
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        names = [p.name for p in root.rglob("*")]
        assert any(n.startswith(("minicluster", "blobStore")) for n in names), names
        os.killpg(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        server.close()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    time.sleep(1.0)  # anything still writing would show now
    assert list(tmp.iterdir()) == []


def test_a_commands_jvm_takes_the_local_options_before_the_callers_own(tmp_path) -> None:
    """The mini-cluster's JVM of a command gets ``LOCAL_JVM_ARGS`` (C1 only) and then the
    caller's ``$JVM_ARGS``, so that the caller's own options win; its temporary folder last."""
    import sys

    code = ("import os\nfrom streamanon.flink.runtime import private_temp\n"
            "with private_temp() as root:\n    print(os.environ['JVM_ARGS'], root, sep='|')\n"
            "print(os.environ['JVM_ARGS'])\n")
    env = {**_env(tmp_path), "JVM_ARGS": "-XX:TieredStopAtLevel=4"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    inside, after = proc.stdout.splitlines()
    args, root = inside.split("|")
    assert args.split() == ["-XX:TieredStopAtLevel=1", "-XX:TieredStopAtLevel=4",
                            f"-Djava.io.tmpdir={root}"]
    assert after == "-XX:TieredStopAtLevel=4"
