"""Secure sum: unmasking is exact, and one gateway's view is indistinguishable from uniform."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamanon.dezent.cbf import CountingBloomFilter
from streamanon.dezent.protocol import Collect, Gateway, ProtocolConfig, StructureSpec
from streamanon.dezent.ring import Ring
from streamanon.dezent.securesum import SecureSumMask
from streamanon.sim.district import District, DistrictConfig


@given(st.integers(1, 63), st.lists(st.lists(st.integers(0, 2**20), min_size=8, max_size=8),
                                    min_size=1, max_size=6))
def test_unmasking_restores_the_exact_sum(bits, contributions):
    total = np.sum(np.array(contributions, dtype=object), axis=0)
    if max(total) >= 2**bits:
        with pytest.raises(OverflowError):
            SecureSumMask.check_capacity(int(max(total)), bits)
        return
    mask = SecureSumMask(8, bits)
    acc = mask.apply(np.zeros(8, dtype=np.uint64))
    for c in contributions:
        acc = (acc + np.array(c, dtype=np.uint64)) & np.uint64(2**bits - 1)
    assert mask.remove(acc).tolist() == [int(x) for x in total]


def test_masks_are_secret():
    with pytest.raises(TypeError, match="never pickled"):
        pickle.dumps(SecureSumMask(4, 8))


def chi_square_critical(df: int, alpha: float) -> float:
    """Upper ``alpha`` quantile of chi-square(df) by Wilson-Hilferty (accurate for df > 30)."""
    # standard normal upper quantile by bisection on erfc
    lo, hi = 0.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(mid / math.sqrt(2)) > alpha:
            lo = mid
        else:
            hi = mid
    zq = lo
    return df * (1 - 2 / (9 * df) + zq * math.sqrt(2 / (9 * df))) ** 3


def chi_square(values: np.ndarray, bins: int) -> float:
    observed = np.bincount(values.astype(np.int64), minlength=bins)
    expected = len(values) / bins
    return float(((observed - expected) ** 2 / expected).sum())


def successor_view(bits: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """What the CCC's successor receives in the collection round of a real cycle, and the
    true counts behind it (a fixed test district, seed 7)."""
    district = District(DistrictConfig(gateways=3, max_sn=2, seed=7))
    spec = StructureSpec("cbf", m, 2, bits)
    cfg = ProtocolConfig(z=2, delta_t=7260, structure=spec, sensors_total=district.sensors)
    ring = Ring(3, seed=7)
    gws = [Gateway(g, cfg, ring) for g in range(3)]
    values = district.readings(0, 1)
    for g in range(3):
        ix = np.flatnonzero(district.sn_gateway == g)
        gws[g].measure(0, [(district.sensor_ids[i], int(values[0, i])) for i in ix])
    ccc = gws[ring.ccc(0)]
    sends, _ = ccc.start_cycle(0)
    assert isinstance(sends[0].msg, Collect) and sends[0].to == ring.successor(ccc.id, 0)
    view = CountingBloomFilter.from_bytes(sends[0].msg.payload).counters
    truth = CountingBloomFilter(m, 2, bits)
    counts = ccc.local_counts(0)
    truth.add_counts(np.array(list(counts)), list(counts.values()))
    return view, truth.counters


def test_a_gateways_view_is_uniform():
    bits, m = 8, 8192  # 256 residues, 32 expected per residue
    view, truth = successor_view(bits, m)
    assert truth.any(), "the test district must contribute counts"
    critical = chi_square_critical(2**bits - 1, alpha=1e-6)  # a false alarm once in 10^6 runs
    assert chi_square(view, 2**bits) < critical
    # the test has power: the unmasked counts, or the reference's single pseudo-item of
    # weight 20..30, are far from uniform
    assert chi_square(truth, 2**bits) > critical
    weak = truth.copy()
    weak[np.random.default_rng(1).integers(0, m, 2)] += 25
    assert chi_square(weak, 2**bits) > critical


def test_wilson_hilferty_matches_known_quantiles():
    assert chi_square_critical(100, 0.05) == pytest.approx(124.342, rel=2e-3)
    assert chi_square_critical(255, 0.001) == pytest.approx(330.52, rel=3e-3)
