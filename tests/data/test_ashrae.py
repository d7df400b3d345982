"""The ASHRAE-shaped generator matches the spec's schema, sizes, ranges and distinct counts;
the loader builds the same shape from (small, hand-made) real-format files."""

from __future__ import annotations

from streamanon.data import ashrae

SPEC = {  # column: (min, max, distinct) from spec castle.md
    "square_feet": (387, 420885, 89), "year_built": (1903, 2016, 58),
    "floor_count": (1, 14, 13), "air_temperature": (1.1, 35.0, 59),
    "cloud_coverage": (0, 9, 4), "dew_temperature": (-9.4, 17.8, 49),
    "precip_depth_1_hr": (-1, 8, 4), "sea_level_pressure": (1007.8, 1031.7, 228),
    "wind_direction": (0, 360, 37), "meter_reading": (0, 2293.88, None),
}


def test_full_year_matches_the_spec() -> None:
    rows = list(ashrae.generate(seed=1))
    assert len(rows) == 89 * 366 * 24
    assert len({r["building_id"] for r in rows}) == 89
    assert len({r["primary_use"] for r in rows}) == 7
    for col, (lo, hi, distinct) in SPEC.items():
        vals = [r[col] for r in rows]
        assert min(vals) == lo and max(vals) == hi, col
        if distinct is not None:
            assert len(set(vals)) == distinct, col
    ts = [r["timestamp"] for r in rows]
    assert ts == sorted(ts)


def test_building_attributes_fixed_weather_per_hour() -> None:
    rows = list(ashrae.generate(89 * 48, seed=2))
    by_b: dict[int, set] = {}
    by_h: dict[int, set] = {}
    for r in rows:
        by_b.setdefault(r["building_id"], set()).add(
            (r["square_feet"], r["year_built"], r["floor_count"], r["primary_use"]))
        by_h.setdefault(r["timestamp"], set()).add((r["air_temperature"], r["wind_speed"]))
    assert all(len(v) == 1 for v in by_b.values())
    assert all(len(v) == 1 for v in by_h.values())


def test_seeded() -> None:
    assert list(ashrae.generate(500, seed=4)) == list(ashrae.generate(500, seed=4))
    assert list(ashrae.generate(500, seed=4)) != list(ashrae.generate(500, seed=5))


def test_loader_reads_the_real_file_layout(tmp_path) -> None:
    (tmp_path / "building_metadata.csv").write_text(
        "site_id,building_id,primary_use,square_feet,year_built,floor_count\n"
        "0,0,Education,7432,2008,\n0,1,Office,2720,2004,3\n")
    (tmp_path / "weather_train.csv").write_text(
        "site_id,timestamp,air_temperature,cloud_coverage,dew_temperature,precip_depth_1_hr,"
        "sea_level_pressure,wind_direction,wind_speed\n"
        "0,2016-01-01 00:00:00,25.0,6.0,20.0,,1019.7,0.0,0.0\n")
    (tmp_path / "train.csv").write_text(
        "building_id,meter,timestamp,meter_reading\n"
        "1,0,2016-01-01 00:00:00,10.5\n0,0,2016-01-01 00:00:00,0.0\n"
        "0,1,2016-01-01 00:00:00,99.0\n0,0,2016-01-01 01:00:00,1.5\n")
    rows = ashrae.load_real(tmp_path)
    assert [(r["building_id"], r["meter_reading"]) for r in rows] == [(0, 0.0), (1, 10.5),
                                                                     (0, 1.5)]
    assert rows[0]["floor_count"] is None and rows[0]["precip_depth_1_hr"] is None
    assert rows[0]["timestamp"] == ashrae.T0 and rows[2]["air_temperature"] is None
    assert set(rows[0]) == set(ashrae.COLUMNS)


def test_rules_of_the_evaluation_parse() -> None:
    from streamanon.castle import RuleSet

    rs = RuleSet.from_toml(ashrae.rules_toml())
    assert rs.quasi_identifiers == [*ashrae.NUMERIC_QI, "primary_use"]
    assert rs.sensitive == ["meter_reading"] and rs.id_field == "building_id"
