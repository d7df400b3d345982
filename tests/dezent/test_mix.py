"""The mix (publication = "mix") and the publication order in the sans-I/O core: sealing and
padding, one batch per cycle holding exactly the cycle's tuples, secret shuffles, dummies,
re-sent tuples, the acknowledgement pass, and the random pass start."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from streamanon.dezent import mix
from streamanon.dezent.order import pass_messages, pass_start, receiver_position, sender_position
from streamanon.dezent.protocol import (
    CE,
    Gateway,
    MixAck,
    MixBatch,
    ProtocolConfig,
    Publish,
    StructureSpec,
    decode_message,
    encode_message,
    run_cycle,
)
from streamanon.dezent.ring import Ring

EXACT = StructureSpec("exact", 6, 1, 16, tuple(range(6)))
KEYS = mix.MixKeys.generate()


def ring_of(n: int, **kw) -> list[Gateway]:
    cfg = ProtocolConfig(z=2, delta_t=0, structure=EXACT, sensors_total=4 * n,
                         publication="mix", mix_key=KEYS.public_bytes, **kw)
    ring = Ring(n, seed=5, epoch_cycles=8)
    return [Gateway(g, cfg, ring, rng=np.random.default_rng(g)) for g in range(n)]


def feed(gws: list[Gateway], cycle: int) -> None:
    # value 1 at every sensor (published, z = 2), value 4 at one sensor each (suppressed)
    for g, gw in enumerate(gws):
        gw.measure(cycle, [(f"s{g}a", 1), (f"s{g}b", 1), (f"s{g}c", 4 if g == 0 else 1)])


def opened(batch: MixBatch) -> list[mix.MixTuple]:
    return [mix.decode_plaintext(mix.open_sealed(KEYS.private_key, x)) for x in batch.items]


def test_sealed_items_have_one_size_open_only_with_the_key_and_refuse_tampering():
    small = mix.MixTuple(mix.new_uid(), 1, 900.0, "a", 5)
    large = mix.MixTuple(mix.new_uid(), 2**40, 1e12, "x" * 20, -(2**62))
    items = [mix.seal(KEYS.public_bytes, mix.encode_plaintext(t)) for t in (small, large)]
    assert {len(x) for x in items} == {mix.item_bytes()}
    assert [mix.decode_plaintext(mix.open_sealed(KEYS.private_key, x)) for x in items] == [
        small, large]
    other = mix.MixKeys.generate()
    with pytest.raises(mix.MixError, match="does not open"):
        mix.open_sealed(other.private_key, items[0])
    flipped = bytearray(items[0])
    flipped[40] ^= 1
    with pytest.raises(mix.MixError, match="does not open"):
        mix.open_sealed(KEYS.private_key, bytes(flipped))
    with pytest.raises(mix.MixError, match="raise mix_padding"):
        mix.encode_plaintext(mix.MixTuple(mix.new_uid(), 1, 0.0, "y" * 40, 1))
    text = mix.MixTuple(mix.new_uid(), 1, 0.0, "t", "kitchen")
    assert mix.decode_plaintext(mix.encode_plaintext(text)) == text
    assert mix.decode_plaintext(mix.encode_plaintext(mix.dummy(3))).dummy
    with pytest.raises(mix.MixError, match="padding"):
        mix.decode_plaintext(mix.encode_plaintext(small)[:-1] + b"\x01")


def test_the_secret_shuffle_is_uniform():
    counts = Counter(tuple(mix.secure_shuffle("abc")) for _ in range(6000))
    assert set(counts) == set(itertools.permutations("abc"))
    assert all(abs(n - 1000) < 5 * 1000**0.5 for n in counts.values()), counts  # ~5 sd


def test_one_batch_per_cycle_holds_exactly_the_cycles_tuples():
    gws = ring_of(5, p_pub=1.0)  # one publication pass
    for cycle in range(3):
        feed(gws, cycle)
        res = run_cycle(gws, cycle)
        (batch,) = res.delivered
        tuples = opened(batch)
        real = [t for t in tuples if not t.dummy]
        assert sorted(t.uid for t in real) == sorted(p.uid for p in res.published)
        assert {(t.cycle, t.id, t.value) for t in real} == {
            (p.cycle, p.id, p.value) for p in res.published}
        assert len(res.published) == 14 - 1  # z = 2: 14 - (z - 1) of the 1s, not the lone 4
        # the CCC padded its share with dummies to its 3 records
        ccc = gws[0].ring.ccc(cycle)
        assert sum(t.dummy for t in tuples) == 3 - sum(p.gateway == ccc for p in res.published)
        assert len({len(x) for x in batch.items}) == 1
        # messages: collection, one pass, the mix (n - 1 hops) and the acknowledgement
        assert res.ring_messages == 5 + 5 + 4 + 4


def test_each_gateway_shuffles_adds_its_tuples_and_the_last_one_delivers():
    gws = ring_of(4)
    feed(gws, 0)
    ring = gws[0].ring
    order = ring.from_ccc(0)
    sends, _ = gws[order[0]].start_cycle(0)
    seen: list[tuple[int, MixBatch]] = []
    queue = list(sends)
    published: Counter[int] = Counter()
    while queue:
        send = queue.pop(0)
        if isinstance(send.msg, MixBatch):
            seen.append((send.to, send.msg))
        if send.to != CE:
            out, pubs = gws[send.to].handle(send.msg)
            published.update(p.gateway for p in pubs)
            queue += out
    # the batch goes CCC -> 1 -> 2 -> 3 -> CE, growing by each gateway's tuples
    assert [to for to, _ in seen] == [order[1], order[2], order[3], CE]
    sizes = [len(b.items) for _, b in seen]
    assert sizes[0] == 3  # the CCC's share padded to its 3 records
    assert [b - a for a, b in itertools.pairwise(sizes)] == [published[g] for g in order[1:]]
    # nothing that came in goes out unchanged in place (a fresh shuffle at every hop) and
    # nothing is dropped: every incoming item is in the outgoing batch
    for (_, a), (_, b) in itertools.pairwise(seen):
        assert set(a.items) <= set(b.items)
    # the ack goes around from the deliverer and stops before it
    acks = gws[order[3]].mix_committed(0)
    visited = []
    while acks:
        (ack,) = acks
        assert isinstance(ack.msg, MixAck)
        visited.append(ack.to)
        acks, _ = gws[ack.to].handle(ack.msg)
    assert visited == [order[0], order[1], order[2]]


def test_tuples_of_a_failed_mix_are_sealed_afresh_into_a_later_batch():
    gws = ring_of(3)
    feed(gws, 0)
    lost = run_cycle(gws, 0)
    mine = [p for p in lost.published if p.gateway == 1]
    old_items = set(lost.delivered[0].items)
    feed(gws, 1)
    order = gws[0].ring.from_ccc(1)
    sends, _ = gws[order[0]].start_cycle(1)
    queue, delivered = list(sends), None
    while queue:
        send = queue.pop(0)
        if send.to == CE:
            delivered = send.msg
            continue
        out, _ = gws[send.to].handle(send.msg, carry=mine if send.to == 1 else ())
        queue += out
    assert isinstance(delivered, MixBatch)
    uids = [t.uid for t in opened(delivered) if not t.dummy]
    assert len(uids) == len(set(uids))
    assert {p.uid for p in mine} <= set(uids)  # carried along, once
    assert not old_items & set(delivered.items)  # new ciphertexts: not recognisable


def test_mix_refuses_what_would_name_the_gateway_and_needs_the_ce_key():
    with pytest.raises(mix.MixError, match="id_mode = 'gateway'"):
        ring_of(3, id_mode="gateway")
    with pytest.raises(mix.MixError, match="public key"):
        ProtocolConfig(z=2, delta_t=0, structure=EXACT, sensors_total=4, publication="mix")
    with pytest.raises(ValueError, match="publication order"):
        ProtocolConfig(z=2, delta_t=0, structure=EXACT, sensors_total=4,
                       publication_order="ccc-last")
    gws = ring_of(3)
    feed(gws, 0)
    ccc = gws[0].ring.ccc(0)
    with pytest.raises(mix.MixError, match="came back to its coordinator"):
        gws[ccc].handle(MixBatch(0, ()))
    other = next(g for g in range(3) if g != ccc)
    with pytest.raises(mix.MixError, match="not 112 bytes"):
        gws[other].handle(MixBatch(0, (b"short",)))


def test_ring_messages_of_the_mix_round_trip_as_bytes():
    for msg in (MixBatch(3, (b"a" * 4, b"b" * 4)), MixBatch(3, ()), MixAck(9),
                Publish(1, 2, 0.5, True, b"xy", 3, 7)):
        assert decode_message(encode_message(msg)) == msg
    raw = encode_message(MixBatch(3, (b"a" * 4, b"b" * 4)))
    with pytest.raises(ValueError, match="bytes"):
        decode_message(raw[:-1])


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_random_order_publishes_what_the_paper_order_publishes(n):
    """The counter decides how many tuples of a value are published, the order only which:
    per (cycle, value) both orders publish the same, for every start, in n or n + 1 messages
    per pass."""
    def run(order: str, draws: tuple[float, float]) -> tuple[Counter, int, int]:
        cfg = ProtocolConfig(z=3, delta_t=0, structure=EXACT, sensors_total=4 * n, p_pub=0.5,
                             publication_order=order, min_members=1)
        ring = Ring(n, seed=2, epoch_cycles=8)
        gws = [Gateway(g, cfg, ring, rng=np.random.default_rng(g)) for g in range(n)]
        rng = np.random.default_rng(7)
        for g, gw in enumerate(gws):
            gw.measure(0, [(f"s{g}{j}", int(rng.integers(0, 3))) for j in range(4)],
                       coins=rng.random(4), order_draws=draws)
        res = run_cycle(gws, 0)
        return Counter(t.value for t in res.published), res.ring_messages, res.passes

    paper, msgs, passes = run("paper", (0.0, 0.0))
    for u in (0.0, 0.3, 0.6, 0.99):
        got, got_msgs, got_passes = run("random", (u, u))
        assert got == paper and got_passes == passes
        s = pass_start("random", n, u)
        assert got_msgs == (n if n > 1 else 0) + passes * pass_messages(s, n)
    assert msgs == (n if n > 1 else 0) + passes * pass_messages(1, n)


def test_pass_routing_is_a_chain_from_the_ccc_back_to_the_ccc():
    for n in range(1, 9):
        for s in range(n):
            hops = [(sender_position(s, t, n), receiver_position(s, t, n))
                    for t in range(n + 1)]
            # every message is sent by whoever received the previous one
            assert all(a[1] == b[0] for a, b in itertools.pairwise(hops))
            assert hops[0][0] == 0 and hops[-1][1] == 0


def test_ephemeral_keys_drawn_ahead_are_each_used_once_and_never_pickled():
    import pickle

    pool = mix.EphemeralPool(KEYS.public_bytes)
    assert pool.refill(5) == 5 and pool.refill(3) == 0 and len(pool) == 5
    items = [mix.seal_with(pool.take(), mix.encode_plaintext(mix.dummy(1))) for _ in range(7)]
    assert len({x[: mix.KEY_BYTES] for x in items}) == 7  # 5 from the pool, 2 drawn on the spot
    assert all(mix.decode_plaintext(mix.open_sealed(KEYS.private_key, x)).dummy for x in items)
    pool.refill(4)
    assert len(pickle.loads(pickle.dumps(pool))) == 0
    gws = ring_of(3)
    feed(gws, 0)
    assert gws[0].prepare_mix(carried=4) == 2 * 3 + 4  # twice its records, plus re-sent
    res = run_cycle(gws, 0)
    ccc = gws[0].ring.ccc(0)
    dummies = 3 - sum(p.gateway == ccc for p in res.published)
    assert len(opened(res.delivered[0])) == len(res.published) + dummies
