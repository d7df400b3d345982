"""The environment of streamanon's jobs: what making one starts in the client process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.flink.conftest import require_flink

require_flink()
pytestmark = pytest.mark.flink

PROBE = """
import os, sys
from streamanon.flink.env import make_env
env = make_env(mode=sys.argv[1])
conf = env._j_stream_execution_environment.getConfiguration()
print(conf.toMap().get("python.loopback-server.address"),
      "pyflink.fn_execution.beam.beam_worker_pool_service" in sys.modules,
      os.environ.get("_python_worker_execution_mode"), sep="|")
"""


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_only_a_process_mode_environment_starts_a_loopback_server(mode: str) -> None:
    """A thread mode job's Python runs inside the JVM: making its environment starts no
    loopback server for Python workers in the client (nor imports Beam's worker pool); a
    process mode job's environment still gets one, and PyFlink's switch is left as it was."""
    proc = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    address, pool, switch = proc.stdout.strip().splitlines()[-1].split("|")
    if mode == "thread":
        assert (address, pool) == ("None", "False")
    else:
        assert address not in ("None", "") and pool == "True"
    assert switch == "None"


def test_the_client_side_of_pyflink_is_imported_while_the_gateway_starts() -> None:
    """What the client imports for a job's first Python function is imported in a thread
    while the JVM gateway starts in the main thread; both finish and the job is built."""
    code = ("import sys\nfrom streamanon.flink.env import make_env, preload_client_imports\n"
            "before = 'pyflink.fn_execution' in sys.modules\n"
            "thread = preload_client_imports()\n"
            "from pyflink.java_gateway import get_gateway\nget_gateway()\n"
            "thread.join()\nafter = 'pyflink.fn_execution' in sys.modules\n"
            "env = make_env(mode='thread')\n"
            "env.from_collection([1, 2]).map(lambda x: x + 1)\n"
            "print(before, after, sep='|')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "False|True"
