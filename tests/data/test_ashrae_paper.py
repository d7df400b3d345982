"""The stand-in of Prink's data set matches its Table 1, and the paper's filter on files in
the real Kaggle layout keeps what the paper keeps."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime

import pytest

from streamanon.data import ashrae

TABLE_1 = {  # column: (min, max, distinct), Prink's Table 1
    "building_id": (565, 655, 89), "square_feet": (387, 420885, 89),
    "year_built": (1903, 2016, 58), "floor_count": (1, 14, 13),
    "air_temperature": (1.1, 35.0, 59), "cloud_coverage": (0, 9, 4),
    "dew_temperature": (-9.4, 17.8, 49), "precip_depth_1_hr": (-1, 8, 4),
    "sea_level_pressure": (1007.8, 1031.7, 228), "wind_direction": (0, 360, 37),
}


@pytest.fixture(scope="module")
def year() -> list[dict]:
    return list(ashrae.generate_paper(seed=1))


def test_the_stand_in_has_table_1s_rows_ranges_and_distinct_counts(year) -> None:
    assert len(year) == ashrae.PAPER_ROWS == 321_728
    for col, (lo, hi, distinct) in TABLE_1.items():
        vals = [r[col] for r in year]
        assert (min(vals), max(vals), len(set(vals))) == (lo, hi, distinct), col
    assert len({r["primary_use"] for r in year}) == 7
    ts = [r["timestamp"] for r in year]
    assert ts == sorted(ts) and len(set(ts)) == ashrae.PAPER_HOURS == 8736
    first = datetime(2016, 1, 1, 1, tzinfo=UTC).timestamp()
    last = datetime(2016, 12, 31, 23, tzinfo=UTC).timestamp()
    assert (min(ts), max(ts)) == (first, last)
    reading = [r["meter_reading"] for r in year]
    assert (min(reading), max(reading)) == (0.0, 2293.88)


def test_buildings_report_part_of_the_year_and_floor_areas_are_skewed(year) -> None:
    per_building: dict[int, int] = {}
    area: dict[int, int] = {}
    for r in year:
        per_building[r["building_id"]] = per_building.get(r["building_id"], 0) + 1
        area[r["building_id"]] = r["square_feet"]
    assert max(per_building.values()) <= ashrae.PAPER_HOURS
    assert statistics.mean(per_building.values()) == pytest.approx(321_728 / 89)
    # floor areas of a building stock: most mid-sized, a few very large (not uniform)
    assert statistics.median(area.values()) < 420885 / 4


def test_the_paper_rules_have_precipitation_as_a_quasi_identifier() -> None:
    from streamanon.castle import RuleSet

    rs = RuleSet.from_toml(ashrae.paper_rules_toml())
    assert "precip_depth_1_hr" in rs.quasi_identifiers
    assert rs.quasi_identifiers == [*ashrae.PAPER_NUMERIC_QI, "primary_use"]
    assert rs.sensitive == ["meter_reading"] and rs.id_field == "building_id"


def test_a_prefix_is_the_start_of_the_year() -> None:
    assert list(ashrae.generate_paper(500, seed=3)) == list(ashrae.generate_paper(seed=3))[:500]


def write_real_layout(d) -> None:
    """Four buildings in the Kaggle layout: 565 complete, 566 without a floor count, 567
    without a year, 568 complete but at a site with no weather for one hour."""
    (d / "building_metadata.csv").write_text(
        "site_id,building_id,primary_use,square_feet,year_built,floor_count\n"
        "5,565,Education,7432,2008,2\n5,566,Office,2720,2004,\n"
        "5,567,Office,2720,,3\n6,568,Retail,900,1990,1\n")
    (d / "weather_train.csv").write_text(
        "site_id,timestamp,air_temperature,cloud_coverage,dew_temperature,precip_depth_1_hr,"
        "sea_level_pressure,wind_direction,wind_speed\n"
        "5,2016-01-01 01:00:00,5.0,0.0,2.0,-1.0,1019.7,90.0,3.1\n"
        "5,2016-01-01 02:00:00,5.5,,2.0,-1.0,1019.9,90.0,3.6\n"
        "6,2016-01-01 02:00:00,4.0,2.0,1.0,0.0,1018.0,80.0,2.0\n"
        "5,2017-01-01 01:00:00,1.0,0.0,0.0,0.0,1000.0,0.0,0.0\n")
    (d / "train.csv").write_text(
        "building_id,meter,timestamp,meter_reading\n"
        "565,0,2016-01-01 01:00:00,10.5\n565,1,2016-01-01 01:00:00,99.0\n"
        "566,0,2016-01-01 01:00:00,3.0\n567,0,2016-01-01 01:00:00,4.0\n"
        "568,0,2016-01-01 01:00:00,5.0\n568,0,2016-01-01 02:00:00,6.0\n"
        "565,0,2016-01-01 02:00:00,11.5\n565,0,2017-01-01 01:00:00,12.0\n")


def test_the_papers_filter_keeps_electricity_of_buildings_with_year_and_floors(tmp_path) -> None:
    write_real_layout(tmp_path)
    rows = ashrae.load_real(tmp_path, paper_filter=True)
    assert [(r["building_id"], r["meter_reading"]) for r in rows] == [
        (565, 10.5), (565, 11.5), (568, 6.0)]
    assert rows[1]["cloud_coverage"] is None  # an empty weather field stays empty
    assert set(rows[0]) == set(ashrae.COLUMNS)
    kept = ashrae.load_real(tmp_path, paper_filter=True, drop_missing=True)
    assert [(r["building_id"], r["meter_reading"]) for r in kept] == [(565, 10.5), (568, 6.0)]
    # without the filter: every electricity reading, missing values as None
    assert len(ashrae.load_real(tmp_path)) == 7
