"""The sans-I/O gateway core: ring, rotation, rounds, id masking, errors, checkpoints."""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamanon.dezent.collusion import collusion_table, p_attack, p_attack_monte_carlo
from streamanon.dezent.protocol import (
    Collect,
    Gateway,
    ProtocolConfig,
    Publish,
    StructureSpec,
    run_cycle,
)
from streamanon.dezent.pseudonyms import Pseudonymizer
from streamanon.dezent.ring import Ring
from streamanon.dezent.rules import publishable

EXACT = StructureSpec("exact", 6, 1, 16, tuple(range(6)))


def make_ring(n_gw: int, config: ProtocolConfig, seed: int = 3) -> list[Gateway]:
    ring = Ring(n_gw, seed=seed, epoch_cycles=4)
    return [Gateway(g, config, ring, rng=np.random.default_rng(g)) for g in range(n_gw)]


def feed(gws: list[Gateway], cycle: int, readings: dict[int, list[tuple[str, int]]]) -> None:
    for g, gw in enumerate(gws):
        gw.measure(cycle, readings.get(g, []))


@given(st.integers(1, 12), st.integers(0, 10**6), st.integers(1, 10))
def test_ring_is_a_permutation_and_the_ccc_rotates(n, seed, epoch):
    ring = Ring(n, seed, epoch)
    for c in range(0, 3 * epoch, max(1, epoch // 2)):
        order = ring.order(c)
        assert sorted(order.tolist()) == list(range(n))
        if ring.epoch(c + 1) == ring.epoch(c):
            assert ring.ccc(c + 1) == ring.successor(ring.ccc(c), c)
        dist = ring.distance_from_ccc(c)
        assert dist[ring.ccc(c)] == 0
        assert sorted(dist.tolist()) == list(range(n))


def test_ring_redrawn_when_asked_changes_between_draws_and_is_reproducible():
    a, b = Ring(30, seed=5, redraw=96), Ring(30, seed=5, redraw=96)
    assert np.array_equal(a.order(0), b.order(95))
    assert not np.array_equal(a.order(0), a.order(96))
    assert np.array_equal(a.order(96), b.order(191))
    assert a.draws(0, 96) == 1 and a.draws(95, 2) == 2 and a.draws(0, 30 * 96) == 30


def test_ring_is_fixed_at_setup_by_default_while_pseudonym_epochs_advance():
    ring = Ring(30, seed=5, epoch_cycles=96)
    assert all(np.array_equal(ring.order(0), ring.order(c)) for c in (1, 96, 10_000))
    assert ring.draws(0, 365 * 96) == 1
    assert ring.epoch(96) == 1  # pseudonyms still rotate per epoch


def test_one_cycle_by_hand_paper_rule():
    cfg = ProtocolConfig(z=3, delta_t=0, structure=EXACT, sensors_total=6, p_pub=1.0)
    gws = make_ring(3, cfg)
    # value 2: four sensors (publish 4 - (3 - 1) = 2 of them); value 5: two sensors (none)
    feed(gws, 0, {0: [("a", 2), ("b", 2)], 1: [("c", 2), ("d", 5)], 2: [("e", 2), ("f", 5)]})
    res = run_cycle(gws, 0)
    assert Counter(t.value for t in res.published) == {2: 2}
    assert res.ring_messages == 3 + 3  # collection round + one publication pass
    assert res.passes == 1
    assert res.ring_bytes == 6 * EXACT.nbytes


def test_window_rule_publishes_every_record_of_a_value_reaching_z():
    cfg = ProtocolConfig(z=3, delta_t=0, structure=EXACT, sensors_total=6, rule="window")
    gws = make_ring(3, cfg)
    feed(gws, 0, {0: [("a", 2), ("b", 2)], 1: [("c", 2), ("d", 5)], 2: [("e", 2), ("f", 5)]})
    assert Counter(t.value for t in run_cycle(gws, 0).published) == {2: 4}


def test_counts_are_distinct_sensors_within_delta_t():
    cfg = ProtocolConfig(z=2, delta_t=900, structure=EXACT, sensors_total=3, rule="window",
                         min_members=1)
    gws = make_ring(1, cfg)
    gw = gws[0]
    gw.measure(0, [("a", 1), ("b", 3)])
    run_cycle(gws, 0)
    gw.measure(1, [("a", 1), ("b", 1)])
    assert gw.local_counts(1) == Counter({1: 2, 3: 1})  # a twice: counted once
    run_cycle(gws, 1)
    gw.measure(2, [("a", 4), ("b", 4)])
    assert gw.local_counts(2) == Counter({1: 2, 4: 2})  # cycle 0 expired (2*900 > Δt)


def test_coin_failures_trigger_a_second_pass_that_publishes_the_rest():
    cfg = ProtocolConfig(z=1, delta_t=0, structure=EXACT, sensors_total=4, p_pub=0.5, min_members=1)
    gws = make_ring(2, cfg)
    for g, gw in enumerate(gws):
        gw.measure(0, [(f"s{g}a", 1), (f"s{g}b", 1)], coins=[0.9, 0.1])
    res = run_cycle(gws, 0)
    assert len(res.published) == 4  # z = 1: everything, whatever the coins
    assert res.passes == 2 and res.ring_messages == 2 * 3


def test_single_gateway_ring_sends_nothing():
    cfg = ProtocolConfig(z=2, delta_t=0, structure=EXACT, sensors_total=3, min_members=1)
    gws = make_ring(1, cfg)
    gws[0].measure(0, [("a", 1), ("b", 1), ("c", 2)])
    res = run_cycle(gws, 0)
    assert res.ring_messages == 0 and len(res.published) == 1


@pytest.mark.parametrize("mode", ["gateway", "pseudonym"])
def test_id_masking(mode):
    cfg = ProtocolConfig(z=1, delta_t=0, structure=EXACT, sensors_total=2, id_mode=mode,
                         min_members=1)
    gws = make_ring(2, cfg)
    feed(gws, 0, {0: [("a", 1)], 1: [("b", 1)]})
    ids = {t.sensor: t.id for t in run_cycle(gws, 0).published}
    assert set(ids) == {"a", "b"}
    if mode == "gateway":
        assert ids == {"a": "gw0", "b": "gw1"}
    else:
        assert "a" not in ids.values() and len(set(ids.values())) == 2


def test_pseudonyms_rotate_per_epoch_and_depend_on_the_key():
    p, q = Pseudonymizer(b"1" * 32), Pseudonymizer(b"2" * 32)
    assert p.pseudonym("m1", 3) == p.pseudonym("m1", 3) != p.pseudonym("m1", 4)
    assert p.pseudonym("m1", 3) != q.pseudonym("m1", 3)
    with pytest.raises(ValueError):
        Pseudonymizer(b"short")


def test_bad_inputs_are_refused_with_a_reason():
    cfg = ProtocolConfig(z=2, delta_t=0, structure=EXACT, sensors_total=4, min_members=1)
    gws = make_ring(2, cfg)
    with pytest.raises(ValueError, match="reported twice"):
        gws[0].measure(0, [("a", 1), ("a", 2)])
    gws[0].measure(1, [("a", 1)])
    with pytest.raises(ValueError, match="cycle 0 after 1"):
        gws[0].measure(0, [("a", 1)])
    not_ccc = gws[1 - gws[0].ring.ccc(1)]
    with pytest.raises(ValueError, match="not the CCC"):
        not_ccc.start_cycle(1)
    with pytest.raises(ValueError, match="no readings for cycle 7"):
        gws[gws[0].ring.ccc(7)].start_cycle(7)
    with pytest.raises(OverflowError, match="counter bits"):
        ProtocolConfig(z=2, delta_t=0, structure=StructureSpec("cbf", 10, 4, 4), sensors_total=9)
    with pytest.raises(ValueError, match="p_pub"):
        ProtocolConfig(z=2, delta_t=0, structure=EXACT, sensors_total=4, p_pub=0)


def test_gateways_survive_pickling_between_cycles():
    cfg = ProtocolConfig(z=2, delta_t=1800, structure=EXACT, sensors_total=6, p_pub=0.5)
    rng = np.random.default_rng(0)
    readings = [{g: [(f"s{g}{j}", int(rng.integers(0, 6))) for j in range(2)] for g in range(3)}
                for _ in range(6)]
    coins = rng.random((6, 3, 2))

    def run(checkpoint_at: int) -> list[tuple[int, str, int]]:
        gws = make_ring(3, cfg)
        out = []
        for c in range(6):
            if c == checkpoint_at:
                gws = pickle.loads(pickle.dumps(gws))
            for g, gw in enumerate(gws):
                gw.measure(c, readings[c][g], coins=coins[c, g])
            out += [(t.cycle, t.sensor, t.value) for t in run_cycle(gws, c).published]
        return out

    assert run(-1) == run(3) == run(5)


def test_messages_carry_only_encoded_structures():
    cfg = ProtocolConfig(z=2, delta_t=0, structure=EXACT, sensors_total=4, min_members=1)
    gws = make_ring(2, cfg)
    feed(gws, 0, {0: [("a", 1)], 1: [("b", 1)]})
    sends, _ = gws[gws[0].ring.ccc(0)].start_cycle(0)
    assert isinstance(sends[0].msg, Collect) and isinstance(sends[0].msg.payload, bytes)
    out, pubs = gws[sends[0].to].handle(sends[0].msg)
    assert pubs == [] and isinstance(out[0].msg, Collect)
    out, _ = gws[out[0].to].handle(out[0].msg)  # back at the CCC: finalize, pass 1
    assert isinstance(out[0].msg, Publish) and out[0].msg.pass_no == 1


@given(st.integers(0, 40), st.integers(0, 10), st.integers(1, 12))
def test_paper_rule_never_publishes_more_than_window_rule(count, n, z):
    assert publishable(count, n, z, "paper") <= publishable(count, n, z, "window")


def test_collusion_formula_matches_table_one_and_monte_carlo():
    table = collusion_table(100, trials=40_000, seed=2)
    paper = [0.009, 0.04, 0.09, 0.16, 0.25]
    for row, p in zip(table, paper, strict=True):
        assert row["p_formula"] == pytest.approx(p, abs=0.0051)
        sd = (row["p_formula"] * (1 - row["p_formula"]) / 40_000) ** 0.5
        assert abs(row["p_monte_carlo"] - row["p_formula"]) < 5 * sd + 1e-9
    assert p_attack(1, 10) == 0.0
    assert p_attack_monte_carlo(9, 10, 100, np.random.default_rng(0)) == 1.0


@given(st.integers(-(2**63), 2**63 - 1), st.integers(1, 2), st.floats(1e-9, 1.0),
       st.booleans(), st.binary(max_size=64))
def test_ring_messages_round_trip_as_bytes(cycle, pass_no, p_pub, more, payload):
    from streamanon.dezent.protocol import decode_message, encode_message

    for msg in (Collect(cycle, payload), Publish(cycle, pass_no, p_pub, more, payload)):
        assert decode_message(encode_message(msg)) == msg
    raw = encode_message(Publish(cycle, pass_no, p_pub, more, payload))
    with pytest.raises(ValueError, match="truncated"):
        decode_message(raw[:5])
    with pytest.raises(ValueError, match="unknown ring message kind"):
        decode_message(b"X" + raw[1:])


def test_a_ring_below_min_members_runs_no_cycle():
    """Two gateways: the coordinator would learn the other's counts (total minus its own), so
    the default minimum of 3 makes the coordinator refuse to start and a member refuse a
    message of such a ring; with 3 the same readings are published."""
    cfg = ProtocolConfig(z=1, delta_t=0, structure=EXACT, sensors_total=6)
    assert cfg.min_members == 3
    gws = make_ring(2, cfg)
    feed(gws, 0, {0: [("a", 1)], 1: [("b", 1)]})
    ccc = gws[0].ring.ccc(0)
    with pytest.raises(ValueError, match="min_members 3"):
        gws[ccc].start_cycle(0)
    with pytest.raises(ValueError, match="min_members 3"):
        gws[1 - ccc].handle(Collect(0, EXACT.new().to_bytes()))
    gws = make_ring(3, cfg)
    feed(gws, 0, {0: [("a", 1)], 1: [("b", 1)], 2: [("c", 1)]})
    assert len(run_cycle(gws, 0).published) == 3
