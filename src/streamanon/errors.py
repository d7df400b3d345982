"""Every error streamanon raises on purpose, under one roof.

Callers decide by type, never by message:

* :class:`BadRecordError` (and its kinds): *this record* cannot be anonymized. Adapters turn
  it, and only it, into a rejected input row (naming the line or offset) and go on; the
  operator is unchanged by the refused record.
* :class:`ConfigError`: parameters or rules that cannot run; nothing was processed.
* :class:`ProtocolError`: a call or a message that breaks an operator's or the deZent ring's
  protocol (a cycle without readings, a collection round back at a coordinator that never
  started it, ...). It replaces ``assert`` in the cores, which ``python -O`` would remove.
* :class:`InputError`, :class:`EncodingError`, :class:`FrameError`: unreadable input files,
  counting structures and network frames (re-exported from their historical modules).
* :class:`JobError` (and its kinds): a Flink job that could not run or broke a promise of its
  own while running (a lost split, part files that are not one outcome per input line).

Anything else escaping an operator is a bug and deserves its traceback. Every class here
also derives from :class:`ValueError`, so code written before these types existed keeps
catching them.

>>> err = MissingFieldError("age", record={"u": "a"})
>>> isinstance(err, BadRecordError), err.kind, err.field, str(err)
(True, 'missing_field', 'age', 'missing field age')
>>> try:
...     raise UnknownCategoryError("city", "unknown category 'Rome'")
... except BadRecordError as exc:
...     print(exc.kind, exc)
unknown_category unknown category 'Rome'
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from streamanon.records import Rejected

__all__ = [
    "BadRecordError",
    "BadValueError",
    "ConfigError",
    "DuplicateReadingError",
    "EncodingError",
    "EndpointError",
    "FrameError",
    "HelperGone",
    "InputError",
    "JobError",
    "JobFailed",
    "KafkaJarsError",
    "MissingFieldError",
    "OnError",
    "OutcomeGap",
    "OutputError",
    "ProtocolError",
    "ResumeError",
    "StreamanonError",
    "TimeOrderError",
    "UnknownCategoryError",
]


class StreamanonError(ValueError):
    """Base of every error streamanon raises on purpose."""


class OnError(StrEnum):
    """The user's choice for a bad input record (``--on-error``): ``fail`` stops with a
    one-line message naming it, ``skip`` sets it aside (counted, logged) and goes on.

    It lives here, beside the errors it is about, so that the command line can offer the
    choice without loading the readers (:mod:`streamanon.io.policy` re-exports it).
    """

    fail = "fail"
    skip = "skip"


# -- records ---------------------------------------------------------------------------------
class BadRecordError(StreamanonError):
    """A record the operator refuses; it carries the ``record`` and the ``field`` at fault.

    ``kind`` names the subclass in JSON-friendly form (``missing_field``, ``bad_value``,
    ``unknown_category``, ``time_order``, ``duplicate_reading``). Operators fill in ``record``
    when a lower layer (a generalizer, a parser) raised without knowing it.
    """

    kind: ClassVar[str] = "bad_record"

    def __init__(self, field: str | None, message: str, *, record: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.record = record

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, str(self)), {"record": self.record})

    def about(self, record: Any) -> BadRecordError:
        """Attach ``record`` (when not yet known) and return self, for ``raise exc.about(r)``."""
        if self.record is None:
            self.record = record
        return self


class MissingFieldError(BadRecordError):
    """A field the operator needs is absent or empty."""

    kind = "missing_field"

    def __init__(self, field: str, message: str | None = None, *, record: Any = None) -> None:
        super().__init__(field, message or f"missing field {field}", record=record)


class BadValueError(BadRecordError):
    """A field holds something unusable: not a number, not finite, the wrong type, too long."""

    kind = "bad_value"


class UnknownCategoryError(BadRecordError):
    """A categorical value that is not in its hierarchy (or domain) and may not be added."""

    kind = "unknown_category"


class TimeOrderError(BadRecordError):
    """The record's time is behind the operator's clock (readers re-stamp or reject first)."""

    kind = "time_order"


class DuplicateReadingError(BadRecordError):
    """A second reading of one sensor in one deZent cycle (the protocol takes one)."""

    kind = "duplicate_reading"


# -- configuration and protocol ---------------------------------------------------------------
class ConfigError(StreamanonError):
    """Parameters, rules or a configuration file that cannot run; the message names the field."""


class ProtocolError(StreamanonError):
    """A call or message out of protocol (wrong cycle, state that must exist does not)."""


# -- unreadable bytes -----------------------------------------------------------------------
class InputError(StreamanonError):
    """Bad input under ``--on-error fail``; the message names the source and line."""

    def __init__(self, rejected: Rejected, source: str = "input") -> None:
        self.rejected = rejected
        self.source = source
        super().__init__(rejected.message(source))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.rejected, self.source))


class EncodingError(StreamanonError):
    """Bytes that are not a valid encoding of a counting structure (says what is wrong)."""


class FrameError(StreamanonError):
    """A network frame that cannot be accepted; the message says why."""


# -- endpoints and runs ------------------------------------------------------------------------
class OutputError(StreamanonError):
    """An output cannot be used (it is an input, its folder is missing, ...); nothing was
    written. The message names the option and the path and says what to do."""


class EndpointError(StreamanonError):
    """An endpoint cannot be used (a topic missing, a broker unreachable, an output file that
    a Kafka run would have to overwrite); nothing was processed. The message says what to do."""


class ResumeError(StreamanonError):
    """A checkpoint that this run cannot take up (other parameters, missing outputs)."""


# -- Flink jobs ---------------------------------------------------------------------------------
class JobError(StreamanonError):
    """A Flink job that could not run, or that broke a promise of its own while it ran (its
    source lost a split, an outcome never met its input position); the message says what."""


class JobFailed(JobError):
    """What ``streamanon flink ...`` reports of a failed job (or merge of its part files):
    the message is one line."""


class OutcomeGap(JobError):
    """The part files do not hold exactly one outcome per input line (a loss or a duplicate)."""


class HelperGone(JobError):
    """The read-ahead helper process ended early (killed, crashed, or never started)."""


class KafkaJarsError(JobError):
    """The Flink Kafka connector jars could not be fetched, checked or built; the message says
    why."""
