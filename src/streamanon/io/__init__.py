"""Readers and writers for record streams (CSV, JSON Lines; files or stdin/stdout).

Parsing and validation live here once: the operators never see a malformed record, and the
independent checkers parse their input with the same readers (the only code they share).
"""

from streamanon.io.policy import InputError, OnError, RejectLog
from streamanon.io.readers import RecordBatch, detect_format, iter_batches, read_records
from streamanon.io.writers import RecordWriter
from streamanon.timefmt import parse_time

__all__ = [
    "InputError",
    "OnError",
    "RecordBatch",
    "RecordWriter",
    "RejectLog",
    "detect_format",
    "iter_batches",
    "parse_time",
    "read_records",
]
