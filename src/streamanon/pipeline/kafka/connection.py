"""What every Kafka client of a run shares: its settings and one watch on broker outages.

:func:`client_config` builds the librdkafka settings of a client (the user's ``extra`` TLS or
SASL settings win), :func:`quiet_logs` routes librdkafka's own log lines to a silent logger,
and :class:`BrokerWatch` says on stderr, in a few lines, when the broker stops answering and
when it is back.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from streamanon.errors import StoppedInOutage

#: seconds a stop signal waits for a broker that does not answer before the run gives up
STOP_GRACE = 2.0
#: seconds between checks that the broker still holds the run's topics, during an outage
CHECK_EVERY = 5.0


class BrokerWatch:
    """Says on stderr, in a few readable lines, when the broker stops answering and when it is
    back; librdkafka meanwhile reconnects by itself with exponential backoff.

    An outage is seen from the pipeline's side: a client *stalls* (:meth:`stalled`: a flush
    that does not complete, a read that gets nothing while messages are due) for a second;
    the last connection error librdkafka reported (:meth:`error`, the clients' ``error_cb``)
    says why. One line when the outage starts, reminders at doubling intervals, one line when
    a client succeeds again (:meth:`alive`). One watch serves every client of a run.
    """

    def __init__(self, what: str, stream: Any = None, stop: Any = None) -> None:
        self.what = what
        self.stream = stream
        #: the run's stop flag: once set, a stall longer than :data:`STOP_GRACE` ends the run
        self.stop = stop
        #: called every :data:`CHECK_EVERY` seconds of an outage (raises to end the run, e.g.
        #: when the broker answers but no longer has the run's input topic)
        self.check: Callable[[], None] | None = None
        self._stop_seen: float | None = None
        self._next_check = 0.0
        self.last_error: tuple[float, str] | None = None
        self.stalled_since: float | None = None
        self.reported = False
        self.next_note = 0.0
        self.outages = 0
        self.fatal: str | None = None

    def _say(self, text: str) -> None:
        print(f"streamanon {self.what}: {text}", file=self.stream or sys.stderr, flush=True)

    def error(self, err: Any) -> None:
        """The ``error_cb`` of a client: remember the last connection error."""
        from confluent_kafka import KafkaError

        if err.fatal():
            self.fatal = err.str()
            self._say(f"fatal client error: {err.str()}")
            return
        if err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT,
                          KafkaError._RESOLVE):
            self.last_error = (time.monotonic(), err.str())

    def stalled(self, doing: str) -> None:
        """A client waited without progress (call it about once a second while it waits)."""
        now = time.monotonic()
        if self.stop is not None and self.stop:
            if self._stop_seen is None:
                self._stop_seen = now
            elif now - self._stop_seen >= STOP_GRACE:
                why = self.last_error[1] if self.last_error is not None else "no answer"
                raise StoppedInOutage(
                    f"stopped while {doing}: the broker did not answer ({why}); no checkpoint "
                    "was written, the next run resumes from the last one",
                    int(self.stop.signal or 15))
        if self.stalled_since is None:
            self.stalled_since = now
            self._next_check = now + CHECK_EVERY
            return
        if self.check is not None and now >= self._next_check:
            self._next_check = now + CHECK_EVERY
            self.check()
        waited = now - self.stalled_since
        if not self.reported and waited >= 1.0:
            why = "no answer"
            if self.last_error is not None and now - self.last_error[0] < 30:
                why = self.last_error[1]
            self._say(f"broker unreachable ({why}) while {doing}; retrying with backoff")
            self.reported = True
            self.outages += 1
            self.next_note = now + 4.0
        elif self.reported and now >= self.next_note:
            self._say(f"broker still unreachable after {waited:.0f} s; retrying")
            self.next_note = now + max(4.0, waited)

    def idle(self, doing: str) -> None:
        """A read got nothing, which may be normal (a live topic with no new messages): an
        outage only when librdkafka reported a connection error just now."""
        if self.last_error is not None and time.monotonic() - self.last_error[0] < 3:
            self.stalled(doing)

    def alive(self) -> None:
        """Call after a successful exchange with the broker."""
        if self.reported and self.stalled_since is not None:
            self._say(f"broker back after {time.monotonic() - self.stalled_since:.1f} s; "
                      "resuming")
        self.stalled_since = None
        self.reported = False


def quiet_logs() -> dict[str, Any]:
    """librdkafka settings that route its own log lines to a silent Python logger.

    Connection failures are reported once, readably, by the endpoints (see
    :class:`BrokerWatch`); librdkafka's raw lines would repeat them.
    """
    import logging

    logger = logging.getLogger("streamanon.librdkafka")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return {"logger": logger}


def client_config(bootstrap: str, watch: BrokerWatch | None = None,
                  extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings every client of a pipeline shares; ``extra`` (TLS, SASL...) wins."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 5000,
        "topic.metadata.refresh.interval.ms": 10_000,
        **quiet_logs(),
    }
    if watch is not None:
        conf["error_cb"] = watch.error
    conf.update(extra or {})
    return conf


__all__ = ["BrokerWatch", "client_config", "quiet_logs"]
