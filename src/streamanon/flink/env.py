"""The Flink execution environment for streamanon's jobs: mini-cluster or a real cluster.

Importing this module needs the ``flink`` extra (``pip install 'streamanon[flink]'``).

Two facts of PyFlink shape :func:`make_env`:

* thread mode (Python embedded in the TaskManager's JVM through pemja) is faster than
  process mode (a Python worker beside the JVM), but the embedded interpreter starts from the
  machine's ``libpython`` and sees the virtual environment only through ``PYTHONPATH``; it does
  not run ``.pth`` files, so an editable install of streamanon needs its source folder on the
  path too. Both are added here, before the JVM gateway is launched (it inherits the variable).
* without a restart strategy of ``none`` a Python exception makes the mini-cluster retry
  forever, which looks like a hang (the worker log holds the cause); a failed job should fail.

Design: docs/design/flink.md
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any

import streamanon
from streamanon.errors import ConfigError

EXECUTION_MODES = ("thread", "process")
log = logging.getLogger(__name__)


def python_path_entries() -> list[str]:
    """What the embedded interpreter needs on ``sys.path``: site-packages and streamanon's root."""
    entries = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    entries.append(str(Path(streamanon.__file__).resolve().parent.parent))
    return list(dict.fromkeys(entries))


def prepare_python_path() -> None:
    """Put :func:`python_path_entries` on ``PYTHONPATH`` (idempotent; call before any
    pyflink). (A command's own JVM gets its JIT options in ``runtime.private_temp``.)"""
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    merged = list(dict.fromkeys([*python_path_entries(), *current]))
    os.environ["PYTHONPATH"] = os.pathsep.join(merged)


def preload_client_imports(mode: str = "thread") -> threading.Thread:
    """Import, in a thread, what the client imports once a job gets its first Python function,
    while the JVM gateway starts; join the thread before the job is built. The gateway's own
    modules are imported here first, so that the two threads never import the same module at
    once.

    Thread mode (:func:`light_fn_execution`): only the protocol buffers that describe the
    job's Python functions; process mode: PyFlink's ``fn_execution`` whole (and Beam with it,
    about a second), which its loopback server for the Python workers needs."""
    import pyflink.java_gateway  # noqa: F401  (the main thread's imports until the JVM runs)

    def load() -> None:
        try:
            if mode == "thread":
                light_fn_execution()
                importlib.import_module("pyflink.fn_execution.flink_fn_execution_pb2")
            else:
                importlib.import_module("pyflink.fn_execution")
        except Exception as exc:  # the job's own import of it reports any real problem
            log.debug("preloading pyflink.fn_execution: %s", exc)

    thread = threading.Thread(target=load, name="streamanon-preload", daemon=True)
    thread.start()
    return thread


def light_fn_execution() -> None:
    """Make PyFlink's ``fn_execution`` package importable without its ``__init__``, for a
    client whose jobs run their Python in thread mode.

    A thread mode client never runs a Python worker: of ``fn_execution`` it takes only
    ``flink_fn_execution_pb2`` (the description of each Python function). The package's
    ``__init__`` imports Beam, about 0.8 s of CPU on the client's path, only to learn whether
    the workers' Cython coders load; here the package is registered as a plain namespace
    (its submodules import as they are; the Cython flag reads False). Nothing is done once the
    package was imported (or registered) in this process.
    """
    name = "pyflink.fn_execution"
    if name in sys.modules:
        return
    import importlib.util
    import types

    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        return
    package = types.ModuleType(name)
    package.__spec__ = spec
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    package.__package__ = name
    package.PYFLINK_CYTHON_ENABLED = False  # type: ignore[attr-defined]
    sys.modules.setdefault(name, package)


