"""The environment of streamanon's jobs: what making one starts in the client process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streamanon.flink.env import _WORKER_MODE
from tests.flink.conftest import require_flink

require_flink()
pytestmark = pytest.mark.flink

PROBE = """
import sys
from streamanon.flink.env import make_env
def address(env):
    conf = env._j_stream_execution_environment.getConfiguration()
    return conf.toMap().get("python.loopback-server.address")
env = make_env(mode=sys.argv[1])
# the job's building makes more environment objects (a broadcast-connected step does)
again = env.from_collection([1, 2]).get_execution_environment()
pool = "pyflink.fn_execution.beam.beam_worker_pool_service" in sys.modules
later = make_env(mode=sys.argv[2])
print(address(env), address(again), pool, address(later), sep="|")
"""


@pytest.mark.parametrize(("mode", "then"), [("thread", "process"), ("process", "thread")])
def test_only_a_process_mode_job_starts_a_loopback_server(mode: str, then: str) -> None:
    """A thread mode job's Python runs inside the JVM: neither making its environment nor
    building its steps starts a loopback server for Python workers in the client (nor imports
    Beam's worker pool); a process mode job gets one, also after a thread mode job of the
    same process."""
    # a fresh process, without the switch an earlier job of this test process may have left
    # in its environment (a switch set by the caller is left alone: not the case tested here)
    env = {k: v for k, v in os.environ.items() if k != _WORKER_MODE}
    proc = subprocess.run([sys.executable, "-c", PROBE, mode, then], capture_output=True,
                          text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, again, pool, later = proc.stdout.strip().splitlines()[-1].split("|")
    if mode == "thread":
        assert (first, again, pool) == ("None", "None", "False")
        assert later not in ("None", "")
    else:
        assert first not in ("None", "") and again not in ("None", "") and pool == "True"


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_the_client_side_of_pyflink_is_imported_while_the_gateway_starts(mode: str) -> None:
    """What the client imports for a job's first Python function is imported in a thread
    while the JVM gateway starts in the main thread; both finish and the job is built. In
    thread mode that is the functions' protocol buffers without Beam (no Python worker runs in
    the client); process mode imports PyFlink's fn_execution whole, Beam with it."""
    code = ("import sys\nfrom streamanon.flink.env import make_env, preload_client_imports\n"
            "before = 'pyflink.fn_execution' in sys.modules\n"
            f"thread = preload_client_imports({mode!r})\n"
            "from pyflink.java_gateway import get_gateway\nget_gateway()\n"
            "thread.join()\nafter = 'pyflink.fn_execution' in sys.modules\n"
            f"env = make_env(mode={mode!r})\n"
            "env.from_collection([1, 2]).map(lambda x: x + 1)\n"
            "env.get_execution_plan()\n"
            "print(before, after, 'apache_beam' in sys.modules, sep='|')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    beam = "False" if mode == "thread" else "True"
    assert proc.stdout.strip().splitlines()[-1] == f"False|True|{beam}"
