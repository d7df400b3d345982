"""How a ``kafka://`` endpoint is named and how a Kafka run is configured.

* :func:`is_kafka`, :func:`parse_kafka_url` — ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC``.
* :class:`KafkaOptions` — how a run with a ``kafka://`` source reads and keeps its progress.
* :func:`default_group` — the consumer group (and progress topic) a run uses by default.
* :func:`read_kafka_config` — a ``--kafka-config`` properties file (TLS, SASL, ...) as the
  librdkafka settings of every client; :func:`java_kafka_config` — the same settings for the
  Java clients of the Flink jobs; :func:`redacted` — settings fit to be shown.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamanon.errors import ConfigError, KafkaConfigError

KAFKA_PREFIX = "kafka://"
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20


def is_kafka(spec: object) -> bool:
    """True for a ``kafka://HOST:PORT/TOPIC`` endpoint.

    >>> is_kafka("kafka://127.0.0.1:9092/readings"), is_kafka("trace.csv")
    (True, False)
    """
    return isinstance(spec, str) and spec.startswith(KAFKA_PREFIX)


def parse_kafka_url(url: str) -> tuple[str, str]:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC`` -> ``(bootstrap servers, topic)``.

    >>> parse_kafka_url("kafka://127.0.0.1:9092/readings")
    ('127.0.0.1:9092', 'readings')
    """
    prefix = KAFKA_PREFIX
    if not url.startswith(prefix):
        raise ConfigError(f"not a kafka:// URL: {url!r}")
    rest = url[len(prefix):]
    servers, _, topic = rest.partition("/")
    if not servers or not topic or "/" in topic:
        raise ConfigError(f"expected kafka://HOST:PORT/TOPIC, got {url!r}")
    return servers, topic


@dataclass
class KafkaOptions:
    """How a run with a ``kafka://`` source reads its topic and keeps its progress.

    ``group``: the consumer group (its committed offsets are what ``start="committed"`` and
    lag monitors read) and the name of the run's progress topic, ``GROUP.progress`` on the
    input's broker; default ``streamanon-COMMAND-OUTPUT`` (the output topic and its broker,
    or the output file's name and a hash of its path). ``start``: where a pipeline without a
    checkpoint begins, ``"committed"`` (the group's offsets, else the earliest) or ``"earliest"``; a
    pipeline with a checkpoint always resumes from it. ``until_end``: stop at the end
    offsets found at start (else run until ``stop`` is set: SIGTERM, Ctrl-C).
    ``checkpoint_every``: seconds between checkpoints (what a restart re-reads at most).
    ``config``: librdkafka settings for every client (TLS, SASL, ...).
    ``checkpoint_key``: the file of the key that signs the checkpoints (default:
    ``$STREAMANON_CHECKPOINT_KEY_FILE``, else a per-user file created on first use; see
    :func:`streamanon.pipeline.kafka.exactly_once.checkpoint_key`).
    """

    group: str | None = None
    start: str = "committed"
    until_end: bool = False
    checkpoint_every: float = 5.0
    config: dict[str, Any] = field(default_factory=dict)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    fetch_batch: int = 20_000
    stop: Any = None
    log: Callable[[str], None] | None = None
    after_batch: Callable[[int], None] | None = None
    on_batch: Callable[[int], None] | None = None  # messages per batch (progress displays)
    on_stage: Callable[[Any], None] | None = None  # the run's stage once settled (metrics)
    identity: dict[str, Any] = field(default_factory=dict)  # more that must not change
    checkpoint_key: str | Path | None = None

    def say(self, text: str) -> None:
        (self.log or (lambda s: print(f"streamanon kafka: {s}", file=sys.stderr)))(text)


