"""Shared test fixtures: hypothesis profiles (CI runs fewer examples per property), the shared
Kafka broker, and the ``solo`` phase split of ``./dev test`` (``STREAMANON_TEST_PHASE``)."""

import os
import tempfile
from collections.abc import Iterator
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


# ./dev test runs the suite in two phases: "parallel" (every test not marked solo, on pytest-xdist
# workers) and then "solo" (the tests marked solo: live sites on short wall-clock cycles, in one
# process with no other worker beside them). Unset (plain pytest): every test runs.
PHASES = ("parallel", "solo")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = os.environ.get("STREAMANON_TEST_PHASE", "")
    if not phase:
        return
    if phase not in PHASES:
        raise pytest.UsageError(f"STREAMANON_TEST_PHASE={phase!r}: expected one of {PHASES}")
    want_solo = phase == "solo"
    keep, drop = [], []
    for item in items:
        (keep if (item.get_closest_marker("solo") is not None) == want_solo else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
