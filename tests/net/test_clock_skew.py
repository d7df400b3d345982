"""Clock skew between gateways: the paper's clocks are precise to ~7 minutes on 15-minute
cycles. A gateway whose clock is a few minutes off stays in step (ring messages of the
sender's cycle are taken); one off by more than the margin (a cycle either side of its own)
refuses them with a log line that names the clock."""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np
import pytest

from streamanon.dezent.protocol import Gateway, StructureSpec, encode_message
from streamanon.dezent.ring import Ring
from streamanon.net import framing
from streamanon.net.gateway import GatewayDaemon
from streamanon.net.session import SessionRing
from tests.net.conftest import gateway_daemon

N, SEED, CYCLE, PERIOD = 3, 4, 5, 900.0
EXACT = StructureSpec("exact", 8, 1, 16, tuple(range(8)))


def skewed_daemon(tmp_path, gw_id: int, t0: float, skew: float) -> GatewayDaemon:
    """A gateway whose clock reads ``skew`` seconds more than the true time: the same as
    the shared t0 seen ``skew`` seconds earlier."""
    return gateway_daemon(tmp_path, gw_id, gateways=N, ring_seed=SEED, t0=t0 - skew,
                          period=PERIOD)


def deliver(tmp_path, *, phase: float, skew: float, caplog) -> tuple[int, list[str]]:
    """The coordinator of CYCLE (true clock, ``phase`` of the way through the cycle) sends
    its collection message to its successor, whose clock is ``skew`` seconds off."""
    t0 = time.time() - (CYCLE + phase) * PERIOD
    ring = Ring(N, SEED)
    ccc = ring.ccc(CYCLE)
    me = ring.successor(ccc, CYCLE)
    daemon = skewed_daemon(tmp_path, me, t0, skew)
    session = SessionRing(ring)
    session.set(CYCLE, ccc, tuple(range(N)))
    session.use(CYCLE)
    core = Gateway(ccc, daemon.pcfg, session, rng=np.random.default_rng(0))
    core.measure(CYCLE, [("a", 3), ("b", 3)])
    (send,), _ = core.start_cycle(CYCLE)
    frame = framing.decode_frame(framing.encode_ring(ccc, tuple(range(N)),
                                                     encode_message(send.msg))[4:])
    daemon.intake.buffer[CYCLE] = {"c": 3}

    async def drive() -> int:
        daemon.on_ring(ccc, frame)
        for task in list(daemon.tasks):
            task.cancel()
        return daemon._stat(CYCLE)["ring_frames"]

    with caplog.at_level(logging.WARNING, logger="streamanon.gateway"):
        forwarded = asyncio.run(drive())
    daemon.outbox.close()
    return forwarded, [r.getMessage() for r in caplog.records
                       if "dropped a ring message" in r.getMessage()]


@pytest.mark.parametrize(("phase", "skew"), [
    (0.9, 180.0),  # 3 minutes ahead: its own clock is already in the next cycle
    (0.1, -180.0),  # 3 minutes behind: still in the previous cycle
    (0.5, 420.0),  # the paper's 7-minute precision
    (0.5, -420.0),
])
def test_a_gateway_minutes_off_stays_in_step(tmp_path, caplog, phase, skew):
    forwarded, dropped = deliver(tmp_path, phase=phase, skew=skew, caplog=caplog)
    assert dropped == []
    assert forwarded == 1  # taken, its counts added, passed on to its successor


@pytest.mark.parametrize("skew", [2 * PERIOD, -2 * PERIOD])
def test_beyond_the_margin_the_message_is_refused_with_a_clear_log_line(tmp_path, caplog,
                                                                          skew):
    forwarded, dropped = deliver(tmp_path, phase=0.5, skew=skew, caplog=caplog)
    assert forwarded == 0
    (line,) = dropped
    assert f"cycle {CYCLE}" in line and "outside the live window" in line
    assert "clock" in line and "off by more than the margin" in line
