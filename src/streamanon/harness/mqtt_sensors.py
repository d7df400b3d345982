"""A sensor node as a real MQTT client (paho-mqtt) of its gateway's broker, for the replay.

MQTT 5 over TLS with the sensor's own certificate, a persistent session (client ID = the
sensor ID, no clean start): a reading published with QoS 1 and not yet acknowledged when the
broker goes away is sent again once it is back. :meth:`MqttSensor.send` has the line
connection's shape (lines in, one reply per line out): ``ok`` when the broker acknowledged the
reading, ``err <reason>`` when it refused it (e.g. ``Not authorized``: a topic the ACL does not
give this certificate).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from streamanon.net.mqtt_broker import sensor_topic
from streamanon.net.mqtt_intake import mqtt_client_context
from streamanon.net.pki import gateway_name, sensor_paths
from streamanon.net.tls import split_address


class MqttSensor:
    """One sensor node's MQTT client; ``topic`` defaults to the sensor's own.

    Args:
        pki: the deployment folder (the CA certificate and the sensors' certificates).
        address: the gateway's broker (``host:port``).
        gateway: the gateway's index (its broker's certificate names it).
        sensor_id: the sensor node's ID (its MQTT client ID).
        cert: the sensor's certificate (``None``: its file in ``pki``).
        key: the sensor's private key (``None``: its file in ``pki``).
        topic: the topic it publishes to (``None``: its own, ``streamanon/gw<i>/<id>``).
    """

    def __init__(self, pki: Path, address: str, gateway: int, sensor_id: str, *,
                 cert: Path | None = None, key: Path | None = None,
                 topic: str | None = None) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        if cert is None or key is None:
            cert, key = sensor_paths(pki, gateway, sensor_id)
        self.address, self.sensor_id = address, sensor_id
        self.topic = topic or sensor_topic(gateway, sensor_id)
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=sensor_id,
                                  protocol=mqtt.MQTTv5)
        self.client.tls_set_context(mqtt_client_context(pki / "ca.crt", cert, key,
                                                        gateway_name(gateway)))
        self.client.reconnect_delay_set(0.1, 1.0)
        self.client.max_queued_messages_set(0)
        self.props = Properties(PacketTypes.CONNECT)
        self.props.SessionExpiryInterval = 3600
        self.pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[str]]] = {}
        self.early: dict[int, str] = {}
        self.lock = threading.Lock()
        self.up = threading.Event()
        self.refusal: str | None = None
        self.started = False
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_publish = self._on_publish

    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        if rc.is_failure:
            self.refusal = str(rc)
        else:
            self.refusal = None
            self.up.set()

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, rc: Any,
                       props: Any) -> None:
        self.up.clear()

    def _on_publish(self, client: Any, userdata: Any, mid: int, rc: Any, props: Any) -> None:
        reply = "ok" if not rc.is_failure else f"err refused by the broker: {rc}"
        with self.lock:
            entry = self.pending.pop(mid, None)
            if entry is None:  # acknowledged before publish() returned its mid
                self.early[mid] = reply
                return
        self._resolve(entry, reply)

    @staticmethod
    def _resolve(entry: tuple[asyncio.AbstractEventLoop, asyncio.Future[str]],
                 reply: str) -> None:
        loop, fut = entry
        loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(reply))

    def connect(self) -> None:
        if not self.started:
            host, port = split_address(self.address)
            self.client.connect_async(host, port, keepalive=60, clean_start=False,
                                      properties=self.props)
            self.client.loop_start()
            self.started = True

    async def send(self, lines: list[str], timeout: float) -> list[str]:
        """Publish each line (QoS 1); one reply per line. Raises TimeoutError when the broker
        was not reached (the replay counts the readings undelivered)."""
        self.connect()
        if not self.up.is_set():
            ok = await asyncio.to_thread(self.up.wait, timeout)
            if not ok:
                raise TimeoutError(f"sensor {self.sensor_id}: no MQTT session with "
                                   f"{self.address} ({self.refusal or 'no answer'})")
        loop = asyncio.get_running_loop()
        futs = []
        for line in lines:
            fut: asyncio.Future[str] = loop.create_future()
            info = self.client.publish(self.topic, line.encode(), qos=1)
            with self.lock:
                early = self.early.pop(info.mid, None)
                if early is None:
                    self.pending[info.mid] = (loop, fut)
            if early is not None:
                fut.set_result(early)
            futs.append(fut)
        if not futs:
            return []
        # unacknowledged past the timeout: paho keeps it and sends it again after a
        # reconnect; the replay counts it undelivered (the gateway may still get it)
        done = await asyncio.wait_for(asyncio.gather(*futs), timeout)
        return list(done)

    def close(self) -> None:
        if self.started:
            self.client.disconnect()
            self.client.loop_stop()
            self.started = False
