"""MQTT sensor intake: the gateway reads its broker (:mod:`~.mqtt_broker`) and applies the
line port's rules (:meth:`~.intake.SensorIntake.offer`: one reading per sensor per cycle, the
same validation, refusal reasons and counts).

A sensor publishes (QoS 1) to ``streamanon/gw<i>/<its id>`` the payload the line port takes
as a line (``t,a`` or ``{"t":..,"a":..}``); the broker's ACL makes the topic's ID the
certificate's, so the topic names the sensor. A device people already own publishes its own
JSON to its own topic: a :class:`DeviceMapping` of the gateway's config turns a topic pattern
and JSON paths (or the plain payload) into ``(sensor, value, time)``, e.g. Tasmota's
``tele/<device>/SENSOR`` with ``{"Time": "...", "ENERGY": {"Power": 45, ...}}``.

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import math
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamanon.errors import ConfigError
from streamanon.net.intake import LOGGED_REFUSALS, SensorIntake
from streamanon.net.mqtt_broker import TOPIC_ROOT, receipt_topic
from streamanon.net.pki import gateway_name

log = logging.getLogger("streamanon.gateway")

SESSION_NEVER_EXPIRES = 0xFFFFFFFF  # MQTT 5: the session outlives any disconnection


@dataclass(frozen=True)
class DeviceMapping:
    """A device's topic and payload -> a reading.

    ``topic``: an MQTT topic with ``{sensor}`` where the device's name (its certificate's
    name, registered as a sensor ID) stands, e.g. ``tele/{sensor}/SENSOR``. ``value``: a
    dotted JSON path to the reading (``ENERGY.Power``), or ``""`` for a plain payload (the
    reading itself). ``time``: a dotted JSON path to the time (ISO 8601, UTC when it names no
    zone, or seconds), or ``""``: the time the gateway received it. ``bucket``: round a
    reading in watts onto the exact counter's grid (:func:`streamanon.dezent.grid.bucket`).
    """

    topic: str
    value: str = ""
    time: str = ""
    bucket: bool = False

    def __post_init__(self) -> None:
        parts = self.topic.split("/")
        if parts.count("{sensor}") != 1 or any(p in ("+", "#") for p in parts):
            raise ConfigError(f"device topic {self.topic!r} needs exactly one '{{sensor}}' "
                              "level and no wildcards")

    @property
    def subscription(self) -> str:
        return self.topic.replace("{sensor}", "+")

    def sensor_of(self, topic: str) -> str | None:
        want, got = self.topic.split("/"), topic.split("/")
        if len(want) != len(got):
            return None
        sensor = None
        for w, g in zip(want, got, strict=True):
            if w == "{sensor}":
                sensor = g
            elif w != g:
                return None
        return sensor

    def line(self, payload: bytes, received: float) -> str | None:
        """The payload as the line port's JSON line, or None when it does not parse (then
        refused as malformed)."""
        try:
            text = payload.decode("utf-8").strip()
            doc: Any = json.loads(text) if (self.value or self.time) else None
            raw: Any = _path(doc, self.value) if self.value else text
            t: Any = _time(_path(doc, self.time)) if self.time else received
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None
        if self.bucket:
            from streamanon.dezent.grid import bucket

            try:
                w = float(raw)
            except (TypeError, ValueError):
                return None
            if not math.isfinite(w):
                return None
            import numpy as np

            raw = int(bucket(np.array([w]))[0])
        elif isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        return json.dumps({"t": t, "a": raw})


def _path(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict):
            raise KeyError(part)
        doc = doc[part]
    return doc


def _time(raw: Any) -> float:
    if isinstance(raw, bool):
        raise TypeError("a boolean is no time")
    if isinstance(raw, int | float):
        return float(raw)
    stamp = dt.datetime.fromisoformat(str(raw))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()


def parse_devices(raw: Any, where: str) -> tuple[DeviceMapping, ...]:
    """``[[sensors.device]]`` tables -> mappings."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise ConfigError(f"{where}: [[sensors.device]] must be tables")
    try:
        return tuple(DeviceMapping(**x) for x in raw)
    except TypeError as exc:
        raise ConfigError(f"{where} [[sensors.device]]: {exc}") from None


