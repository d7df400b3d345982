"""A sensor node as a real MQTT client (paho-mqtt) of its gateway's broker, for the replay.

MQTT 5 over TLS with the sensor's own certificate, a persistent session (client ID = the
sensor ID, no clean start): a QoS 1 reading not yet acknowledged when the broker goes away is
sent again once it is back. :meth:`MqttSensor.send` has the line connection's shape (lines
in, one reply per line out): with receipts (the default) the gateway's reply, ``ok <cycle>``
or ``err <reason>``, published to the sensor's receipt topic once the reading is in the
gateway (a killed broker cannot lose a reading so acknowledged); without (a device that only
speaks QoS 1) ``ok`` once the broker acknowledged it; ``err refused by the broker: <reason>``
when the broker refused it (e.g. ``Not authorized``: a topic the ACL does not give it).

The clients run on the replay's event loop (paho's external-loop interface: the loop watches
each socket, a (re)connection's TLS handshake runs on a worker thread), not a ``select()``
thread each: hundreds of sensors need more than the 1,024 descriptors ``select()`` watches.
Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from streamanon.net.mqtt_broker import receipt_topic, sensor_topic
from streamanon.net.mqtt_intake import mqtt_client_context
from streamanon.net.pki import gateway_name, sensor_paths
from streamanon.net.tls import split_address

_DIALER: ThreadPoolExecutor | None = None


def _dialer() -> ThreadPoolExecutor:
    """The threads that dial (TCP connect, TLS handshake, CONNECT) for all the sensors."""
    global _DIALER
    if _DIALER is None:
        _DIALER = ThreadPoolExecutor(max_workers=32, thread_name_prefix="mqtt-dial")
    return _DIALER


# the sensors with a session, per event loop: one task keeps all their sessions alive
_LIVE: dict[asyncio.AbstractEventLoop, set[MqttSensor]] = {}
_TICKERS: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}


async def _tick(loop: asyncio.AbstractEventLoop) -> None:
    """paho's housekeeping (keepalive pings, retries) for every sensor on ``loop``, once a
    second: one task for a district's hundreds of sensors, not one timer each."""
    try:
        while _LIVE.get(loop):
            await asyncio.sleep(1.0)
            for sensor in list(_LIVE.get(loop, ())):
                sensor.client.loop_misc()
    finally:
        _LIVE.pop(loop, None)
        _TICKERS.pop(loop, None)


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
        receipts: wait for the gateway's reply on the receipt topic (``False``: the broker's
            acknowledgement is the reply, as for a device that only speaks QoS 1).
    """

    def __init__(self, pki: Path, address: str, gateway: int, sensor_id: str, *,
                 cert: Path | None = None, key: Path | None = None,
                 topic: str | None = None, receipts: bool = True) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        if cert is None or key is None:
            cert, key = sensor_paths(pki, gateway, sensor_id)
        self.address, self.sensor_id = address, sensor_id
        self.topic = topic or sensor_topic(gateway, sensor_id)
        self.receipts = receipts
        self.receipt_topic = receipt_topic(gateway, sensor_id)
        self.publish_props = Properties
        self.packet_publish = PacketTypes.PUBLISH
        self.seq = 0
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=sensor_id,
                                  protocol=mqtt.MQTTv5)
        self.client.tls_set_context(mqtt_client_context(pki / "ca.crt", cert, key,
                                                        gateway_name(gateway)))
        self.client.reconnect_delay_set(0.1, 1.0)
        self.client.max_queued_messages_set(0)
        self.props = Properties(PacketTypes.CONNECT)
        self.props.SessionExpiryInterval = 3600
        # correlation -> the reply's future; the message ID of each publication -> its
        # correlation; a broker's answer that came before publish() returned the message ID
        self.pending: dict[bytes, tuple[asyncio.AbstractEventLoop, asyncio.Future[str]]] = {}
        self.corr_of: dict[int, bytes] = {}
        self.early: dict[int, str] = {}
        self.lock = threading.Lock()
        self.up = threading.Event()
        self.lost = asyncio.Event()
        self.connected = asyncio.Event()  # self.up, on the loop
        self.refusal: str | None = None
        self.started = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[None] | None = None
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_publish = self._on_publish
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message
        self.client.on_socket_open = self._on_socket_open
        self.client.on_socket_close = self._on_socket_close
        self.client.on_socket_register_write = self._on_register_write
        self.client.on_socket_unregister_write = self._on_unregister_write

    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        if rc.is_failure:
            self.refusal = str(rc)
        elif self.receipts:  # up once the receipt topic is subscribed (again: the broker
            self.refusal = None  # may have lost the session)
            # QoS 1: a receipt published while this sensor reconnects waits in its session
            client.subscribe(self.receipt_topic, qos=1)
        else:
            self._ready()

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, codes: Any,
                      props: Any) -> None:
        self._ready()  # refused (another gateway's sensor): no receipt comes, sends time out

    def _ready(self) -> None:
        self.refusal = None
        self.up.set()
        self._soon(self.connected.set)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        corr = getattr(msg.properties, "CorrelationData", None)
        if msg.topic != self.receipt_topic or corr is None:
            return
        with self.lock:
            entry = self.pending.pop(bytes(corr), None)
        if entry is not None:  # None: a receipt of a reading delivered twice, answered
            self._resolve(entry, msg.payload.decode("utf-8", errors="replace"))

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, rc: Any,
                       props: Any) -> None:
        self.up.clear()
        self._soon(self.connected.clear)
        self._soon(self.lost.set)

    # paho's external loop: called on the loop or on the thread dialling; acted on on the loop
    def _soon(self, fn: Any, *args: Any) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn, *args)

    def _watch(self, sock: Any, write: bool) -> None:
        assert self.loop is not None
        if sock.fileno() < 0:
            return  # closed meanwhile
        if write:
            self.loop.add_writer(sock, self._write)
        else:
            self.loop.add_reader(sock, self._read)

    def _unwatch(self, sock: Any, write_only: bool) -> None:
        assert self.loop is not None
        with contextlib.suppress(ValueError, OSError):
            self.loop.remove_writer(sock)
            if not write_only:
                self.loop.remove_reader(sock)

    def _on_socket_open(self, client: Any, userdata: Any, sock: Any) -> None:
        self._soon(self._watch, sock, False)

    def _on_socket_close(self, client: Any, userdata: Any, sock: Any) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self._unwatch(sock, False)  # now: the descriptor may be reused at once

    def _on_register_write(self, client: Any, userdata: Any, sock: Any) -> None:
        self._soon(self._watch, sock, True)

    def _on_unregister_write(self, client: Any, userdata: Any, sock: Any) -> None:
        self._soon(self._unwatch, sock, True)

    def _read(self) -> None:
        self.client.loop_read()

    def _write(self) -> None:
        self.client.loop_write()

    async def _keep_connected(self) -> None:
        """Dial, dial again after a loss (the keepalive pings: :func:`_tick`)."""
        host, port = split_address(self.address)
        delay, first = 0.1, True
        while True:
            self.lost.clear()
            try:
                loop = asyncio.get_running_loop()
                if first:
                    first = False
                    await loop.run_in_executor(_dialer(), lambda: self.client.connect(
                        host, port, keepalive=60, clean_start=False, properties=self.props))
                else:
                    await loop.run_in_executor(_dialer(), self.client.reconnect)
            except OSError as exc:
                self.refusal = self.refusal or f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(delay)
                delay = min(1.0, 2 * delay)
                continue
            delay = 0.1
            _LIVE.setdefault(loop, set()).add(self)
            if loop not in _TICKERS:
                _TICKERS[loop] = loop.create_task(_tick(loop))
            await self.lost.wait()
            await asyncio.sleep(delay)

    def _on_publish(self, client: Any, userdata: Any, mid: int, rc: Any, props: Any) -> None:
        if not rc.is_failure and self.receipts:
            with self.lock:
                self.corr_of.pop(mid, None)
            return  # taken by the broker: the reply is the gateway's receipt
        reply = "ok" if not rc.is_failure else f"err refused by the broker: {rc}"
        with self.lock:
            corr = self.corr_of.pop(mid, None)
            if corr is None:  # acknowledged before publish() returned its mid
                self.early[mid] = reply
                return
            entry = self.pending.pop(corr, None)
        if entry is not None:
            self._resolve(entry, reply)

    @staticmethod
    def _resolve(entry: tuple[asyncio.AbstractEventLoop, asyncio.Future[str]],
                 reply: str) -> None:
        loop, fut = entry
        loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(reply))

    def connect(self) -> None:
        """Start the session (on the running event loop); it is kept up until :meth:`close`."""
        if not self.started:
            self.loop = asyncio.get_running_loop()
            self.task = self.loop.create_task(self._keep_connected())
            self.started = True

    async def send(self, lines: list[str], timeout: float) -> list[str]:
        """Publish each line (QoS 1); one reply per line. Raises TimeoutError when the broker
        was not reached (the replay counts the readings undelivered)."""
        self.connect()
        if not self.connected.is_set():
            try:
                await asyncio.wait_for(self.connected.wait(), timeout)
            except TimeoutError:
                raise TimeoutError(f"sensor {self.sensor_id}: no MQTT session with "
                                   f"{self.address} ({self.refusal or 'no answer'})") from None
        loop = asyncio.get_running_loop()
        futs, corrs = [], []
        for line in lines:
            fut: asyncio.Future[str] = loop.create_future()
            self.seq += 1
            corr = self.seq.to_bytes(8, "big")
            props = self.publish_props(self.packet_publish)
            if self.receipts:
                props.ResponseTopic = self.receipt_topic
                props.CorrelationData = corr
            with self.lock:
                self.pending[corr] = (loop, fut)
            info = self.client.publish(self.topic, line.encode(), qos=1, properties=props)
            # on the wire now, not once the loop runs the socket's writer: a district's
            # sensors publish in one burst, and the first reading would wait for the last
            self.client.loop_write()
            with self.lock:
                early = self.early.pop(info.mid, None)
                if early is None:
                    self.corr_of[info.mid] = corr
                else:
                    self.pending.pop(corr, None)
            if early is not None:
                fut.set_result(early)
            futs.append(fut)
            corrs.append(corr)
        if not futs:
            return []
        # no answer past the timeout: paho keeps an unacknowledged message and sends it
        # again after a reconnect; the replay counts it undelivered (the gateway may still
        # get it)
        try:
            done = await asyncio.wait_for(asyncio.gather(*futs), timeout)
        finally:
            with self.lock:
                for corr in corrs:
                    self.pending.pop(corr, None)
        return list(done)

    def close(self) -> None:
        if self.started:
            if self.task is not None:
                self.task.cancel()
            if self.loop is not None:
                _LIVE.get(self.loop, set()).discard(self)
            self.client.disconnect()
            with contextlib.suppress(Exception):
                self.client.loop_write()  # the DISCONNECT, then paho closes the socket
            self.started = False
