"""Rewrite tests/durations.json (seconds per test file, which orders the files on ./dev test's
workers: see tests/conftest.py) from the JUnit XML files of a run: ``./dev test`` writes one
per phase (``python -m tests.durations .test-reports/*.xml``), or
``python -m pytest -n 2 --junitxml=run.xml`` then ``python -m tests.durations run.xml``."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

TABLE = Path(__file__).with_name("durations.json")


def file_seconds(reports: list[Path]) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of its tests) over the JUnit reports."""
    seconds: dict[str, float] = defaultdict(float)
    for report in reports:
        for case in ET.parse(report).iter("testcase"):
            classname = case.get("classname", "")
            # pytest's junit classname: the file's dotted path, then any class names
            parts = classname.split(".")
            for cut in range(len(parts), 0, -1):
                for suffix in (".py", ""):
                    candidate = "/".join(parts[:cut]) + suffix
                    if suffix and Path(candidate).is_file():
                        seconds[candidate] += float(case.get("time", 0))
                        break
                else:
                    continue
                break
    return dict(seconds)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    seconds = file_seconds([Path(a) for a in argv])
    # a file the reports lack (a phase not run, a run cut short) keeps its figure while it exists
    old = json.loads(TABLE.read_text(encoding="utf-8"))["seconds"] if TABLE.is_file() else {}
    kept = {k: v for k, v in old.items() if k not in seconds and Path(k).is_file()}
    seconds = {**seconds, **kept}
    TABLE.write_text(json.dumps({
        "about": "seconds per test file (a ./dev test run: two workers, then the phases "
                 "of one process); rewrite with python -m tests.durations .test-reports/*.xml",
        "seconds": {k: round(v, 1) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])},
    }, indent=1) + "\n", encoding="utf-8")
    print(f"{TABLE}: {len(seconds)} files ({len(kept)} kept, not in the reports), "
          f"{sum(seconds.values()):.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
