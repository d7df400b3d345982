"""Shared test fixtures: hypothesis profiles (CI runs fewer examples per property), the JVMs'
options ($JVM_ARGS), the shared Kafka broker, the ``wallclock`` phase split of ``./dev test``
(``STREAMANON_TEST_PHASE``) and, on pytest-xdist workers, the order of the test files
(longest first: tests/durations.json)."""

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# Kafka runs sign their checkpoints with a key created on first use under $XDG_STATE_HOME:
# every test (and every process a test starts: they inherit the environment) uses a temporary
# one, never the real home's
_STATE = tempfile.mkdtemp(prefix="streamanon-test-state-")
os.environ["XDG_STATE_HOME"] = _STATE
os.environ.pop("STREAMANON_CHECKPOINT_KEY_FILE", None)

# The JVMs the tests start (PyFlink's mini-cluster, `flink run`, a standalone cluster's
# JobManager and TaskManagers: their launchers all read $JVM_ARGS) compile with C1 only and
# collect with the serial collector: the tests' jobs are short, and the JIT's second tier and
# G1's threads cost them a third of their CPU time (start-up included) for nothing; what a
# job computes does not change. A $JVM_ARGS of one's own is kept as it is.
TEST_JVM_ARGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("JVM_ARGS", TEST_JVM_ARGS)


@pytest.fixture(scope="session", autouse=True)
def _temporary_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``$XDG_CACHE_HOME`` is a temporary folder for the whole session (set in ``os.environ``,
    so every process a test starts inherits it): the help pages ``main()`` caches
    (:mod:`streamanon.cli.helpcache`) stay out of the user's ``~/.cache``. The Flink Kafka
    jars, a download and a build, keep their usual folder (given explicitly)."""
    from streamanon.flink.kafka_jars import cache_dir

    saved = {name: os.environ.get(name)
             for name in ("XDG_CACHE_HOME", "STREAMANON_FLINK_KAFKA_JARS")}
    os.environ["STREAMANON_FLINK_KAFKA_JARS"] = str(cache_dir())
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Tansu broker on loopback for the whole session (memory storage), shared by the
    Kafka tests of every package (tests/pipeline, tests/flink); see
    tests/pipeline/kafka/conftest.py."""
    from tests.pipeline.kafka.conftest import SharedBroker, require_kafka

    require_kafka()
    from streamanon.harness.kafka_broker import Broker

    broker = Broker(tmp_path_factory.mktemp("kafka-broker"), storage="memory")
    broker.start()
    try:
        yield SharedBroker(broker)
    finally:
        broker.stop(kill=True)  # memory storage: nothing to keep (a clean stop takes 5 s)
        broker.close()