def _broker_name(servers: str) -> str:
    """A broker list as part of a topic name (``127.0.0.1:9092`` -> ``127.0.0.1_9092``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", servers)
    if len(name) > 60:
        import hashlib  # (here: a file run imports this module for is_kafka alone)

        name = name[:49] + "-" + hashlib.sha256(servers.encode()).hexdigest()[:10]
    return name


def default_group(command: str, output: str | Path, source_topic: str = "") -> str:
    """``streamanon-COMMAND-NAME``: NAME is the output topic and its broker, or the output
    file's name and a hash of its absolute path, or for standard output the input topic and
    ``stdout`` (a Kafka group and topic name: letters, digits, ``._-``). The broker is part of
    the name: the same topic name on two brokers is two pipelines, with two progress topics.

    >>> default_group("z", "kafka://127.0.0.1:9092/published")
    'streamanon-z-published-127.0.0.1_9092'
    >>> default_group("z", "-", "readings")
    'streamanon-z-readings-stdout'
    """
    if is_kafka(output):
        servers, topic = parse_kafka_url(str(output))
        name = f"{topic}-{_broker_name(servers)}"
    elif str(output) == "-":
        name = f"{source_topic}-stdout" if source_topic else "stdout"
    else:
        path = Path(output).resolve()
        import hashlib

        digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
        name = f"{re.sub(r'[^A-Za-z0-9._-]', '_', path.name)[:80]}-{digest}"
    return f"streamanon-{command}-{name}"


#: setting names whose values are never shown (summaries, logs, --json, progress topics)
SECRET_WORDS = ("password", "secret", "jaas", "token", "key.pem", "keystore.key",
                "certificate.pem", "oauthbearer.config", "credentials")


def read_kafka_config(path: str | Path) -> dict[str, str]:
    r"""The settings of a properties file: ``name=value`` (or ``name: value``) per line,
    ``#`` / ``!`` comments, blank lines ignored, a trailing ``\`` continues a line. The
    names are librdkafka's (``security.protocol``, ``ssl.ca.location``,
    ``sasl.mechanisms``, ``sasl.username``, ...); the Flink jobs translate them for the Java
    clients (:func:`java_kafka_config`). Values are never echoed in errors.

    >>> import tempfile, os
    >>> f = tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False)
    >>> _ = f.write("# TLS\nsecurity.protocol=SSL\nssl.ca.location = /etc/ca.pem\n"); f.close()
    >>> read_kafka_config(f.name)
    {'security.protocol': 'SSL', 'ssl.ca.location': '/etc/ca.pem'}
    >>> os.unlink(f.name)
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KafkaConfigError(f"--kafka-config {path}: cannot read it ({exc.__class__.__name__})"
                               ) from None
    out: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        cut = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not cut:
            raise KafkaConfigError(f"--kafka-config {path}, line {number}: expected "
                                   "name=value")
        name, value = line[: min(cut)].strip(), line[min(cut) + 1:].strip()
        out[name] = value
    return out


def is_secret(name: str) -> bool:
    """True for a setting whose value must not be shown (passwords, keys, JAAS lines)."""
    low = name.lower()
    return any(word in low for word in SECRET_WORDS)


