"""What happens to bad input: ``fail`` stops with a one-line message, ``skip`` logs and goes on."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from streamanon.errors import InputError as InputError  # re-exported: its historical home
from streamanon.errors import OnError as OnError  # re-exported: where the readers look for it
from streamanon.records import Rejected


class RejectLog:
    """Collects rejected lines and, when given a path, writes them as JSON Lines.

    Each line of the rejects file is ``{"source", "line", "reason", "text"}`` so a user can
    fix and replay exactly what was refused.
    """

    def __init__(self, path: str | Path | None = None, source: str = "input",
                 name: str | None = None) -> None:
        self.source = source
        self.name = name or (str(path) if path is not None else None)  # shown in messages
        self.count = 0
        self.first: Rejected | None = None
        self._path = Path(path) if path is not None else None
        self._fh: TextIO | None = None

    def __call__(self, rejected: Rejected) -> None:
        self.count += 1
        if self.first is None:
            self.first = rejected
        if self._path is None:
            return
        if self._fh is None:
            self._fh = self._path.open("w", encoding="utf-8")
        entry = {
            "source": self.source,
            "line": rejected.line,
            "reason": rejected.reason,
            "text": rejected.text,
        }
        self._fh.write(json.dumps(entry) + "\n")

    def warn_summary(self) -> None:
        if self.count and self.first is not None:
            where = f" (written to {self.name})" if self._path else ""
            print(
                f"warning: {self.count} record(s) rejected{where}; first: "
                f"{self.first.message(self.source)}",
                file=sys.stderr,
            )

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
