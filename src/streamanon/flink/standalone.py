"""A standalone Flink cluster on this machine, from the PyFlink distribution (``flink`` extra).

Design: docs/design/flink.md
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from streamanon.errors import JobError
from streamanon.flink.env import python_path_entries
from streamanon.harness.ports import free_port


def flink_home() -> Path:
    """The Flink distribution inside the installed ``pyflink`` package."""
    import pyflink

    return Path(pyflink.__file__).resolve().parent


class StandaloneCluster:
    """JobManager + TaskManagers on loopback; a context manager that always stops them.

    Args:
        folder: the cluster's folder (configuration, logs).
        taskmanagers: the number of TaskManagers.
        slots: task slots per TaskManager.
        taskmanager_memory: each TaskManager's total process memory (``1024m``).
        jobmanager_memory: the JobManager's total process memory (``768m``).
        start_timeout: seconds to wait for the cluster to be up.
    """

    def __init__(self, folder: Path, *, taskmanagers: int = 2, slots: int = 1,
                 taskmanager_memory: str = "1024m", jobmanager_memory: str = "768m",
                 start_timeout: float = 120.0) -> None:
        self.folder = Path(folder).resolve()
        self.taskmanagers, self.slots = taskmanagers, slots
        self.tm_memory, self.jm_memory = taskmanager_memory, jobmanager_memory
        self.start_timeout = start_timeout
        self.rest_port = 0
        self.home = flink_home()

    # -- configuration ----------------------------------------------------------------------
    def _java_opts(self) -> str:
        """The distribution's JVM options (the module opens Flink needs on Java 17)."""
        text = (self.home / "conf" / "config.yaml").read_text()
        found = re.search(r"^\s+all:\s*(.+)$", text, re.MULTILINE)
        return found.group(1).strip() if found else ""

    def write_conf(self) -> Path:
        conf = self.folder / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        for name in ("log4j.properties", "log4j-console.properties", "log4j-cli.properties",
                     "logback.xml", "logback-console.xml"):
            source = self.home / "conf" / name
            if source.is_file():
                (conf / name).write_text(source.read_text())
        # the Python bridge (and pemja, which loads libpython once per JVM) on the cluster's
        # own class path, so that every job's thread-mode operators share it: loaded from
        # each job's class loader instead, a second job on a TaskManager fails to load it
        lib = self.folder / "lib"
        lib.mkdir(exist_ok=True)
        for jar in [*(self.home / "lib").glob("*.jar"), *(self.home / "opt").glob(
                "flink-python*.jar")]:
            if not (lib / jar.name).exists():
                (lib / jar.name).symlink_to(jar)
        self.rest_port = free_port()
        settings = {
            "classloader.parent-first-patterns.additional": "pemja.",
            "env.java.opts.all": self._java_opts(),
            "jobmanager.rpc.address": "localhost", "jobmanager.bind-host": "localhost",
            "jobmanager.rpc.port": free_port(),
            "jobmanager.memory.process.size": self.jm_memory,
            "taskmanager.bind-host": "localhost", "taskmanager.host": "localhost",
            "taskmanager.numberOfTaskSlots": self.slots,
            "taskmanager.memory.process.size": self.tm_memory,
            "taskmanager.memory.managed.fraction": 0.1,
            "rest.address": "localhost", "rest.bind-address": "localhost",
            "rest.port": self.rest_port,
            "parallelism.default": 1,
            "python.execution-mode": "thread",
            # a TaskManager that dies (a kill, a crash) is noticed within about a second: the
            # first heartbeat the dead process does not answer (the connection refused: an
            # unreachable recipient, which alone counts toward the threshold) releases it
            # with its slots, before a restart could be deployed to it; one that is only
            # slow (a loaded machine) still has the 20 s timeout, not the default 50 s
            "heartbeat.interval": 1000, "heartbeat.timeout": 20000,
            "heartbeat.rpc-failure-threshold": 1,
        }
        (conf / "config.yaml").write_text("".join(
            f"{key}: {json.dumps(value) if isinstance(value, str) else value}\n"
            for key, value in settings.items()))
        (conf / "masters").write_text(f"localhost:{self.rest_port}\n")
        (conf / "workers").write_text("localhost\n" * self.taskmanagers)
        return conf

    def environment(self) -> dict[str, str]:
        """The environment of the cluster scripts and of ``flink run``."""
        env = dict(os.environ)
        env.update(FLINK_CONF_DIR=str(self.folder / "conf"), FLINK_LOG_DIR=str(
            self.folder / "log"), FLINK_PID_DIR=str(self.folder / "pids"),
            FLINK_LIB_DIR=str(self.folder / "lib"))
        current = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*python_path_entries(), *current]))
        env.setdefault("JAVA_HOME", os.environ.get("JAVA_HOME", ""))
        if not env["JAVA_HOME"]:
            del env["JAVA_HOME"]
        return env

    # -- life cycle ---------------------------------------------------------------------------
    def _script(self, name: str) -> None:
        self._script_args(name)

    def _script_args(self, name: str, *args: str) -> None:
        subprocess.run(["bash", str(self.home / "bin" / name), *args],
                       env=self.environment(), check=True, capture_output=True,
                       timeout=self.start_timeout)

    def rest(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://localhost:{self.rest_port}{path}",
                                    timeout=5) as response:
            return json.loads(response.read())

    def start(self) -> Self:
        self.write_conf()
        for sub in ("log", "pids"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self._script("start-cluster.sh")
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                if self.rest("/overview")["taskmanagers"] >= self.taskmanagers:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise JobError(f"the cluster did not come up within {self.start_timeout} s "
                                   f"(logs: {self.folder / 'log'})")
            time.sleep(0.5)

    def pids(self) -> list[int]:
        """The cluster's JVMs, from the PID files of its own folder."""
        found = []
        for path in (self.folder / "pids").glob("*.pid"):
            found += [int(x) for x in path.read_text().split() if x.isdigit()]
        return found

    def stop(self) -> None:
        """Stop every JVM of the cluster and wait until each has gone.

        ``stop-cluster.sh`` stops as many TaskManagers as its workers file lists, each the last
        one of the PID file: after a TaskManager was killed and another started, it may stop a
        dead one and leave a live one. So every JVM of our PID files still alive afterwards is
        told to stop (SIGTERM), killed after 30 s, and waited for.
        """
        pids = self.pids()
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._script("stop-cluster.sh")
        for pid in pids:  # only our own JVMs, by their ids
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for pid in pids:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                gone = time.monotonic() + 10
                while _alive(pid) and time.monotonic() < gone:
                    time.sleep(0.05)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- jobs -----------------------------------------------------------------------------------
    def _run_command(self, args: list[str]) -> list[str]:
        return ["bash", str(self.home / "bin" / "flink"), "run",
                "-m", f"localhost:{self.rest_port}", "-pyclientexec", sys.executable,
                "-pyexec", sys.executable, "-pym", "streamanon.flink", *args]

    def submit(self, args: list[str], *, timeout: float = 600.0
               ) -> subprocess.CompletedProcess[str]:
        """``flink run -pym streamanon.flink ARGS`` against this cluster (waits for the job)."""
        return subprocess.run(self._run_command(args), env=self.environment(),
                              capture_output=True, text=True, timeout=timeout)

    def launch(self, args: list[str]) -> subprocess.Popen[str]:
        """:meth:`submit` without waiting: the ``flink run`` process (output in pipes)."""
        return subprocess.Popen(self._run_command(args), env=self.environment(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def running_jobs(self) -> list[str]:
        """The ids of the cluster's jobs that are running now."""
        return [j["id"] for j in self.rest("/jobs")["jobs"] if j["status"] == "RUNNING"]

    def taskmanager_ids(self) -> set[str]:
        """The ids of the TaskManagers registered now."""
        return {tm["id"] for tm in self.rest("/taskmanagers")["taskmanagers"]}

    def taskmanager_pid(self, taskmanager_id: str) -> int | None:
        """The PID of a TaskManager of this cluster (the JVM listening on its RPC port)."""
        info = self.rest(f"/taskmanagers/{taskmanager_id}")
        found = re.search(r":(\d+)/", info.get("path", ""))
        if found is None:
            return None
        return _listening_pid(int(found.group(1)), [p for p in self.pids() if _alive(p)])

    def start_taskmanager(self) -> None:
        """One more TaskManager (``taskmanager.sh start``); waits until it has registered."""
        before = self.taskmanager_ids()
        self._script_args("taskmanager.sh", "start")
        deadline = time.monotonic() + self.start_timeout
        while not self.taskmanager_ids() - before:
            if time.monotonic() > deadline:
                raise JobError(f"no new TaskManager within {self.start_timeout} s "
                               f"(logs: {self.folder / 'log'})")
            time.sleep(0.3)

    def taskmanagers_of(self, job_id: str) -> dict[str, set[str]]:
        """Per job vertex name, the TaskManagers its subtasks ran on."""
        out: dict[str, set[str]] = {}
        for vertex in self.rest(f"/jobs/{job_id}")["vertices"]:
            tms = self.rest(f"/jobs/{job_id}/vertices/{vertex['id']}/taskmanagers")
            out[vertex["name"]] = {tm["taskmanager-id"] for tm in tms["taskmanagers"]}
        return out

    def records_in(self, job_id: str) -> dict[str, list[int]]:
        """Per job vertex name, the records each of its subtasks read."""
        out = {}
        for vertex in self.rest(f"/jobs/{job_id}")["vertices"]:
            detail = self.rest(f"/jobs/{job_id}/vertices/{vertex['id']}")
            out[vertex["name"]] = [int(st["metrics"]["read-records"])
                                   for st in detail["subtasks"]]
        return out

    def peak_rss_bytes(self) -> dict[int, int]:
        """Peak resident memory (VmHWM) of each of the cluster's JVMs, by PID."""
        return {pid: peak_rss(pid) for pid in self.pids() if _alive(pid)}


def peak_rss(pid: int) -> int:
    """The peak resident set (``VmHWM``) of a live process, in bytes (0 if unknown)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def job_id_of(output: str) -> str | None:
    """The JobID that ``flink run`` printed."""
    found = re.search(r"JobID ([0-9a-f]{32})", output)
    return found.group(1) if found else None


def _listening_pid(port: int, pids: list[int]) -> int | None:
    """Which of ``pids`` holds the TCP socket listening on ``port`` (from ``/proc``)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return pid
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
