"""Internal driver: z or CASTLE from a topic to topics, exactly once (until the CLI has it).

``python -m streamanon.io.kafka_run z --bootstrap HOST:PORT --input IN --output OUT
--rejects REJ --progress PROG --z 5 --delta-t 3600 [--until-end]`` (``castle --rules R --k ..
--columns id,age,..`` likewise). It prints the run's summary as one JSON object. Phase B
replaces it by ``streamanon z|castle kafka://...``; the stages below are what the pipeline
module will hold.

Stages apply the same rules as the file path, on message text: :func:`check_messages` first
(empty, oversized, not UTF-8, several lines), then the readers' rules (``io.readers`` for
``t,u,a``, ``io.rows`` for CASTLE rows) with the same reasons; a reject names the message by
partition and offset and goes to the rejects topic as JSON (``source, partition, offset,
reason, text``). ``on_error="fail"`` processes the records before the first bad message, then
stops (exit 2) naming it; a rerun stops at the same message.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from streamanon.castle import CastleAnonymizer, Released, RuleSet, Suppression
from streamanon.castle.cluster import Row
from streamanon.io.kafka import (
    DEFAULT_MAX_MESSAGE_BYTES,
    KafkaSink,
    KafkaSource,
    MessageReject,
    Outputs,
    StopFlag,
    check_messages,
)
from streamanon.io.kafka_eos import ExactlyOnceRun, MergedBatch, ProgressLog
from streamanon.io.policy import OnError
from streamanon.io.readers import DEFAULT_MAX_VALUE_LEN, RecordBatch, _Reader
from streamanon.io.rows import RowReader, RowWriter
from streamanon.io.writers import RecordWriter
from streamanon.records import Rejected, Suppressed
from streamanon.zanon import ZAnonymizer


class KafkaInputError(ValueError):
    """A bad message under ``on_error=fail``; names the partition and offset."""

    def __init__(self, reject: MessageReject, source: str) -> None:
        self.reject = reject
        super().__init__(reject.message(source))


def _lines(text: str, header: bool) -> list[bytes]:
    data = text.encode("utf-8").split(b"\n")
    if data and data[-1] == b"":
        data.pop()
    return data[1:] if header else data


class _Rejects:
    """Rejects of one batch, by merged index, turned into JSON messages in input order."""

    def __init__(self, batch: MergedBatch, source: str) -> None:
        self.batch, self.source = batch, source
        self.items: list[tuple[int, MessageReject]] = []

    def add(self, m: int, text: str, reason: str) -> None:
        self.items.append((m, MessageReject(int(self.batch.partitions[m]),
                                            int(self.batch.offsets[m]), text, reason)))

    def first(self) -> int | None:
        return min(m for m, _ in self.items) if self.items else None

    def emit(self, out: Outputs, before: int | None = None) -> int:
        items = sorted((x for x in self.items if before is None or x[0] < before),
                       key=lambda x: x[0])
        out.add("rejects", [json.dumps(r.to_json(self.source)).encode() for _, r in items],
                [r.partition for _, r in items], [r.offset for _, r in items])
        return len(items)


class ZStage:
    """z-anonymity on ``t,u,a`` messages (CSV line or JSON object), via the batch engine."""

    def __init__(self, operator: ZAnonymizer, *, source: str, in_format: str = "csv",
                 out_format: str = "csv", on_error: OnError | str = OnError.skip,
                 time_tolerance: float = 0.0, max_value_len: int = DEFAULT_MAX_VALUE_LEN,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.op = operator
        self.source = source
        self.in_format, self.out_format = in_format, out_format
        self.on_error = OnError(on_error)
        self.tol, self.max_len, self.max_bytes = time_tolerance, max_value_len, max_message_bytes
        self.clock = -math.inf
        self.read = self.rejected = self.restamped = 0

    def _reader(self) -> _Reader:
        r = _Reader(self.in_format, OnError.skip, None, self.tol, self.max_len, self.source)
        r.header = (0, 1, 2)
        r.clock = self.clock
        return r

    def _parse(self, good: list[str]) -> tuple[RecordBatch, list[Rejected]]:
        reader = self._reader()
        if self.in_format == "csv":
            fast = reader.fast_csv_chunk(0, "\n".join(good).encode("utf-8"))
            if fast is not None:
                self.clock = reader.clock
                return fast, []
            batch, rejects = reader.finish(reader.csv_chunk(0, "\n".join(good)))
        else:
            batch, rejects = reader.finish(reader.jsonl_chunk(0, "\n".join(good)))
        self.clock = reader.clock
        return batch, rejects

    def process(self, batch: MergedBatch) -> tuple[Outputs, Exception | None]:
        out = Outputs()
        good_i, good_t, bad = check_messages(batch.values, self.max_bytes)
        rej = _Rejects(batch, self.source)
        for m, (text, reason) in bad.items():
            rej.add(m, text, reason)
        rb: RecordBatch | None = None
        if good_t:
            rb, reader_rejects = self._parse(good_t)
            for r in reader_rejects:
                rej.add(good_i[r.line], r.text, r.reason)
        stop = rej.first() if self.on_error is OnError.fail else None
        n_read = len(batch) if stop is None else stop
        if rb is not None and len(rb):
            merged = np.asarray(good_i, dtype=np.int64)[np.asarray(rb.line, dtype=np.int64)]
            if stop is not None:
                n = int(np.searchsorted(merged, stop))
                rb = RecordBatch(rb.t[:n], rb.t_text[:n], rb.u[:n], rb.a[:n],
                                 list(rb.line[:n]))
                merged = merged[:n]
            if len(rb):
                idx, codes, names = self.op.process_codes(rb.t, *rb.codes())
                buf = io.StringIO()
                RecordWriter(buf, self.out_format).write_selected(rb, idx, codes, names)
                values = _lines(buf.getvalue(), self.out_format == "csv")
                src = merged[idx]
                out.add("published", values, batch.partitions[src].tolist(),
                        batch.offsets[src].tolist())
                self.restamped += rb.restamped
        self.rejected += rej.emit(out, stop)
        self.read += n_read
        if stop is not None:
            first = min((r for m, r in rej.items if m == stop), key=lambda r: r.offset)
            return out, KafkaInputError(first, self.source)
        return out, None

    def finish(self) -> Outputs:
        return Outputs()  # zero delay: nothing is held

    def summary(self) -> dict[str, Any]:
        op = self.op
        return {"params": {"z": op.z, "delta_t": op.delta_t, "input": self.source},
                "read": self.read, "published": op.published, "suppressed": op.suppressed,
                "rejected": self.rejected,
                "balanced": self.read == op.published + op.suppressed + self.rejected,
                "restamped": self.restamped,
                "published_per_level": {f"level_{i}": n
                                        for i, n in enumerate(op.published_per_level)}}


def _code(partition: int, offset: int) -> int:
    return (offset << 16) | partition


def _where(code: int) -> tuple[int, int]:
    return code & 0xFFFF, code >> 16


class CastleStage:
    """CASTLE on rows (CSV line under ``columns``, or JSON object), one row at a time."""

    def __init__(self, operator: CastleAnonymizer, *, source: str,
                 columns: Sequence[str] | None, in_format: str = "csv",
                 out_format: str = "csv", on_error: OnError | str = OnError.skip,
                 max_value_len: int = DEFAULT_MAX_VALUE_LEN,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        rules = operator.rules
        if rules is None:
            raise ValueError("the operator has no rules")
        if in_format == "csv" and not columns:
            raise ValueError("CSV messages need the column names (columns=...)")
        self.op = operator
        self.source = source
        self.columns = list(columns or [])
        self.in_format, self.out_format = in_format, out_format
        self.on_error = OnError(on_error)
        self.max_len, self.max_bytes = max_value_len, max_message_bytes
        self.numeric = [r.name for r in rules.qi_rules
                        if type(r.generalizer).__name__ == "RangeGeneralizer"]
        self.id_field = rules.id_field
        self.read = self.rejected = 0

    def _writer(self, buf: io.StringIO, reason: bool = False) -> RowWriter:
        extra = [self.op.loss_field] if self.op.loss_field else []
        return RowWriter(buf, self.out_format,
                         [*self.columns, *extra, *(["reason"] if reason else [])])

    def _emit(self, items: list[Any], out: Outputs) -> None:
        pub, pub_w = io.StringIO(), None
        sup, sup_w = io.StringIO(), None
        pub_at: list[tuple[int, int]] = []
        sup_at: list[tuple[int, int]] = []
        for x in items:
            if isinstance(x, Suppressed):
                rec = x.record
                vals = dict(rec.values)
                vals["reason"] = x.reason
                sup_w = sup_w or self._writer(sup, reason=True)
                sup_w.write(vals)
                sup_at.append(_where(rec.line))
                continue
            assert isinstance(x, Released)
            pub_w = pub_w or self._writer(pub)
            pub_w.write(x.values)
            pub_at.append(_where(x.line or 0))
        header = self.out_format == "csv"
        if pub_at:
            out.add("published", _lines(pub.getvalue(), header), [p for p, _ in pub_at],
                    [o for _, o in pub_at])
        if sup_at:
            out.add("suppressed", _lines(sup.getvalue(), header), [p for p, _ in sup_at],
                    [o for _, o in sup_at])

    def process(self, batch: MergedBatch) -> tuple[Outputs, Exception | None]:
        out = Outputs()
        good_i, good_t, bad = check_messages(batch.values, self.max_bytes)
        rej = _Rejects(batch, self.source)
        for m, (text, reason) in bad.items():
            rej.add(m, text, reason)
        fail = self.on_error is OnError.fail
        stop: int | None = None
        released: list[Any] = []
        if good_t:
            first_line = 2 if self.in_format == "csv" else 1
            head = ",".join(self.columns) + "\n" if self.in_format == "csv" else ""
            found: list[Rejected] = []  # the reader's rejects, in line order, as it meets them
            reader = RowReader(io.StringIO(head + "\n".join(good_t)), self.in_format,
                               on_error=OnError.skip, rejects=found.append,
                               numeric=self.numeric, required=[self.id_field],
                               max_value_len=self.max_len, source_name=self.source)
            for row in reader:
                m = good_i[(row.line or first_line) - first_line]
                for r in found:
                    rej.add(good_i[r.line - first_line], r.text, r.reason)
                found.clear()
                first = rej.first()
                if fail and first is not None and first < m:
                    stop = first
                    break
                p, o = int(batch.partitions[m]), int(batch.offsets[m])
                try:
                    released += self.op.process(Row(row.values, _code(p, o)))
                except ValueError as exc:
                    rej.add(m, reader.text_of(row.values), str(exc))
                    if fail:
                        stop = m
                        break
            for r in found:
                rej.add(good_i[r.line - first_line], r.text, r.reason)
            if self.in_format == "jsonl":
                self.columns += [c for c in reader.columns if c not in self.columns]
        if fail and stop is None:
            stop = rej.first()
        self._emit(released, out)
        # under fail the bad message is neither read nor rejected (as for files): the run stops
        self.rejected += rej.emit(out, stop)
        self.read += len(batch) if stop is None else stop
        if stop is not None:
            first_bad = min((r for m, r in rej.items if m == stop), key=lambda r: r.offset)
            return out, KafkaInputError(first_bad, self.source)
        return out, None

    def finish(self) -> Outputs:
        out = Outputs()
        self._emit(self.op.flush(), out)
        return out

    def summary(self) -> dict[str, Any]:
        s = self.op.summary()
        op = self.op
        suppressed = s["suppressed"]
        return {"params": {"k": op.k, "l": op.l, "delta": op.delta, "beta": op.beta,
                           "mu": op.mu, "zeta": op.zeta, "input": self.source},
                "read": self.read, "published": s["released"], "suppressed": suppressed,
                "rejected": self.rejected, "held": s["held"],
                "balanced": self.read == s["released"] + suppressed + self.rejected
                + s["held"],
                "suppressed_by_reason": s["suppressed_by_reason"],
                "clusters_released": s["clusters_released"]}


# -- the internal command ----------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m streamanon.io.kafka_run",
                                 description="Internal: topic -> operator -> topics, exactly "
                                 "once (replaced by `streamanon z|castle kafka://...`).")
    sub = ap.add_subparsers(dest="op", required=True)
    for name in ("z", "castle"):
        p = sub.add_parser(name)
        p.add_argument("--bootstrap", required=True)
        p.add_argument("--input", required=True)
        p.add_argument("--output", required=True)
        p.add_argument("--rejects", required=True)
        p.add_argument("--progress", required=True)
        p.add_argument("--group", default=None)
        p.add_argument("--from", dest="start", choices=["earliest", "committed"],
                       default="committed")
        p.add_argument("--until-end", action="store_true")
        p.add_argument("--format", default="csv", choices=["csv", "jsonl"])
        p.add_argument("--out-format", default="csv", choices=["csv", "jsonl"])
        p.add_argument("--on-error", default="skip", choices=["skip", "fail"])
        p.add_argument("--checkpoint-every", type=float, default=5.0)
        p.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES)
        p.add_argument("--fetch-batch", type=int, default=20_000)
        p.add_argument("--kill-after-batch", type=int, default=None,
                       help="crash tests: after batch N, wait for the outputs, then SIGKILL "
                       "self (between a produce and a checkpoint)")
        if name == "z":
            p.add_argument("--z", type=int, required=True)
            p.add_argument("--delta-t", type=float, required=True)
            p.add_argument("--time-tolerance", type=float, default=0.0)
        else:
            p.add_argument("--rules", required=True)
            p.add_argument("--columns", default=None)
            p.add_argument("--suppressed", default=None)
            p.add_argument("--k", type=int, default=5)
            p.add_argument("--l", type=int, default=2)
            p.add_argument("--delta", type=int, default=200)
            p.add_argument("--beta", type=int, default=50)
            p.add_argument("--mu", type=int, default=10)
            p.add_argument("--zeta", type=int, default=10)
            p.add_argument("--suppression", default="drop")
    return ap


def run(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    source_name = f"kafka://{args.bootstrap}/{args.input}"
    group = args.group or f"streamanon-{args.op}-{args.output}"
    stage_args = dict(source=source_name, in_format=args.format, out_format=args.out_format,
                      on_error=args.on_error, max_message_bytes=args.max_message_bytes)

    def make_stage() -> Any:
        if args.op == "z":
            return ZStage(ZAnonymizer(z=args.z, delta_t=args.delta_t),
                          time_tolerance=args.time_tolerance, **stage_args)
        rules = RuleSet.load(args.rules)
        op = CastleAnonymizer(rules, k=args.k, l=args.l, delta=args.delta, beta=args.beta,
                              mu=args.mu, zeta=args.zeta,
                              suppression=Suppression(args.suppression))
        cols = args.columns.split(",") if args.columns else None
        return CastleStage(op, columns=cols, **stage_args)

    source = KafkaSource(args.bootstrap, args.input, group=group, start=args.start,
                         until_end=args.until_end, fetch_batch=args.fetch_batch)
    sinks = {"published": KafkaSink(args.bootstrap, args.output),
             "rejects": KafkaSink(args.bootstrap, args.rejects)}
    if args.op == "castle" and args.suppressed:
        sinks["suppressed"] = KafkaSink(args.bootstrap, args.suppressed)
    progress = ProgressLog(args.bootstrap, args.progress)
    stop = StopFlag()

    def after_batch(n: int) -> None:
        if args.kill_after_batch is not None and n >= args.kill_after_batch:
            for s in sinks.values():
                s.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    runner = ExactlyOnceRun(source, sinks, progress, make_stage,
                            checkpoint_every=args.checkpoint_every, stop=stop,
                            after_batch=after_batch,
                            log=lambda s: print(f"streamanon kafka: {s}", file=sys.stderr))
    return runner.run()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        summary = run(argv)
    except KafkaInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