def flink_settings(
    *,
    parallelism: int = 1,
    mode: str = "thread",
    checkpoint_interval_ms: int = 0,
    checkpoint_dir: str | Path | None = None,
    restore_from: str | Path | None = None,
    restarts: int = 0,
    python_executable: str | None = None,
    buffer_timeout_ms: int | None = None,
    unaligned_checkpoints: bool = False,
    max_parallelism: int | None = None,
    ignore_unclaimed_state: bool = False,
) -> dict[str, str]:
    """The configuration entries of one job (plain strings, so they can be shown or logged).

    ``restarts`` > 0 restarts a failed job from its latest checkpoint that many times (the
    default, none, makes a Python error fail the job instead of looking like a hang).
    ``python_executable`` is the interpreter of the TaskManagers' Python workers (default:
    this one; on a cluster, a path that exists on every TaskManager). ``buffer_timeout_ms``
    bounds how long a record may wait in a network buffer (Flink's default: 100 ms per
    exchange; lower trades throughput for latency). ``unaligned_checkpoints`` lets checkpoint
    barriers overtake buffered records (the in-flight records are stored in the checkpoint), so
    a checkpoint completes quickly even under backpressure. ``max_parallelism`` fixes how
    Flink spreads keys over subtasks; a job restored from a checkpoint must keep it.

    Args:
        parallelism: the job's parallelism (at least 1).
        mode: the Python execution mode (one of ``EXECUTION_MODES``).
        checkpoint_interval_ms: milliseconds between checkpoints (0: none).
        checkpoint_dir: the checkpoint folder (``None``: Flink's default).
        restore_from: the checkpoint to resume from (``None``: a fresh run).
        restarts: how often a failed job restarts from its latest checkpoint.
        python_executable: the TaskManagers' Python interpreter (``None``: this one).
        buffer_timeout_ms: milliseconds a record may wait in a network buffer (``None``: Flink's).
        unaligned_checkpoints: let checkpoint barriers overtake buffered records.
        max_parallelism: Flink's maximum parallelism (``None``: Flink's default).
        ignore_unclaimed_state: let a restore drop checkpointed state no operator claims.
    """
    if mode not in EXECUTION_MODES:
        raise ConfigError(f"execution mode must be one of {EXECUTION_MODES}, got {mode!r}")
    if parallelism < 1:
        raise ConfigError(f"parallelism must be >= 1, got {parallelism}")
    settings = {
        "python.execution-mode": mode,
        "python.executable": python_executable or sys.executable,
        "python.client.executable": sys.executable,
        "restart-strategy.type": "none",
        "parallelism.default": str(parallelism),
        # a bounded file job ends with a final checkpoint that commits the sink's last files
        "execution.checkpointing.checkpoints-after-tasks-finish": "true",
    }
    if max_parallelism is not None:
        settings["pipeline.max-parallelism"] = str(int(max_parallelism))
    if buffer_timeout_ms is not None:
        settings["execution.buffer-timeout.interval"] = f"{int(buffer_timeout_ms)} ms"
    if restarts > 0:
        # exponential back-off (1, 2, 4, 8, then 10 s): a TaskManager that died is still
        # listed with its slots for a few heartbeats, and restarts 1 s apart could spend
        # the whole budget on deployments to it before the JobManager notices (failures
        # inside one back-off are counted once)
        settings["restart-strategy.type"] = "exponential-delay"
        settings["restart-strategy.exponential-delay.attempts-before-reset-backoff"] = (
            str(int(restarts)))
        settings["restart-strategy.exponential-delay.initial-backoff"] = "1 s"
        settings["restart-strategy.exponential-delay.max-backoff"] = "10 s"
        settings["restart-strategy.exponential-delay.backoff-multiplier"] = "2.0"
        settings["restart-strategy.exponential-delay.jitter-factor"] = "0.0"
    if checkpoint_interval_ms > 0:
        settings["execution.checkpointing.interval"] = f"{int(checkpoint_interval_ms)} ms"
        settings["execution.checkpointing.mode"] = "EXACTLY_ONCE"
        if unaligned_checkpoints:
            settings["execution.checkpointing.unaligned.enabled"] = "true"
    if checkpoint_dir is not None:
        settings["execution.checkpointing.dir"] = Path(checkpoint_dir).resolve().as_uri()
        settings["execution.checkpointing.externalized-checkpoint-retention"] = (
            "RETAIN_ON_CANCELLATION")
    if restore_from is not None:
        settings["execution.state-recovery.path"] = Path(restore_from).resolve().as_uri()
        if ignore_unclaimed_state:  # state of an operator no longer in the job is dropped
            settings["execution.state-recovery.ignore-unclaimed-state"] = "true"
    return settings


def make_env(**options: Any) -> Any:
    """A ``StreamExecutionEnvironment`` in streaming mode configured by :func:`flink_settings`.

    Run inside ``flink run`` it joins that cluster; run from a plain Python process it starts
    a local mini-cluster.
    """
    prepare_python_path()
    from pyflink.common import Configuration
    from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

    config = Configuration()
    settings = flink_settings(**options)
    for key, value in settings.items():
        config.set_string(key, value)
    _loopback_server_for(settings["python.execution-mode"])
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    return env


#: PyFlink's switch, read by the client whenever it makes an environment object (the job's
#: building makes more, e.g. for a step on a broadcast-connected stream): ``process`` starts no
#: loopback server for Python workers in the client
_WORKER_MODE = "_python_worker_execution_mode"
_switch_set_here = False


def _loopback_server_for(mode: str) -> None:
    """Set the switch for the job whose environment is being made: a thread mode job's Python
    runs inside the JVM and needs no loopback server; a process mode job of this process
    gets its server again. A switch the caller set is left alone."""
    global _switch_set_here
    if mode == "thread" and _WORKER_MODE not in os.environ:
        os.environ[_WORKER_MODE] = "process"
        _switch_set_here = True
    elif mode != "thread" and _switch_set_here:
        os.environ.pop(_WORKER_MODE, None)
        _switch_set_here = False


def latest_checkpoint(checkpoint_dir: str | Path) -> Path | None:
    """The newest completed checkpoint (``chk-N`` with ``_metadata``) under ``checkpoint_dir``."""
    found = [(meta.stat().st_mtime_ns, int(meta.parent.name.split("-", 1)[1]), meta.parent)
             for meta in Path(checkpoint_dir).glob("*/chk-*/_metadata")]
    return max(found, key=lambda f: f[:2])[2] if found else None