class _NamedContext(ssl.SSLContext):
    """A client context that checks the server's certificate against ``expected`` (the
    gateway's name), whatever address was dialled (paho passes the address)."""

    expected: str = ""

    def wrap_socket(self, sock: Any, *args: Any, server_hostname: str | None = None,
                    **kwargs: Any) -> ssl.SSLSocket:
        return super().wrap_socket(sock, *args, server_hostname=self.expected, **kwargs)


def mqtt_client_context(ca: str | Path, cert: str | Path | None, key: str | Path | None,
                        server: str) -> ssl.SSLContext:
    """TLS for an MQTT client of a gateway's broker: the site's CA only, the broker must be
    ``server`` (``gw<i>``); ``cert``/``key``: the client's certificate (None: none, a test's
    stranger)."""
    ctx = _NamedContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.expected = server
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(cafile=str(ca))
    if cert is not None and key is not None:
        ctx.load_cert_chain(certfile=str(cert), keyfile=str(key))
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class MqttIntake:
    """The gateway's subscription to its own broker, feeding ``intake``.

    A persistent MQTT 5 session (client ID = the gateway's name, no clean start, a session
    that never expires, QoS 1): what the broker took while the gateway was away, or before
    the broker restarted, is delivered once it is back. Messages arrive on paho's thread and
    are handed to the event loop, where :meth:`SensorIntake.offer` runs as for a line of the
    line port; a sensor that asks for a receipt (MQTT 5 response topic = its
    :func:`~.mqtt_broker.receipt_topic`, with correlation data) gets the line port's reply
    there (QoS 1, so the broker keeps it for a sensor that is reconnecting), published only
    once the reading is in the gateway.

    Args:
        intake: the line port's intake, whose rules every reading goes through.
        gateway: the gateway's index (its client ID and topic prefix).
        address: the gateway's broker (``host:port``).
        ca: the site CA's certificate (the broker's certificate must chain to it).
        cert: the gateway's certificate (its MQTT identity).
        key: the gateway's private key.
        devices: the mappings of device topics and payloads to sensor readings.
        wall_cycle: the current cycle of the gateway's clock.
        count: called with the reason of each refused message (the metrics).
        clock: the wall clock (Unix seconds).
    """

    def __init__(self, intake: SensorIntake, gateway: int, *, address: str, ca: Path,
                 cert: Path, key: Path, devices: tuple[DeviceMapping, ...],
                 wall_cycle: Callable[[], int], count: Callable[[str], None],
                 clock: Callable[[], float]) -> None:
        self.intake, self.gateway, self.address = intake, gateway, address
        self.devices, self.wall_cycle, self.count, self.clock = devices, wall_cycle, count, clock
        self.name = gateway_name(gateway)
        self.prefix = f"{TOPIC_ROOT}/{self.name}/"
        self.ctx = mqtt_client_context(ca, cert, key, self.name)
        self.refused: dict[str, int] = {}
        self.connected = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.client: Any = None

    def start(self) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        from streamanon.net.tls import split_address

        self.loop = asyncio.get_running_loop()
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.name,
                             protocol=mqtt.MQTTv5)
        client.tls_set_context(self.ctx)
        client.reconnect_delay_set(0.1, 1.0)
        client.max_inflight_messages_set(1000)
        client.max_queued_messages_set(0)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = SESSION_NEVER_EXPIRES
        host, port = split_address(self.address)
        client.connect_async(host, port, keepalive=30, clean_start=False, properties=props)
        client.loop_start()
        self.client = client

    def stop(self) -> None:
        if self.client is not None:
            self.client.disconnect()
            self.client.loop_stop()

    # -- paho's thread ----------------------------------------------------------------------
    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        if rc.is_failure:
            log.warning("%s: its MQTT broker refused the gateway: %s", self.name, rc)
            return
        topics = [(self.prefix + "+", 1)] + [(d.subscription, 1) for d in self.devices]
        client.subscribe(topics)
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self.connected.set)
        log.info("%s: subscribed to its MQTT broker %s (%d topics)", self.name, self.address,
                 len(topics))

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, rc: Any,
                       props: Any) -> None:
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self.connected.clear)
        log.info("%s: MQTT broker connection lost (%s); reconnecting", self.name, rc)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        assert self.loop is not None
        props = getattr(msg, "properties", None)
        answer = getattr(props, "ResponseTopic", None)
        corr = getattr(props, "CorrelationData", None)
        self.loop.call_soon_threadsafe(self._take, msg.topic, bytes(msg.payload), answer, corr)

    def _take(self, topic: str, payload: bytes, answer: str | None,
              corr: bytes | None) -> None:
        """Offer a message; when its sender asked for a receipt on its own receipt topic,
        publish the reply (QoS 1) now that the reading is in the gateway."""
        sensor, reply, _outcome = self.judge(topic, payload)
        if answer is not None and sensor is not None \
                and answer == receipt_topic(self.gateway, sensor):
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            props = Properties(PacketTypes.PUBLISH)
            if corr is not None:
                props.CorrelationData = corr
            # QoS 1: a sensor reconnecting when the receipt is published (after a broker
            # restart the gateway may be back first) finds it in its persistent session; a
            # receipt lost with a killed broker is a reading the sensor counts undelivered
            # (the safe side): it never stands for a reading the gateway does not have
            self.client.publish(answer, reply.encode(), qos=1, properties=props)

    # -- the event loop ---------------------------------------------------------------------
    def offer(self, topic: str, payload: bytes) -> str:
        """One message -> the outcome (``ok`` or a refusal's kind), counted and logged as a
        line of the line port is."""
        return self.judge(topic, payload)[2]

    def judge(self, topic: str, payload: bytes) -> tuple[str | None, str, str]:
        """One message -> ``(sensor, reply, outcome)``: the sensor it is of (None: none),
        the line port's reply and the outcome (``ok`` or a refusal's kind), counted and
        logged."""
        sensor, line = self._reading(topic, payload)
        if sensor is None:
            reply, outcome = f"err topic {topic!r} names no sensor of {self.name}", "malformed"
        elif self.intake.registry is not None and sensor not in self.intake.registry:
            reply = f"err sensor {sensor} is not registered at this gateway"
            outcome = "not_registered"
        elif line is None:
            reply, outcome = "err malformed payload for its device mapping", "malformed"
        else:
            reply, outcome = self.intake.offer(sensor, line, self.wall_cycle())
        self.count(outcome)
        if outcome != "ok":
            key = sensor or "?"
            n = self.refused[key] = self.refused.get(key, 0) + 1
            if n <= LOGGED_REFUSALS:
                log.info("sensor %s (MQTT %s): %s", key, topic, reply)
            elif n == LOGGED_REFUSALS + 1:
                log.warning("sensor %s (MQTT): more refusals, counted only (the first %d "
                            "logged)", key, LOGGED_REFUSALS)
        return sensor, reply, outcome

    def _reading(self, topic: str, payload: bytes) -> tuple[str | None, str | None]:
        if topic.startswith(self.prefix):
            sensor = topic[len(self.prefix):]
            if not sensor or "/" in sensor:
                return None, None
            return sensor, payload.decode("utf-8", errors="replace").strip()
        for dev in self.devices:
            sensor = dev.sensor_of(topic)
            if sensor is not None:
                return sensor, dev.line(payload, self.clock())
        return None, None
