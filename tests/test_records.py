"""The run accounting: the one word for what an operator lets through, and its old aliases."""

from __future__ import annotations

import pytest

from streamanon.records import DEPRECATED_KEYS, RunStats, with_deprecated_keys


def test_to_dict_carries_released_and_its_deprecated_alias():
    stats = RunStats(params={"z": 2}, details={"released_per_level": {"level_0": 3}})
    stats.count_read(5)
    stats.count_released(3)
    stats.count_suppressed(1)
    stats.count_rejected(1)
    d = stats.to_dict()
    assert d["released"] == d["published"] == 3 and d["balanced"]
    assert d["released_per_level"] == d["published_per_level"] == {"level_0": 3}
    # each alias right after its new key
    keys = list(d)
    assert keys[keys.index("released") + 1] == "published"


def test_deprecated_python_aliases_warn_and_agree():
    stats = RunStats()
    with pytest.warns(DeprecationWarning, match="count_released"):
        stats.count_published(2)
    with pytest.warns(DeprecationWarning, match="released"):
        assert stats.published == stats.released == 2
    with pytest.raises(AttributeError):
        stats.published = 3  # type: ignore[misc]  # read-only


def test_with_deprecated_keys_keeps_an_old_key_already_there():
    assert with_deprecated_keys({"released": 1, "published": 1}) == {"released": 1,
                                                                      "published": 1}
    assert set(DEPRECATED_KEYS.values()) == {"released", "released_per_level",
                                             "file_path_released"}
