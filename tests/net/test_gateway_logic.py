"""The gateway's pure parts, without sockets: the admission rule for ring messages (what keeps
a failure from ever double-counting), the minimum ring size, and the sensor intake rules
(identity from the certificate, one reading per sensor per cycle, no squatting)."""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import subprocess
import sys
import time

import numpy as np
import pytest

from streamanon.dezent.protocol import Gateway, ProtocolConfig, StructureSpec, encode_message
from streamanon.dezent.ring import Ring
from streamanon.net import framing
from streamanon.net.gateway import GatewayDaemon
from streamanon.net.intake import SensorIntake
from streamanon.net.session import RingMessage, SessionRing, Sessions, admit
from tests.net.conftest import gateway_daemon

N, SEED, CYCLE = 3, 4, 5
EXACT = StructureSpec("exact", 8, 1, 16, tuple(range(8)))


def make_daemon(tmp_path, gw_id: int) -> GatewayDaemon:
    return gateway_daemon(tmp_path, gw_id, gateways=N, ring_seed=SEED,
                          t0=time.time() - (CYCLE + 0.6) * 60.0, period=60.0)


def test_ring_messages_are_taken_once_from_the_predecessor_of_the_first_session(
        tmp_path, caplog):
    """The daemon with its real admission and core, fed real protocol messages."""
    ring = Ring(N, SEED, 96)
    ccc = ring.ccc(CYCLE)
    me = ring.successor(ccc, CYCLE)
    third = ring.successor(me, CYCLE)
    daemon = make_daemon(tmp_path, me)
    session = SessionRing(ring)
    session.set(CYCLE, ccc, tuple(range(N)))
    session.use(CYCLE)
    core = Gateway(ccc, daemon.pcfg, session, rng=np.random.default_rng(0))
    core.measure(CYCLE, [("a", 3), ("b", 3)])
    (send,), _ = core.start_cycle(CYCLE)
    assert send.to == me
    good = framing.decode_frame(framing.encode_ring(ccc, tuple(range(N)),
                                                    encode_message(send.msg))[4:])
    daemon.intake.buffer[CYCLE] = {"c": 3}

    async def drive() -> list[int]:
        frames = []
        for sender, frame in [
            (third, good),  # not from the predecessor
            (ccc, good),  # taken
            (ccc, good),  # a duplicate: dropped (would count gw's sensors twice)
            (ccc, framing.RingFrame(ccc, (ccc, me), good.message)),  # too small a session
            (ccc, framing.RingFrame(me, tuple(range(N)), good.message)),  # "me" never started it
            (ccc, framing.RingFrame(ccc, tuple(range(N)),  # a cycle long gone
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
    for needle in ("duplicate C0", "not the predecessor", "min_members 3",
                   "which it did not start", "outside the live window"):
        assert any(needle in r for r in reasons), (needle, reasons)
    # its own reading of the cycle (closed when the first message came) was taken once
    assert daemon.core.local_counts(CYCLE)[3] == 1
    daemon.outbox.close()


def _sessions(me: int, n: int = 5, min_members: int = 3) -> Sessions:
    cfg = ProtocolConfig(z=2, delta_t=0, structure=EXACT, sensors_total=10,
                         min_members=min_members)
    return Sessions(me, frozenset(range(n)), cfg, SessionRing(Ring(n, SEED, 96)))


def test_admission_is_a_pure_function_of_the_message_and_the_state():
    ring = Ring(5, SEED, 96)
    members = (0, 1, 2, 3, 4)
    ccc = ring.ccc(CYCLE)
    me = ring.successor(ccc, CYCLE)
    state = _sessions(me)
    msg = RingMessage(ccc, ccc, members, CYCLE, "C", 0)
    assert admit(msg, state, CYCLE) is None
    assert state.ring.sessions == {} and state.seen == set()  # admit changed nothing
    state.accept(msg)
    assert "duplicate C0" in admit(msg, state, CYCLE)
    third = next(g for g in members if g not in (ccc, me))
    other = RingMessage(ccc, ccc, tuple(sorted({ccc, me, third})), CYCLE, "P", 1)
    assert "conflicts with" in admit(other, state, CYCLE)
    assert "unknown gateways" in admit(RingMessage(ccc, ccc, (*members, 7), CYCLE + 1, "C", 0),
                                       state, CYCLE)
    assert "outside the live window" in admit(
        RingMessage(ccc, ccc, members, CYCLE + 2, "C", 0), state, CYCLE)
    small = tuple(sorted({ccc, me}))
    assert "min_members 3" in admit(RingMessage(ccc, ccc, small, CYCLE + 1, "C", 0), state,
                                    CYCLE)
    # with min_members = 2 the same pair is admitted
    assert admit(RingMessage(ccc, ccc, small, CYCLE + 1, "C", 0), _sessions(me, min_members=2),
                 CYCLE) is None


def test_a_coordinator_starts_only_with_min_members_reachable():
    state = _sessions(0)
    assert state.view_too_small({1}) is not None  # 2 gateways: the sum would hide nothing
    members, why = state.start(CYCLE, {1})
    assert members is None and "min_members 3" in why
    members, why = state.start(CYCLE, {1, 3})
    assert members == (0, 1, 3) and why is None and CYCLE in state.coordinated
    members, why = state.start(CYCLE, {1, 2, 3})
    assert members is None and "already coordinates" in why
    # the acting coordinator skips gateways that are down, in ring order
    order = state.ring.base.order(CYCLE + 1).tolist()
    pos = (CYCLE + 1) % 5
    other = _sessions(order[(pos + 3) % 5])
    assert other.acting_ccc(CYCLE + 1, set(range(5))) == order[pos]
    assert other.acting_ccc(CYCLE + 1, set(range(5)) - {order[pos]}) == order[(pos + 1) % 5]


def _intake(registry=frozenset({"m1", "m2"})) -> SensorIntake:
    return SensorIntake(registry=registry, domain=frozenset(range(100)), data_t0=0.0,
                        data_period=900.0, ahead=2)


def test_the_sensor_id_is_the_certificates_and_one_reading_per_cycle():
    intake = _intake()
    # the line may name the sensor, but only as itself
    assert intake.offer("m1", "900,m1,42", 1) == ("ok 1", "ok")
    reply, outcome = intake.offer("m2", "900,m1,42", 1)  # squatting m1 with m2's credential
    assert outcome == "foreign_id" and "certificate is 'm2'" in reply
    reply, outcome = intake.offer("m2", "900,zz-fake-1,42", 1)
    assert outcome == "foreign_id"
    assert intake.offer("m2", "900,42", 1) == ("ok 1", "ok")  # t,a: the certificate's ID
    assert intake.offer("m2", '{"t": 900, "a": 42}', 1)[1] == "duplicate"  # once per cycle
    assert intake.offer("m2", '{"t": 1800, "a": 42}', 1) == ("ok 2", "ok")
    assert intake.offer("m1", "900,m1,43", 1)[1] == "duplicate"
    readings, dropped = intake.close(1)
    assert readings == [("m1", 42), ("m2", 42)] and dropped == 0  # no fake ID got in
    assert intake.offer("m1", "900,41", 1)[1] == "late"
    assert intake.offer("m1", "9000,41", 1)[1] == "early"
    assert intake.offer("m1", "1800,4200", 1)[1] == "domain"
    assert intake.close(1) == (None, 0)


def test_a_sensor_under_its_older_name_is_the_same_sensor():
    # a site whose certificates and registry have the older names (gw0-sn1): a line naming
    # it in today's scheme (gw000-sn001) is its reading, kept under the registered name
    intake = _intake(frozenset({"gw0-sn1", "gw0-sn2"}))
    assert intake.offer("gw0-sn1", "900,gw000-sn001,42", 1) == ("ok 1", "ok")
    assert intake.offer("gw0-sn1", "1800,gw000-sn002,42", 1)[1] == "foreign_id"
    assert intake.offer(None, "1800,gw000-sn002,7", 1) == ("ok 2", "ok")  # plaintext
    assert intake.offer(None, "1800,gw000-sn003,7", 1)[1] == "not_registered"
    assert intake.buffer == {1: {"gw0-sn1": 42}, 2: {"gw0-sn2": 7}}


def test_squatting_cannot_refuse_a_real_reading():
    """Another sensor's credential naming m1 first: refused; the real m1 is then taken."""
    intake = _intake()
    assert intake.offer("m2", "900,m1,7", 1)[1] == "foreign_id"
    assert intake.offer("m2", '{"t": 900, "u": "m1", "a": 7}', 1)[1] == "foreign_id"
    assert intake.offer("m1", "900,m1,42", 1) == ("ok 1", "ok")
    assert intake.close(1)[0] == [("m1", 42)]


def test_plaintext_mode_trusts_the_line_but_only_registered_ids():
    intake = _intake()
    assert intake.offer(None, "900,m1,42", 1) == ("ok 1", "ok")
    assert intake.offer(None, "900,zz-fake-1,42", 1)[1] == "not_registered"
    assert intake.offer(None, "900,42", 1)[1] == "malformed"  # no ID at all
    anyone = _intake(registry=None)
    assert anyone.offer(None, "900,zz-fake-1,42", 1)[1] == "ok"  # why it is insecure


@pytest.mark.parametrize("line", ["", "1,2,3,4", '{"t": 1}', "nan,1", "inf,m1,1", "x,1",
                                  '{"t": 0, "a": 1.5}', '[1, 2]'])
def test_bad_sensor_lines_get_an_error_reply(line):
    reply, outcome = _intake().offer("m1", line, 1)
    assert reply.startswith("err") and outcome == "malformed", (line, reply)


def test_admission_follows_the_publication_order_and_the_mix_route():
    """A publication pass with a random start: each message only from the position that the
    order names (the CCC jumps to the start, the last turn jumps back); a mix batch never to
    the coordinator, an acknowledgement never back to the deliverer; two messages of one pass
    at the CCC (its turn, then the control) are not duplicates."""
    ring = Ring(5, SEED, 96)
    members = (0, 1, 2, 3, 4)
    ccc = ring.ccc(CYCLE)
    order = ring.from_ccc(CYCLE)
    start = 3

    def p(sender: int, me: int, turns: int) -> str | None:
        state = _sessions(me)
        if me == ccc:
            state.coordinated.add(CYCLE)
        return admit(RingMessage(sender, ccc, members, CYCLE, "P", 1, start, turns), state,
                     CYCLE)

    assert p(ccc, order[3], 0) is None  # the jump from the CCC to the start
    assert "not gw" in p(order[2], order[3], 0)  # ... not from the ring predecessor
    assert p(order[4], ccc, 2) is None  # the CCC's turn comes from its predecessor
    assert p(order[2], ccc, 5) is None  # the control comes from the last turn (position 2)
    assert "for position" in p(order[1], order[2], 5)
    state = _sessions(ccc)
    state.coordinated.add(CYCLE)
    turn = RingMessage(order[4], ccc, members, CYCLE, "P", 1, start, 2)
    state.accept(turn)
    control = RingMessage(order[2], ccc, members, CYCLE, "P", 1, start, 5)
    assert admit(control, state, CYCLE) is None
    assert "duplicate" in admit(turn, state, CYCLE)
    mix_to_ccc = RingMessage(order[4], ccc, members, CYCLE, "M", 0)
    assert "for the coordinator" in admit(mix_to_ccc, state, CYCLE)
    assert admit(RingMessage(ccc, ccc, members, CYCLE, "M", 0), _sessions(order[1]),
                 CYCLE) is None
    assert "for its deliverer" in admit(RingMessage(order[3], ccc, members, CYCLE, "K", 0),
                                        _sessions(order[4]), CYCLE)
    assert admit(RingMessage(order[4], ccc, members, CYCLE, "K", 0), state, CYCLE) is None


def test_the_outbox_keeps_mixed_tuples_until_their_batch_is_acknowledged(tmp_path):
    """Own tuples wait in mix_pending; a batch that carried them and was acknowledged forgets
    them; without an acknowledgement they are due again after 2, then 4, 8, ... cycles; the
    deliverer's batch waits in mix_out until the CE's ack."""
    from streamanon.dezent.protocol import PublishedTuple
    from streamanon.net.outbox import Outbox

    box = Outbox(tmp_path / "outbox.sqlite")
    pubs = [PublishedTuple(10, 9000.0, f"s{i}", i, f"s{i}", 0, bytes([i]) * 16)
            for i in range(3)]
    box.mix_add(pubs)
    box.mix_add(pubs[:1])  # added twice (a replayed message): kept once
    assert box.mix_pending_count() == 3
    assert box.mix_due(11) == []  # its own batch (cycle 10) has not had its chance yet
    box.mix_mark(10, [])  # the batch of cycle 10 carried them
    assert box.mix_due(11) == []
    due = box.mix_due(12)  # no acknowledgement two cycles later: due again
    assert sorted(p.uid for p in due) == sorted(p.uid for p in pubs)
    assert {(p.cycle, p.id, p.value) for p in due} == {(10, f"s{i}", i) for i in range(3)}
    box.mix_mark(12, [p.uid for p in due[:2]])  # carried again (2 fit), backoff: 4 cycles
    assert box.mix_acked(10) == 1  # a late ack of cycle 10 forgets what it carried last
    assert [p.uid for p in box.mix_due(15)] == []
    assert len(box.mix_due(16)) == 2
    assert box.mix_acked(12) == 2 and box.mix_pending_count() == 0
    box.mix_out_add(12, [b"a" * 4, b"b" * 4])
    box.close()
    box = Outbox(tmp_path / "outbox.sqlite")  # durable
    assert box.mix_out_pending() == [(12, (b"a" * 4, b"b" * 4))]
    box.mix_out_done(12)
    assert box.mix_out_pending() == []
    box.close()


def test_times_before_the_clock_and_far_ahead_are_refused_in_one_short_line():
    intake = _intake()
    reply, outcome = intake.offer("m1", "-900,40", 1)  # cycle -1 never opens
    assert outcome == "late" and "before the data clock's start" in reply
    assert "m1" not in intake.buffer.get(-1, {})
    for t in ("1e308", "1.7e308"):
        reply, outcome = intake.offer("m1", f"{t},40", 1)
        assert outcome == "early" and len(reply) < 80, reply
    assert intake.offer("m1", "0,40", 0) == ("ok 0", "ok")  # the clock's first instant


_TOUCH_TWICE = """
import resource, sys
from streamanon.net.gateway import keep_freed_memory
print(keep_freed_memory() if sys.argv[1] == "keep" else False)
def touch():
    b = bytearray(10 << 20)
    b[::4096] = b"\\1" * len(b[::4096])
    del b
touch()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
touch()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="a glibc malloc option")
def test_the_gateway_keeps_freed_memory_instead_of_faulting_it_in_again():
    # a fresh process each: glibc's default hands the freed 10 MB back to the system and
    # faults every page in again on the next message; the gateway's setting keeps them
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    runs = {}
    for mode in ("keep", "default"):
        out = subprocess.run([sys.executable, "-c", _TOUCH_TWICE, mode], env=env, check=True,
                             capture_output=True, text=True).stdout.split()
        runs[mode] = (out[0], int(out[1]))
    pages = (10 << 20) // 4096
    assert runs["keep"][0] == "True" and runs["keep"][1] < pages // 10
    assert runs["default"][0] == "False" and runs["default"][1] > pages // 2
