"""The district generator: spec shape, determinism per seed, chunk-independent data."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streamanon.dezent.grid import bucket
from streamanon.sim.district import (
    ALL_TYPES,
    CLIENT_TYPES,
    FARM_TYPES,
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




def test_spec_noise_is_one_sided_up_to_ten_percent():
    d = District(DistrictConfig(gateways=20, max_sn=10, seed=3))
    w = d.readings_w(0, 96)
    prof = load_profiles(2024)
    rows = [PROFILES.index(CLIENT_TYPES[t].profile) for t in d.sn_type]
    scale = np.array([CLIENT_TYPES[t].annual_kwh / 1000 for t in d.sn_type])
    ratio = w / (prof[rows][:, :96].T * scale)
    assert ratio.min() >= 1 - 1e-12 and ratio.max() <= 1.1 + 1e-12
    assert 1.04 < ratio.mean() < 1.06  # uniform on [0, 10 %]


def test_reference_district_makes_its_data_as_the_authors_simulation():
    d = District(DistrictConfig(gateways=400, max_sn=20, seed=4, kind="reference"))
    # sensor nodes: the floor of a normal truncated to [0, 20], at least one (mean ~9.5)
    assert abs(d.sn_per_gw.mean() - 9.5) < 0.25 and d.sn_per_gw.max() <= 19
    prof = load_profiles(2024)
    rows = [PROFILES.index("h0" if ALL_TYPES[t].profile == "h0_dyn" else ALL_TYPES[t].profile)
            for t in d.sn_type]
    scale = np.array([ALL_TYPES[t].annual_kwh / 1000 for t in d.sn_type])
    # cycle c reads the quarter hour ending at c (cycle 0: the year's last one, 23:45-24:00)
    shifted = np.concatenate((prof[rows][:, -1:], prof[rows][:, :95]), axis=1).T
    whole = np.floor(shifted * scale + 1e-9)
    w = d.readings_w(0, 96)
    assert np.array_equal(w, np.floor(w))  # integer W
    extra = w - whole
    assert extra.min() >= 0 and np.all(extra <= np.floor(whole * 0.1 + 1e-9))
    assert np.array_equal(d.readings(0, 96), bucket(w))
    assert np.array_equal(d.readings(10, 20), d.readings(0, 96)[10:20])


def test_farms_join_the_mix_only_when_asked():
    plain = District(DistrictConfig(gateways=300, max_sn=20, seed=2))
    assert plain.sn_type.max() < len(CLIENT_TYPES)
    farms = District(DistrictConfig(gateways=300, max_sn=20, seed=2, farm_share=0.2))
    share = np.isin(farms.sn_type, np.arange(len(CLIENT_TYPES), len(ALL_TYPES))).mean()
    assert abs(share - 0.2) < 0.03
    assert {ALL_TYPES[t].profile for t in farms.sn_type} >= {t.profile for t in FARM_TYPES}
    assert np.isin(farms.readings(0, 4), farms.domain()).all()