def redacted(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` fit to be shown: secret values replaced by ``***``.

    >>> redacted({"security.protocol": "SASL_SSL", "sasl.password": "hunter2"})
    {'security.protocol': 'SASL_SSL', 'sasl.password': '***'}
    """
    return {k: ("***" if is_secret(k) else v) for k, v in config.items()}


#: librdkafka names that the Java clients spell the same way
_SAME_IN_JAVA = ("security.protocol", "ssl.endpoint.identification.algorithm",
                 "ssl.key.password", "ssl.cipher.suites", "sasl.kerberos.service.name",
                 "client.id", "client.rack")


#: DER of the object identifier of PBES2 (1.2.840.113549.1.5.13), the scheme of an encrypted
#: PKCS#8 PEM key written by OpenSSL 3 or ``cryptography``
_PBES2 = bytes.fromhex("06092a864886f70d01050d")
_ENCRYPTED_PEM = "-----BEGIN ENCRYPTED PRIVATE KEY-----"


def _check_java_key(name: str, path: str, text: str) -> None:
    """Refuse a PBES2-encrypted PEM key: Java 17's Kafka clients fail on it at run time
    ("PBES2 SecretKeyFactory not available"), after the whole job has started."""
    if _ENCRYPTED_PEM not in text:
        return
    import base64
    import binascii

    body = text.split(_ENCRYPTED_PEM, 1)[1].split("-----END", 1)[0]
    try:
        der = base64.b64decode("".join(body.split()), validate=True)
    except (binascii.Error, ValueError):
        return  # not base64: the Java client's own error names the file
    if _PBES2 in der[:64]:
        raise KafkaConfigError(
            f"{name}: {path} is a PEM key encrypted with PBES2, which the Java Kafka clients "
            "of the Flink jobs cannot decrypt (Java 17); give the certificate and key as a "
            "PKCS#12 key store instead (ssl.keystore.location, ssl.keystore.password: "
            "librdkafka reads it too), or the key unencrypted")


def java_kafka_config(config: dict[str, Any]) -> dict[str, str]:
    """librdkafka settings (:func:`read_kafka_config`) as the Java clients' properties.

    Translated: ``sasl.mechanisms`` -> ``sasl.mechanism``; ``sasl.username`` /
    ``sasl.password`` -> a ``sasl.jaas.config`` line (PLAIN or SCRAM); ``ssl.ca.location``
    -> a PEM trust store (``ssl.truststore.type=PEM``, ``ssl.truststore.certificates``: the
    file's content); ``ssl.certificate.location`` + ``ssl.key.location`` -> a PEM key store
    (``ssl.keystore.type=PEM``, its chain and key: the files' content);
    ``ssl.endpoint.identification.algorithm=none`` -> empty (Java's "off");
    ``fetch.wait.max.ms`` -> ``fetch.max.wait.ms`` (how long the broker may hold a fetch that
    finds too few records: a live record's latency on some brokers); a PEM key
    encrypted with PBES2, which Java 17's clients cannot decrypt, is refused
    (:class:`KafkaConfigError`: use a PKCS#12 key store). Names that are
    already Java's (``ssl.truststore.*``, ``ssl.keystore.*``, ``sasl.jaas.config``, ...)
    pass as they are; librdkafka-only names (``ssl.*.location`` once translated,
    ``enable.ssl.certificate.verification``...) are left out.

    >>> java_kafka_config({"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
    ...                    "sasl.username": "u", "sasl.password": "p"})["sasl.jaas.config"]
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    >>> java_kafka_config({"fetch.wait.max.ms": "500"})
    {'fetch.max.wait.ms': '500'}
    """
    conf = {str(k): str(v) for k, v in config.items() if not callable(v)}
    out: dict[str, str] = {}
    for name in _SAME_IN_JAVA:
        if name in conf:
            out[name] = conf[name]
    if out.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["ssl.endpoint.identification.algorithm"] = ""
    if "fetch.wait.max.ms" in conf:
        out["fetch.max.wait.ms"] = conf["fetch.wait.max.ms"]
    mechanism = conf.get("sasl.mechanisms") or conf.get("sasl.mechanism")
    if mechanism:
        out["sasl.mechanism"] = mechanism
    if "sasl.username" in conf and "sasl.jaas.config" not in conf:
        module = ("org.apache.kafka.common.security.scram.ScramLoginModule"
                  if (mechanism or "").upper().startswith("SCRAM") else
                  "org.apache.kafka.common.security.plain.PlainLoginModule")

        def quoted(text: str) -> str:
            return text.replace("\\", "\\\\").replace('"', '\\"')

        out["sasl.jaas.config"] = (f'{module} required username="{quoted(conf["sasl.username"])}"'
                                   f' password="{quoted(conf.get("sasl.password", ""))}";')

    def content(name: str) -> str:
        try:
            return Path(conf[name]).read_text(encoding="utf-8")
        except OSError as exc:
            raise KafkaConfigError(f"{name}: cannot read {conf[name]} ({exc.strerror})"
                                   ) from None

    if "ssl.ca.location" in conf:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.certificates"] = content("ssl.ca.location")
    if "ssl.certificate.location" in conf and "ssl.key.location" in conf:
        out["ssl.keystore.type"] = "PEM"
        out["ssl.keystore.certificate.chain"] = content("ssl.certificate.location")
        out["ssl.keystore.key"] = content("ssl.key.location")
        _check_java_key("ssl.key.location", conf["ssl.key.location"], out["ssl.keystore.key"])
    for name, value in conf.items():
        if name.startswith(("ssl.truststore.", "ssl.keystore.", "sasl.jaas.", "sasl.login.",
                            "sasl.client.", "sasl.oauthbearer.")) and name not in out:
            out[name] = value
    return out


__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "KAFKA_PREFIX", "KafkaConfigError", "KafkaOptions",
           "default_group", "is_kafka", "is_secret", "java_kafka_config", "parse_kafka_url",
           "read_kafka_config", "redacted"]
