"""The independent checkers: z-anonymity (:mod:`.z`) and CASTLE's k/l guarantee (:mod:`.castle`).

**The rule of this package: it imports only** :mod:`streamanon.records` **and**
:mod:`streamanon.errors` **of streamanon** (besides its own modules). A checker recomputes a
guarantee from the files alone, with its own reader (:mod:`._read`) and its own algorithm,
sharing no code with the operators nor with :mod:`streamanon.io`, so that one bug cannot hide
in both; ``tests/test_checker_independence.py`` asserts it on the source and on what a
check loads and calls.

>>> from streamanon.records import Record
>>> from streamanon.verify import check_z
>>> check_z([Record(0, "a", "x"), Record(1, "b", "x")], [Record(1, "b", "x")], z=2,
...         delta_t=10).ok
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamanon.verify.castle import (
        AttributeSpec,
        CastleCheckReport,
        CastleSpec,
        check_castle,
        check_castle_files,
        columns_spec,
        load_rules,
        read_released,
        rules_from_dict,
        rules_from_toml,
    )
    from streamanon.verify.z import ZCheckReport, check_z, check_z_files, read_tuples

#: Each export's module, imported on first use (``verify z`` never loads the CASTLE checker).
_EXPORTS = {**dict.fromkeys(
    ["AttributeSpec", "CastleCheckReport", "CastleSpec", "check_castle", "check_castle_files",
     "columns_spec", "load_rules", "read_released", "rules_from_dict", "rules_from_toml"],
    "streamanon.verify.castle"),
    **dict.fromkeys(["ZCheckReport", "check_z", "check_z_files", "read_tuples"],
                    "streamanon.verify.z")}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(module), name)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "AttributeSpec",
    "CastleCheckReport",
    "CastleSpec",
    "ZCheckReport",
    "check_castle",
    "check_castle_files",
    "check_z",
    "check_z_files",
    "columns_spec",
    "load_rules",
    "read_released",
    "read_tuples",
    "rules_from_dict",
    "rules_from_toml",
]
