"""The district generator: spec shape, determinism per seed, chunk-independent data."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streamanon.sim.district import (
    CLIENT_TYPES,
    PROFILES,
    District,
    DistrictConfig,
    load_profiles,
)


def test_profiles_are_the_bdew_ones_scaled_to_1000_kwh():
    prof = load_profiles(2024)
    assert prof.shape == (len(PROFILES), 35_136)  # 2024 is a leap year
    annual_kwh = prof.sum(axis=1) / 4 / 1000  # W per quarter hour -> kWh
    assert np.allclose(annual_kwh, 1000, rtol=0.01)
    h0 = prof[PROFILES.index("h0_dyn")]
    assert h0[: 96 * 31].mean() > 1.3 * h0[96 * 182 : 96 * 213].mean()  # winter peak (dynamised)


@given(st.integers(1, 40), st.integers(1, 30), st.integers(0, 10**6))
def test_sensors_per_gateway_and_types(gateways, max_sn, seed):
    d = District(DistrictConfig(gateways=gateways, max_sn=max_sn, seed=seed))
    assert d.sn_per_gw.min() >= 1 and d.sn_per_gw.max() <= max_sn
    assert len(d.sn_gateway) == d.sensors == len(d.sensor_ids) == len(set(d.sensor_ids))
    assert np.all(np.diff(d.sn_gateway) >= 0)  # a gateway's sensors are contiguous
    assert d.sn_type.max() < len(CLIENT_TYPES)


def test_client_mix_follows_the_spec_shares():
    d = District(DistrictConfig(gateways=2000, max_sn=20, seed=1))
    freq = np.bincount(d.sn_type, minlength=len(CLIENT_TYPES)) / d.sensors
    shares = np.array([t.share for t in CLIENT_TYPES])
    shares = shares / shares.sum()
    sd = np.sqrt(shares * (1 - shares) / d.sensors)
    assert np.all(np.abs(freq - shares) < 5 * sd + 1e-4)
    assert abs(d.sn_per_gw.mean() - 10) < 0.2


@given(st.integers(0, 10**6), st.integers(0, 1000), st.integers(1, 300), st.integers(1, 299))
def test_readings_do_not_depend_on_how_cycles_are_asked_for(seed, c0, n, cut):
    d = District(DistrictConfig(gateways=3, max_sn=6, seed=seed))
    cut = min(cut, n)
    whole = d.readings(c0, c0 + n)
    parts = np.concatenate([d.readings(c0, c0 + cut), d.readings(c0 + cut, c0 + n)])
    assert np.array_equal(whole, parts)
    assert np.array_equal(d.coins(c0, c0 + n)[cut:], d.coins(c0 + cut, c0 + n))
    assert np.isin(whole, d.domain()).all()


def test_readings_stay_within_the_noise_band_of_the_profile():
    d = District(DistrictConfig(gateways=5, max_sn=10, seed=2))
    w = d.readings_w(1000, 1096)
    prof = load_profiles(2024)
    rows = [PROFILES.index(CLIENT_TYPES[t].profile) for t in d.sn_type]
    scale = np.array([CLIENT_TYPES[t].annual_kwh / 1000 for t in d.sn_type])
    base = prof[rows][:, 1000:1096].T * scale
    assert np.all(np.abs(w / base - 1) <= 0.1 + 1e-12)


