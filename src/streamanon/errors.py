"""Every error streamanon raises on purpose, under one roof.

>>> err = MissingFieldError("age", record={"u": "a"})
>>> isinstance(err, BadRecordError), err.kind, err.field, str(err)
(True, 'missing_field', 'age', 'missing field age')
>>> try:
...     raise UnknownCategoryError("city", "unknown category 'Rome'")
... except BadRecordError as exc:
...     print(exc.kind, exc)
unknown_category unknown category 'Rome'

Design: docs/design/core.md
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from streamanon.records import Rejected

if TYPE_CHECKING:
    from streamanon.pipeline.positions import Positions

__all__ = [
    "BadInputError",
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
    "UnreadableInputError",
    "UnreadableMessagesError",
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


class UnreadableInputError(InputError):
    """The input as a whole cannot be read (not text, no usable header, no line ends):
    ``--on-error skip`` cannot help, the file itself must be fixed or converted."""


class BadInputError(InputError):
    """A bad record under ``--on-error fail``, named by its position (line, or partition and
    offset): the run stops after writing what came before it."""

    def __init__(self, rejected: Rejected, positions: Positions) -> None:
        super().__init__(rejected, positions.name)
        self.where = positions.where(rejected.line)
        snippet = rejected.text if len(rejected.text) <= 80 else rejected.text[:77] + "..."
        self.args = (f"{self.where}: {rejected.reason}: {snippet!r}",)


class UnreadableMessagesError(UnreadableInputError):
    """A topic whose messages cannot be read at all (no usable CSV header)."""

    def __init__(self, rejected: Rejected, positions: Positions) -> None:
        super().__init__(rejected, positions.name)
        self.args = (f"{positions.where(rejected.line)}: {rejected.reason}: "
                     f"{rejected.text[:80]!r}",)


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


class CheckpointRefusedError(ResumeError):
    """A checkpoint in a progress topic that is not loaded: not signed with the run's
    checkpoint key, corrupted, or in a format that could run code. The message names the
    topic, partition and offset; nothing of it was executed."""


class CredentialError(StreamanonError):
    """A key, certificate or CRL of a deZent deployment that cannot be used (not PEM, not an EC
    key, not issued or signed by this CA, a CA certificate to revoke); the message names the
    file."""


class BrokerError(StreamanonError, RuntimeError):
    """A Kafka broker failed a run's read or write (a fatal client error, a topic that cannot
    be created or did not appear), or a local test broker could not be found or started."""


class BrokerTimeout(StreamanonError, TimeoutError):
    """A Kafka broker did not answer a read in time (end offsets, a topic's tail, a progress
    log); an :class:`OSError` like every timeout."""


class ForeignOutputError(StreamanonError, RuntimeError):
    """An output topic holds, past the checkpoint, a message this pipeline would not write
    there: another writer, or a changed pipeline. Nothing more was written to it."""


class CheckpointKeyError(EndpointError):
    """The checkpoint key file cannot be used (missing, unreadable, too short, readable by
    other users); the message names the file and says what to do."""


# -- deZent publication, the daemons and the local harnesses ---------------------------------
class PublicationError(ProtocolError):
    """What the deZent publication step (its order and the mix) refuses: a message or batch
    out of protocol. The mix's :class:`MixError` derives from it."""


class MixError(PublicationError):
    """A tuple that cannot be sealed, an item that cannot be opened, a bad mix key or batch."""


class StoreUnavailable(StreamanonError, RuntimeError):
    """The CE's database cannot take a batch now (nothing of the batch was committed).

    A state of the world, not of the batch: it is also a :class:`RuntimeError`."""


class WorkdirInUse(StreamanonError, RuntimeError):
    """A local site's work folder holds an earlier run (or nothing to resume); nothing was
    changed. The message says what to do (``--force`` or ``--resume``)."""


class SiteStartError(StreamanonError, RuntimeError):
    """A local site's process exited at start-up, or the site was not up in time; every
    process of it was stopped. The message names the log to read."""


class NoServer(StreamanonError, RuntimeError):
    """No throw-away PostgreSQL server can be started here (binaries missing, root)."""


class CheckerFailure(StreamanonError, RuntimeError):
    """An independent checker found a violation in streamanon's own output: a bug."""


__all__ += ["BrokerError", "BrokerTimeout", "CheckerFailure", "CheckpointKeyError",
            "CheckpointRefusedError", "ConformanceError", "CredentialError",
            "ForeignOutputError", "MixError", "NoServer", "PublicationError", "SiteStartError",
            "StoreUnavailable", "Terminated", "WorkdirInUse"]


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


# -- outside the ValueError family --------------------------------------------------------------
class ConformanceError(AssertionError):
    """An operator broke its contract; the message says which rule and where
    (:mod:`streamanon.conformance`)."""


class Terminated(BaseException):
    """Raised in the main thread when the process receives SIGTERM inside an
    :class:`~streamanon.pipeline.file_outputs.OutputSet`, so that the temporary files are
    removed as on Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


class StoppedInOutage(EndpointError):
    """A stop signal arrived while the broker did not answer: the run stops without a
    checkpoint (``signal``: the signal's number); the next run resumes from the last one."""

    def __init__(self, text: str, signal: int) -> None:
        super().__init__(text)
        self.signal = signal


__all__ += ["StoppedInOutage"]


class KafkaConfigError(ConfigError):
    """A ``--kafka-config`` file that cannot be read or holds a line that is no setting."""


__all__ += ["KafkaConfigError"]
