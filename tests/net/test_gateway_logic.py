"""The gateway daemon's acceptance rules for ring messages (what keeps a failure from ever
double-counting), driven in-process with real protocol messages from a core coordinator."""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np
import pytest

from streamanon.dezent.protocol import Gateway, encode_message
from streamanon.dezent.ring import Ring
from streamanon.net import framing
from streamanon.net.config import load_gateway_config, toml_dump
from streamanon.net.gateway import GatewayDaemon, SessionRing
from streamanon.net.pki import init_pki

N, SEED, CYCLE = 3, 4, 5


def make_daemon(tmp_path, gw_id: int) -> GatewayDaemon:
    init_pki(tmp_path / "pki", N)
    path = tmp_path / f"gw{gw_id}.toml"
    path.write_text(toml_dump({
        "gateway": {"id": gw_id, "listen": "127.0.0.1:9", "sensors": "127.0.0.1:9",
                    "state_dir": f"state/gw{gw_id}", "ca": "pki/ca.crt",
                    "cert": f"pki/gw{gw_id}.crt", "key": f"pki/gw{gw_id}.key",
                    "ce": "127.0.0.1:9"},
        "peers": {f"gw{i}": f"127.0.0.1:{9 + i}" for i in range(N)},
        "protocol": {"z": 2, "delta_t": 0.0, "p_pub": 1.0, "structure": "exact",
                     "domain": list(range(8)), "sensors_total": 12, "ring_seed": SEED},
        "clock": {"t0": time.time() - (CYCLE + 0.6) * 60.0, "period": 60.0}}))
    return GatewayDaemon(load_gateway_config(path))


def test_ring_messages_are_taken_once_from_the_predecessor_of_the_first_session(
        tmp_path, caplog):
    ring = Ring(N, SEED, 96)
    order = ring.order(CYCLE).tolist()
    ccc = ring.ccc(CYCLE)
    me = ring.successor(ccc, CYCLE)
    third = ring.successor(me, CYCLE)
    daemon = make_daemon(tmp_path, me)
    # the coordinator: the unchanged core, alone with its readings
    session = SessionRing(ring)
    session.set(CYCLE, ccc, tuple(range(N)))
    session.use(CYCLE)
    core = Gateway(ccc, daemon.pcfg, session, rng=np.random.default_rng(0))
    core.measure(CYCLE, [("a", 3), ("b", 3)])
    (send,), _ = core.start_cycle(CYCLE)
    assert send.to == me
    good = framing.decode_frame(framing.encode_ring(ccc, tuple(range(N)),
                                                    encode_message(send.msg))[4:])
    daemon.buffer[CYCLE] = {"c": 3}

    async def drive() -> list[int]:
        frames = []
        for sender, frame in [
            (third, good),  # not from the predecessor
            (ccc, good),  # taken
            (ccc, good),  # a duplicate: dropped (would count gw's sensors twice)
            (ccc, framing.Ring(ccc, (ccc, me), good.message)),  # a conflicting session
            (ccc, framing.Ring(me, tuple(range(N)), good.message)),  # "me" never started it
            (ccc, framing.Ring(ccc, tuple(range(N)),  # a cycle long gone
                               encode_message(type(send.msg)(CYCLE - 3, send.msg.payload)))),
        ]:
            daemon.on_ring(sender, frame)
            frames.append(daemon._stat(CYCLE)["ring_frames"])
        for task in list(daemon.tasks):
            task.cancel()
        return frames

    with caplog.at_level(logging.WARNING, logger="streamanon.gateway"):
        frames = asyncio.run(drive())
    assert frames == [0, 1, 1, 1, 1, 1]  # only the good message went on to the successor
    reasons = [r.getMessage() for r in caplog.records if "dropped a ring message" in
               r.getMessage()]
    assert len(reasons) == 5
    for needle in ("duplicate C0", "not the predecessor", "conflicts with",
                   "which it did not start", "outside the live window"):
        assert any(needle in r for r in reasons), (needle, reasons)
    assert order.index(me) == (order.index(ccc) + 1) % N
    # its own reading of the cycle (closed when the first message came) was taken once
    assert daemon.core.local_counts(CYCLE)[3] == 1
    daemon.outbox.close()


@pytest.mark.parametrize("line", ["", "1,2", '{"t": 1}', "nan,u,1", "0,,1"])
def test_bad_sensor_lines_get_an_error_reply(tmp_path, line):
    daemon = make_daemon(tmp_path, 0)
    assert daemon.take_reading(line).startswith("err")
    daemon.outbox.close()
