"""Prometheus metrics of the daemons (library ``prometheus-client``), and reading them back.

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import MetricsHandler
from prometheus_client.parser import text_string_to_metric_families

from streamanon.net.pki import ROLE_MONITOR
from streamanon.net.tls import Revocations, check_peer, server_context, split_address

log = logging.getLogger(__name__)

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class GatewayMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.cycles_completed = Counter("dezent_cycles_completed",
                                        "Cycles whose rounds this gateway completed as "
                                        "coordinator", registry=r)
        self.cycles_skipped = Counter("dezent_cycles_skipped", "Cycles this gateway saw run "
                                      "nothing, by reason", ["reason"], registry=r)
        self.ring_size = Gauge("dezent_ring_size", "Members of the last session this gateway "
                               "took part in", registry=r)
        self.peers_up = Gauge("dezent_peers_up", "Peers this gateway holds a live link to",
                              registry=r)
        self.readings = Counter("dezent_readings", "Sensor readings by outcome (ok or why "
                                "refused)", ["outcome"], registry=r)
        self.published = Counter("dezent_tuples_published", "Tuples this gateway published "
                                 "(into its outbox)", registry=r)
        self.outbox_depth = Gauge("dezent_outbox_depth", "Tuples waiting for the CE's ack",
                                  registry=r)
        self.refused = Counter("dezent_tuples_refused", "Tuples the CE refused (set aside)",
                               registry=r)
        self.ce_commit = Histogram("dezent_ce_commit_seconds", "Batch sent to the CE until "
                                   "its ack (after the commit)", buckets=_LATENCY_BUCKETS,
                                   registry=r)
        self.last_cycle = Gauge("dezent_last_cycle", "The last cycle this gateway closed",
                                registry=r)
        self.mix_pending = Gauge("dezent_mix_pending", "Own tuples waiting for the "
                                 "acknowledgement of a mix batch", registry=r)


class CEMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.batches = Counter("dezent_ce_batches", "Batches by outcome", ["outcome"],
                               registry=r)
        self.stored = Counter("dezent_ce_tuples_stored", "New tuples committed", registry=r)
        self.refused = Counter("dezent_ce_tuples_refused", "Tuples refused as invalid",
                               registry=r)
        self.connections_refused = Counter("dezent_ce_connections_refused", "Connections "
                                           "refused (not a gateway, revoked)", registry=r)
        self.commit = Histogram("dezent_ce_commit_seconds", "Store commit of one batch",
                                buckets=_LATENCY_BUCKETS, registry=r)
        self.rows = Gauge("dezent_ce_rows", "Tuples the store holds", registry=r)
        self.mix_dummies = Counter("dezent_ce_mix_dummies", "Dummy items dropped from mix "
                                   "batches", registry=r)


class ReleaseRiskMetrics:
    """The re-identification risk of a released stream (:mod:`streamanon.risk`) as gauges:
    :meth:`update` sets them from a window's figures (the whole release's, or the last
    window's); :meth:`write` writes them in Prometheus' text format (a textfile collector's
    file, for runs without a metrics port)."""

    FIGURES = ("prosecutor", "prosecutor_avg", "journalist", "marketer", "sample_uniques",
               "smallest_class", "classes", "rows")

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.gauges = {name: Gauge(f"streamanon_release_{name}",
                                   f"Re-identification risk of the released rows: {name}",
                                   registry=r) for name in self.FIGURES}

    def update(self, figures: Any) -> None:
        """Set every gauge from a :class:`~streamanon.risk.WindowRisk` (or its dict)."""
        values = figures if isinstance(figures, dict) else figures.to_dict()
        for name, gauge in self.gauges.items():
            gauge.set(float(values[name]))

    def write(self, path: str | Path) -> None:
        """The gauges in Prometheus' text exposition format, written to ``path`` (replaced
        atomically)."""
        from prometheus_client import write_to_textfile

        write_to_textfile(str(path), self.registry)


class CastleRunMetrics:
    """A CASTLE run's live figures, read from the operator at each scrape (nothing is
    updated on the hot path): tuples read, released, suppressed (by reason), held, clusters
    released, the anchors of static attributes kept and forgotten, and the release's
    re-identification risk (``streamanon_release_*``, the gauges of
    :class:`ReleaseRiskMetrics`) from the operator's
    :class:`~streamanon.risk.RunningRisk`. ``live`` gives the operator in use (a Kafka run
    replaces it with the checkpoint's on a restart)."""

    def __init__(self, live: Callable[[], Any]) -> None:
        self.live = live
        self.registry = CollectorRegistry()
        self._last: list[Any] = []
        self.registry.register(self)

    def describe(self) -> list[Any]:
        return []  # the families depend on the run (no static attributes: no anchors)

    def collect(self) -> list[Any]:
        """The families as the operator stands now; a scrape racing the run's thread (a
        dict changing size under it) is tried again, and after five tries the previous
        scrape's families are served (logged)."""
        for _ in range(5):
            try:
                self._last = self._families()
                return self._last
            except RuntimeError as exc:  # "dictionary changed size during iteration"
                why = exc
        log.warning("metrics: the run changed under five scrapes in a row (%s); serving "
                    "the previous figures", why)
        return self._last

    def _families(self) -> list[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        op = self.live()
        if op is None:
            return []
        out: list[Any] = []
        for name, help_text, value in (
                ("streamanon_castle_read", "Tuples read by the operator", op.read),
                ("streamanon_castle_released", "Tuples released", op.released),
                ("streamanon_castle_clusters_released", "Classes released",
                 op.clusters_released)):
            out.append(CounterMetricFamily(name, help_text, value=value))
        sup = CounterMetricFamily("streamanon_castle_suppressed", "Tuples suppressed, by "
                                  "reason", labels=["reason"])
        for reason, n in dict(op.suppressed_by_reason).items():
            sup.add_metric([reason], n)
        out.append(sup)
        out.append(GaugeMetricFamily("streamanon_castle_held", "Tuples held in open clusters",
                                     value=op.held))
        anchors = getattr(op, "_anchors", None)
        if anchors is not None and (anchors.bounded or len(anchors)):
            out.append(GaugeMetricFamily("streamanon_castle_anchors_kept", "Anchors of "
                                         "static attributes kept", value=len(anchors)))
            out.append(CounterMetricFamily("streamanon_castle_anchors_forgotten", "Anchors "
                                           "forgotten (--static-ttl, --static-max)",
                                           value=anchors.forgotten))
        risk = getattr(op, "release_risk", None)
        if risk is not None:
            figures = risk.figures().to_dict()
            for name in ReleaseRiskMetrics.FIGURES:
                out.append(GaugeMetricFamily(
                    f"streamanon_release_{name}",
                    f"Re-identification risk of the released rows: {name}",
                    value=float(figures[name])))
        return out


def serve_plain(registry: CollectorRegistry, host: str, port: int) -> Any:
    """Serve ``registry`` over plain HTTP on ``host:port`` (``port`` 0: a free one; read it
    back from ``server.server_address``) in a daemon thread; returns the server
    (``shutdown()``, ``server_close()``). For runs without a site's PKI: bind a loopback
    address, or one only the monitoring network reaches."""
    handler = MetricsHandler.factory(registry)

    class Quiet(handler):  # type: ignore[misc,valid-type]
        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = Server((host, port), Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


_FRIENDLY = {"PEER_DID_NOT_RETURN_A_CERTIFICATE": "no client certificate",
             "HTTP_REQUEST": "plain HTTP on the TLS port",
             "WRONG_VERSION_NUMBER": "not TLS", "UNSUPPORTED_PROTOCOL": "TLS version too old",
             "CERTIFICATE_VERIFY_FAILED": "client certificate not of this site's CA",
             "TLSV1_ALERT_UNKNOWN_CA": "the client does not trust this site's CA"}


def refusal_reason(exc: BaseException | None) -> str:
    """A short reason for a connection that failed before it was served (no traceback)."""
    if isinstance(exc, ssl.SSLError):
        code = str(getattr(exc, "reason", None) or "")
        return _FRIENDLY.get(code, code.lower().replace("_", " ") or "TLS error")
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(exc, ConnectionError):
        return "closed by the client"
    text = f"{type(exc).__name__}: {exc}" if exc is not None else "unknown"
    return text if len(text) <= 120 else text[:117] + "..."


def _peer(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host = str(address[0])
        return f"[{host}]:{address[1]}" if ":" in host else f"{host}:{address[1]}"
    return str(address)


class RefusalLog:
    """Refused connections as short log lines, at most ``burst`` per ``interval`` seconds;
    the rest are counted (by reason) and reported in one line when the interval is over (at
    the next refusal or :meth:`flush`). A flood of N connections thus writes at most
    ``burst + 1`` lines per interval, each a peer address and a reason, whatever N."""

    MAX_REASONS = 8  # distinct reasons counted per interval (the rest as "other")

    def __init__(self, logger: logging.Logger, *, burst: int = 5, interval: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger, self.burst, self.interval, self.clock = logger, burst, interval, clock
        self._lock = threading.Lock()
        self._start = clock()
        self._shown = 0
        self._held: dict[str, int] = {}
        self.total = 0  #: refusals since the start (shown or not)

    def refused(self, peer: Any, reason: str) -> None:
        with self._lock:
            now = self.clock()
            if now - self._start >= self.interval:
                self._report()
                self._start, self._shown = now, 0
            self.total += 1
            if self._shown < self.burst:
                self._shown += 1
                self.logger.warning("metrics: refused %s: %s", _peer(peer), reason)
                return
            key = reason if reason in self._held or len(self._held) < self.MAX_REASONS \
                else "other"
            self._held[key] = self._held.get(key, 0) + 1

    def _report(self) -> None:
        if self._held:
            n = sum(self._held.values())
            why = ", ".join(f"{r} x{c}" for r, c in sorted(self._held.items()))
            self.logger.warning("metrics: %d more connection(s) refused in %.0f s, not logged "
                                "one by one (%s)", n, self.interval, why)
            self._held = {}

    def flush(self) -> None:
        """Report what is held now (the server does at close)."""
        with self._lock:
            self._report()


class _MetricsServer(ThreadingHTTPServer):
    """HTTP over mutual TLS; the handshake runs in the request's thread (a slow or silent
    client cannot stall the accepting loop). A connection refused in the handshake or by
    its certificate's role is a :class:`RefusalLog` line, never a traceback."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type, ctx: ssl.SSLContext,
                 refusals: RefusalLog | None = None) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.ctx = ctx
        self.refusals = refusals or RefusalLog(log)
        super().__init__(address, handler)

    def server_close(self) -> None:
        super().server_close()
        self.refusals.flush()

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = self.socket.accept()
        sock.settimeout(5.0)
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.refusals.refused(client_address, refusal_reason(sys.exc_info()[1]))


def serve(registry: CollectorRegistry, address: str, *, ca: Path, cert: Path, key: Path,
          revocations: Revocations, refusals: RefusalLog | None = None) -> Any:
    """Serve ``registry`` on ``address`` (mutual TLS, role ``monitor`` only, CRL checked at
    every request); returns the server (``shutdown()``, ``server_close()``). Refused
    connections are logged through ``refusals`` (default: at most 5 lines a minute, the rest
    counted in one line).

    Args:
        registry: the metrics served.
        address: where to listen (``host:port``).
        ca: the CA certificate the clients' certificates must chain to.
        cert: the daemon's certificate.
        key: the daemon's private key.
        revocations: the revoked certificates (checked at every request).
        refusals: where refused connections are logged (``None``: the default rate-limited log).
    """
    base = MetricsHandler.factory(registry)

    class Handler(base):  # type: ignore[misc,valid-type]
        def setup(self) -> None:
            self.request.do_handshake()
            super().setup()

        def do_GET(self) -> None:
            _, why = check_peer(self.connection, revocations, (ROLE_MONITOR,))
            if why is not None:
                self.server.refusals.refused(self.client_address, why)
                self.send_error(403, "a monitor certificate of this site is required")
                return
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = _MetricsServer(split_address(address), Handler, server_context(ca, cert, key),
                            refusals)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def scrape(address: str, server_name: str, *, ca: Path, cert: Path, key: Path,
           timeout: float = 2.0) -> dict[str, float]:
    """One daemon's metrics as ``{"name{label=value}": value}`` (counters without
    ``_total``; histograms as ``_sum``/``_count``). The daemon must present the certificate
    of ``server_name`` (``gw3``, ``ce``). Raises OSError when unreachable.

    Args:
        address: the daemon's metrics address (``host:port``).
        server_name: the name on the daemon's certificate (``gw3``, ``ce``).
        ca: the CA certificate.
        cert: the monitor certificate.
        key: the monitor certificate's private key.
        timeout: seconds to wait for the connection and each read.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(str(cert), str(key))
    host, port = split_address(address)
    with socket.create_connection((host, port), timeout=timeout) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname=server_name) as conn:
                conn.sendall(f"GET /metrics HTTP/1.0\r\nHost: {server_name}\r\n\r\n".encode())
                chunks = []
                while chunk := conn.recv(65536):
                    chunks.append(chunk)
        except (ssl.SSLEOFError, ConnectionResetError) as exc:
            # In TLS 1.3 the daemon checks our certificate after our side of the handshake
            # is done: its refusal arrives as an alert or, racing our request, as a bare close.
            raise OSError(f"{address}: the daemon closed the TLS session without an answer "
                          f"({exc}); most likely it refused this client certificate (a monitor "
                          "certificate of this site is required)") from exc
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    if " 200 " not in status + " ":
        raise OSError(f"{address}: {status}")
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            name = s.name.removesuffix("_total")
            if s.labels:
                name += "{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}"
            out[name] = float(s.value)
    return out
