"""Frames (encoding, limits, malformed input), the per-cycle ring of the daemons with the
unchanged protocol core, and configuration errors."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamanon.dezent.protocol import Gateway, ProtocolConfig, StructureSpec, run_cycle
from streamanon.dezent.ring import Ring
from streamanon.dezent.rules import publishable
from streamanon.net import framing
from streamanon.net.config import ConfigError, load_gateway_config, toml_dump
from streamanon.net.session import SessionRing

tuples = st.builds(framing.WireTuple, st.integers(0, 2**63 - 1), st.integers(-2**62, 2**62),
                   st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
                   st.one_of(st.integers(-2**63, 2**63 - 1), st.text(max_size=20)))


INC = bytes(range(16))


@given(st.lists(tuples, max_size=20), st.binary(min_size=16, max_size=16))
def test_batches_round_trip(batch, incarnation):
    data = framing.encode_batch(incarnation, batch)
    assert framing.LEN.unpack(data[:4])[0] == len(data) - 4
    assert framing.decode_frame(data[4:]) == framing.Batch(incarnation, tuple(batch))


@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.text(max_size=30)), max_size=10))
def test_refusals_round_trip(items):
    data = framing.encode_refused(items)
    assert framing.decode_frame(data[4:]) == framing.Refused(tuple(items))


@given(st.integers(0, 99), st.sets(st.integers(0, 99), min_size=0, max_size=30),
       st.binary(max_size=64))
def test_ring_frames_round_trip_and_their_overhead(ccc, others, message):
    members = tuple(sorted(others | {ccc}))
    data = framing.encode_ring(ccc, members, message)
    assert framing.decode_frame(data[4:]) == framing.RingFrame(ccc, members, message)
    # the overhead over the structure: frame + session + the protocol message header
    collect_header = 9
    assert len(data) - len(message) + collect_header == framing.ring_overhead(
        len(members), collect=True)


def _reprefix(frame: bytes) -> bytes:
    """A frame whose body was cut or extended, with a length prefix that matches it."""
    return framing.LEN.pack(len(frame) - 4) + frame[4:]


def read(data: bytes, max_frame: int = 1000):
    async def go():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await framing.read_frame(reader, max_frame)

    return asyncio.run(go())


@pytest.mark.parametrize(("data", "reason"), [
    (framing.LEN.pack(1001) + b"B" * 1001, "oversized frame: 1,001 bytes > max 1,000"),
    (framing.LEN.pack(0), "empty frame"),
    (b"\x00\x00", "inside a length prefix"),
    (framing.LEN.pack(10) + b"Bxx", "inside a frame (3 of 10 bytes)"),
    (framing.LEN.pack(2) + b"Zz", "unknown frame kind b'Z'"),
    (framing.LEN.pack(3) + b"Hxx", "hello of 2 bytes"),
    (framing.encode_ring(5, (1, 2), b"x"), "does not hold its coordinator 5"),
    (framing.encode_ring(1, (1, 1), b"x"), "does not hold its coordinator 1 once"),
    (framing.LEN.pack(3) + b"R\x00\x01", "malformed b'R' frame"),
    (framing.LEN.pack(5) + b"B\x00\x00\x00\x00", "batch without an incarnation"),
    (_reprefix(framing.encode_batch(INC, [framing.WireTuple(1, 0, 0.0, "u", 1)])[:-2]),
     "malformed b'B' frame"),
    (_reprefix(framing.encode_batch(INC, [framing.WireTuple(1, 0, 0.0, "u", 1)]) + b"x"),
     "1 trailing bytes"),
    (_reprefix(framing.encode_batch(INC, [framing.WireTuple(1, 0, 0.0, "uvw", 1)])[:53]),
     "truncated batch"),
])
def test_bad_frames_are_refused_with_a_reason(data, reason):
    with pytest.raises(framing.FrameError, match=re.escape(reason)):
        read(data)


def test_clean_eof_between_frames_is_not_an_error():
    assert read(b"") is None


def test_the_core_runs_unchanged_on_a_cycle_ring_of_some_members():
    """Gateways 1 and 4 are down: the session ring of the others, with the unchanged core,
    publishes exactly what the rule allows on the members' sensors (in-process transport)."""
    z, n = 3, 5
    spec = StructureSpec("exact", 6, 1, 16, tuple(range(6)))
    cfg = ProtocolConfig(z=z, delta_t=0, structure=spec, sensors_total=20, p_pub=0.5)
    ring = SessionRing(Ring(n, seed=7, epoch_cycles=10))
    gws = [Gateway(g, cfg, ring, rng=np.random.default_rng(g)) for g in range(n)]
    members = (0, 2, 3)
    rng = np.random.default_rng(1)
    for cycle in range(6):
        ccc = members[cycle % 3]
        ring.set(cycle, ccc, members)
        ring.use(cycle)
        order = ring.members_in_order(cycle)
        assert order[0] == ccc and sorted(order) == list(members)
        # relative order of the members is the epoch's ring order
        base = [g for g in Ring(n, 7, 10).order(cycle).tolist() if g in members]
        assert order == base[base.index(ccc):] + base[: base.index(ccc)]
        readings = {g: [(f"g{g}s{i}", int(rng.integers(0, 3))) for i in range(4)]
                    for g in members}
        for g in members:
            gws[g].measure(cycle, readings[g])
        result = run_cycle(gws, cycle)
        assert result.ring_messages >= 2 * len(members)
        got = Counter(t.value for t in result.published)
        assert {t.gateway for t in result.published} <= set(members)
        values = Counter(v for g in members for _s, v in readings[g])
        want = {v: int(publishable(c, c, z)) for v, c in values.items()}
        assert got == Counter({v: c for v, c in want.items() if c})