@pytest.fixture(scope="session")
def tls_kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A broker reached only through TLS with client certificates (a TLS front on loopback
    that forwards to a second Tansu broker, which advertises the front), for the whole
    session: ``.bootstrap``, ``.url(topic)``, ``.names(...)``, ``.config`` (a
    ``--kafka-config`` file: PEM files), ``.keystore_config`` (the same with a PKCS#12 key
    store), ``.files`` (the PEM files). See tests/pipeline/kafka/tls_front.py.
    """
    from tests.pipeline.kafka.conftest import SharedBroker, require_kafka

    require_kafka()
    from streamanon.harness.kafka_broker import Broker
    from tests.pipeline.kafka.tls_front import TlsFront, client_properties, make_tls_files

    work = tmp_path_factory.mktemp("kafka-tls")
    files = make_tls_files(work / "pki")
    front = TlsFront(files)
    broker = Broker(work / "broker", storage="memory", advertised=f"localhost:{front.port}")
    broker.start()
    front.start((broker.host, broker.port))
    shared = SharedBroker(broker)
    shared.bootstrap = f"localhost:{front.port}"
    shared.files = files  # type: ignore[attr-defined]
    shared.config = client_properties(work / "client.properties", files)  # type: ignore[attr-defined]
    shared.keystore_config = client_properties(  # type: ignore[attr-defined]
        work / "client-keystore.properties", files, keystore=True)
    shared.front = front  # type: ignore[attr-defined]
    try:
        yield shared
    finally:
        front.stop()
        broker.stop(kill=True)
        broker.close()


PHASES = ("parallel", "wallclock", "beside", "alone")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``./dev test``'s phases (``STREAMANON_TEST_PHASE``): ``parallel``, every test not in the
    other two, on the xdist workers; then, at the same time, ``wallclock`` (the tests marked
    so: live sites on short wall-clock cycles) and ``beside`` (the shortest files, about as
    long together: one-core tests, never a Flink job or a broker beside the live sites); last,
    ``alone`` (the tests marked so, which miss their cycles even beside one other process)."""
    phase = os.environ.get("STREAMANON_TEST_PHASE", "")
    if phase:
        if phase not in PHASES:
            raise pytest.UsageError(f"STREAMANON_TEST_PHASE={phase!r}: expected one of {PHASES}")
        files = _files(items)
        beside = _beside(files, _seconds(files))

        def phase_of(item: pytest.Item) -> str:
            if item.get_closest_marker("alone") is not None:
                return "alone"
            if item.get_closest_marker("wallclock") is not None:
                return "wallclock"
            return "beside" if item.nodeid.split("::", 1)[0] in beside else "parallel"

        keep, drop = [], []
        for item in items:
            (keep if phase_of(item) == phase else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _order_for_workers(items)


# seconds per test file (paths as in the test IDs), measured on two workers: rewrite it with
# `python -m tests.durations JUNIT_XML...` after a run with --junitxml; a file not listed counts
# this much per test
DURATIONS = Path(__file__).with_name("durations.json")
UNLISTED_SECONDS_PER_TEST = 0.5


def _files(items: list[pytest.Item]) -> dict[str, list[pytest.Item]]:
    """The items per test file, in collection order."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    return files


def _seconds(files: dict[str, list[pytest.Item]]) -> Callable[[str], float]:
    """A test file's seconds, from tests/durations.json."""
    measured: dict[str, float] = json.loads(DURATIONS.read_text(encoding="utf-8"))["seconds"]
    return lambda path: measured.get(path, UNLISTED_SECONDS_PER_TEST * len(files[path]))


def _timed(files: dict[str, list[pytest.Item]]) -> set[str]:
    return {p for p, its in files.items() if any(i.get_closest_marker("wallclock") for i in its)}


def _beside(files: dict[str, list[pytest.Item]], seconds: Callable[[str], float]) -> set[str]:
    """The shortest files that take about as long together as the ``wallclock`` files; never
    one with a test marked ``flink`` or ``kafka`` (a JVM or a broker, however short, takes
    both cores for a moment: the live sites beside it would miss cycles)."""
    timed = _timed(files)
    heavy = {p for p, its in files.items()
             if any(i.get_closest_marker(m) for i in its for m in ("flink", "kafka"))}
    rest = sorted((p for p in files if p not in timed and p not in heavy), key=seconds,
                  reverse=True)  # stable
    budget = sum(seconds(p) for p in timed)
    beside, cut = 0.0, len(rest)
    while cut > 0 and beside + seconds(rest[cut - 1]) <= budget:
        cut -= 1
        beside += seconds(rest[cut])
    return set(rest[cut:])


def _order_for_workers(items: list[pytest.Item]) -> None:
    """Order the test files for ``./dev test``'s workers, which take whole files in collection
    order (``--dist loadfile --no-loadscope-reorder``); each file's tests keep their order.

    Longest first (tests/durations.json), so that the last files are short and the workers end
    together, not one on a long file while the other waits. Run without phases (``pytest -n
    2``), the files with a ``wallclock`` test come just before the :func:`_beside` files: while
    one worker runs them, the other runs those short, one-core tests.
    """
    files = _files(items)
    seconds = _seconds(files)
    timed, beside = _timed(files), _beside(files, seconds)
    rest = sorted((p for p in files if p not in timed and p not in beside), key=seconds,
                  reverse=True)
    order = [*rest, *sorted(timed, key=seconds, reverse=True),
             *sorted(beside, key=seconds, reverse=True)]
    items[:] = [item for path in order for item in files[path]]