def test_config_errors_name_the_problem(tmp_path):
    path = tmp_path / "gw.toml"
    base = {"gateway": {"id": 0, "listen": "127.0.0.1:1", "sensors": "127.0.0.1:2",
                        "state_dir": "s", "ca": "ca", "cert": "c", "key": "k",
                        "ce": "127.0.0.1:3"},
            "peers": {"gw0": "127.0.0.1:1", "gw2": "127.0.0.1:4"},
            "protocol": {"z": 3, "delta_t": 0.0, "structure": "exact", "domain": [1, 2]}}
    path.write_text(toml_dump(base))
    with pytest.raises(ConfigError, match=r"must name gw0..gw1"):
        load_gateway_config(path)
    base["peers"] = {"gw0": "127.0.0.1:1"}
    base["protocol"]["structure"] = "cbf"
    path.write_text(toml_dump(base))
    with pytest.raises(ConfigError, match="cbf_m"):
        load_gateway_config(path)
    path.write_text("[gateway\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_gateway_config(path)


@given(st.integers(-2**62, 2**62), st.integers(1, 64), st.integers(0, 20))
def test_mix_frames_round_trip(cycle, size, count):
    items = tuple(bytes([i % 256]) * size for i in range(count))
    data = framing.encode_mix(cycle, items)
    assert framing.decode_frame(data[4:]) == framing.MixFrame(cycle, items)
    if count:
        with pytest.raises(framing.FrameError, match="mix batch of"):
            framing.decode_frame(data[4:-1])
    with pytest.raises(ValueError, match="one size"):
        framing.encode_mix(cycle, (b"ab", b"c"))


def test_mix_config_needs_the_ce_key_and_frames_that_hold_a_batch(tmp_path):
    from streamanon.dezent.mix import MixKeys

    MixKeys.generate().save(tmp_path / "ce-mix.key", tmp_path / "ce-mix.pub")
    path = tmp_path / "gw.toml"
    doc = {"gateway": {"id": 0, "listen": "127.0.0.1:1", "sensors": "127.0.0.1:2",
                       "state_dir": "s", "ca": "ca", "cert": "c", "key": "k",
                       "ce": "127.0.0.1:3"},
           "sensors": {"insecure_plaintext_sensors": True},
           "peers": {"gw0": "127.0.0.1:1"},
           "protocol": {"z": 3, "delta_t": 0.0, "structure": "exact", "domain": [1, 2],
                        "publication": "mix", "sensors_total": 100}}
    path.write_text(toml_dump(doc))
    with pytest.raises(ConfigError, match="needs \\[gateway\\] ce_mix_key"):
        load_gateway_config(path)
    doc["gateway"]["ce_mix_key"] = "ce-mix.pub"
    path.write_text(toml_dump(doc))
    cfg = load_gateway_config(path)
    assert cfg.protocol_config().mix_key == (tmp_path / "ce-mix.pub").read_bytes()
    doc["protocol"]["sensors_total"] = 10_000
    path.write_text(toml_dump(doc))
    with pytest.raises(ConfigError, match="raise max_frame"):
        load_gateway_config(path)
    doc["protocol"].update(sensors_total=100, id_mode="gateway")
    path.write_text(toml_dump(doc))
    with pytest.raises(ConfigError, match="id_mode = 'gateway'"):
        load_gateway_config(path)
