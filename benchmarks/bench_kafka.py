"""Kafka -> operator -> Kafka throughput next to the file path, on one real broker process.

    .venv/bin/python benchmarks/bench_kafka.py             # z: 1,000,000 tuples; CASTLE: 50,000
    .venv/bin/python benchmarks/bench_kafka.py --z-n 500000 --castle-n 20000

Starts a Tansu broker (memory storage) on loopback, produces a seeded trace to a topic (one
partition), then in this process, one after another on the same input, through the pipeline
(:mod:`streamanon.pipeline`) every user drives:

* z, file -> file (``run_z``);
* z, Kafka -> Kafka, at-least-once: the same stage between a plain consumer and a plain
  producer (no position headers, no checkpoints; offsets committed at the end): what a
  pipeline costs that may repeat records after a crash;
* z, Kafka -> Kafka, exactly-once: ``run_z`` with kafka:// endpoints (a position header per
  output message, a checkpoint every 5 s: outputs acknowledged + state in the progress
  topic);
* CASTLE, file -> file vs Kafka -> Kafka exactly-once (``run_castle``).

Throughput = input tuples / wall time of the whole run, start-up included (a new idempotent
producer waits ~0.5 s for its producer id; end offsets; the final flush). The pipeline runs
on one Python thread; librdkafka's I/O threads and the broker share the machine's other
core. Every Kafka output is checked equal, message for message, to the file path's output.
Each configuration runs ``--repeat`` times, interleaved with the others, and the best time
counts (the machine is shared: the best run is the one least disturbed by other jobs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "io"))


def _read_values(bootstrap: str, topic: str) -> list[bytes]:
    from conftest import read_topic

    return [v for v, _ in read_topic(bootstrap, topic)[0]]


def at_least_once_z(bootstrap: str, inp: str, out: str, z: int, delta_t: float) -> float:
    """The same ZStage between a plain consumer and producer: no headers, no checkpoints."""
    from streamanon.pipeline.kafka.admin import create_topics
    from streamanon.pipeline.kafka.client import KafkaSink, KafkaSource
    from streamanon.pipeline.positions import MessagePositions
    from streamanon.pipeline.run import lean_gc
    from streamanon.pipeline.stages import ZStage
    from streamanon.zanon import ZAnonymizer

    create_topics(bootstrap, {out: 1})
    start = time.perf_counter()
    with lean_gc():
        source = KafkaSource(bootstrap, inp, group=f"bench-{out}", start="earliest",
                             until_end=True)
        sink = KafkaSink(bootstrap, out)
        stage = ZStage(ZAnonymizer(z=z, delta_t=delta_t), MessagePositions(f"kafka://{bootstrap}/{inp}"))
        stage.tagged = False
        source.open()
        while not source.done:
            for ch in source.poll(0.2):
                outputs, _ = stage.process_messages(ch.values, ch.offsets << 16)
                for lines in outputs.get("published", []):
                    if lines.text:
                        values = lines.text.encode().split(b"\n")
                        values.pop()
                        sink.write(0, values)
        sink.flush()
        source.commit(source.positions)
        source.close()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--z-n", type=int, default=1_000_000)
    ap.add_argument("--castle-n", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from conftest import produce, z_trace
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.data import ashrae
    from streamanon.harness.kafka_broker import Broker
    from streamanon.pipeline.kafka.admin import create_topics
    from streamanon.pipeline.kafka.options import KafkaOptions
    from streamanon.pipeline.run import run_castle, run_z
    from streamanon.zanon import ZAnonymizer

    tmp = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    print(f"load average before: {os.getloadavg()}")
    quiet = KafkaOptions(until_end=True, log=lambda s: None)
    with Broker(tmp / "broker") as broker:
        bs = f"{broker.host}:{broker.port}"
        # -- z ---------------------------------------------------------------------------
        z, dt = 5, 60.0
        trace = z_trace(args.z_n, seed=args.seed, users=2000, values=200)
        create_topics(bs, {"z-in": 1})
        produce(bs, "z-in", trace)
        src = tmp / "z.csv"
        src.write_bytes(b"t,u,a\n" + b"\n".join(trace) + b"\n")
        run_z(src, tmp / "warm-out.csv",
              ZAnonymizer(z=z, delta_t=dt))  # warm-up: lazy imports, page cache
        file_s = alo_s = eos_s = float("inf")
        for i in range(args.repeat):
            t0 = time.perf_counter()
            stats = run_z(src, tmp / "z-out.csv", ZAnonymizer(z=z, delta_t=dt))
            file_s = min(file_s, time.perf_counter() - t0)
            alo_s = min(alo_s, at_least_once_z(bs, "z-in", f"z-alo-out{i}", z, dt))
            t0 = time.perf_counter()
            eos = run_z(f"kafka://{bs}/z-in", f"kafka://{bs}/z-eos-out{i}",
                        ZAnonymizer(z=z, delta_t=dt), kafka=quiet)
            eos_s = min(eos_s, time.perf_counter() - t0)
        expected = (tmp / "z-out.csv").read_bytes().splitlines()[1:]
        for name in ("z-eos-out0", "z-alo-out0"):
            assert _read_values(bs, name) == expected, f"{name} differs from the file path"
        n = stats.read
        f, e, a = n / file_s, n / eos_s, n / alo_s
        print(f"\nz (z={z}, Δt={dt:g} s), {n:,} tuples, {stats.published:,} published, "
              f"one input partition; best of {args.repeat}")
        print(f"  file -> file                        {f:>12,.0f} tuples/s  ({file_s:.2f} s)")
        print(f"  Kafka -> Kafka, at-least-once       {a:>12,.0f} tuples/s  ({alo_s:.2f} s)")
        print(f"  Kafka -> Kafka, exactly-once        {e:>12,.0f} tuples/s  ({eos_s:.2f} s, "
              f"{eos.details['delivery']['checkpoints_written']} checkpoints)")
        print(f"  exactly-once / at-least-once = {e / a:.2f}; exactly-once / file = "
              f"{e / f:.2f}; target >= 200,000 tuples/s: "
              f"{'met' if e >= 200_000 else 'NOT met'}")
        # -- CASTLE ------------------------------------------------------------------------
        data = ashrae.write_csv(tmp / "castle.csv", ashrae.generate(args.castle_n,
                                                                     seed=args.seed))
        rules_file = tmp / "rules.toml"
        rules_file.write_text(ashrae.rules_toml())
        lines = data.read_bytes().splitlines()
        create_topics(bs, {"c-in": 1})
        produce(bs, "c-in", lines)  # the header first: the pipeline takes it as its header
        k, l, delta = 5, 2, 1250  # noqa: E741

        def castle_op() -> CastleAnonymizer:
            return CastleAnonymizer(RuleSet.load(rules_file), k=k, l=l, delta=delta, beta=50,
                                    mu=100, zeta=10)

        cfile_s = ceos_s = float("inf")
        for i in range(args.repeat):
            t0 = time.perf_counter()
            cstats = run_castle(data, tmp / "c-out.csv", castle_op())
            cfile_s = min(cfile_s, time.perf_counter() - t0)
            t0 = time.perf_counter()
            run_castle(f"kafka://{bs}/c-in", f"kafka://{bs}/c-eos-out{i}", castle_op(),
                       kafka=quiet)
            ceos_s = min(ceos_s, time.perf_counter() - t0)
        assert _read_values(bs, "c-eos-out0") == (tmp / "c-out.csv").read_bytes().splitlines(
        )[1:], "CASTLE Kafka output differs from the file path"
        cn = cstats.read
        cf, ce = cn / cfile_s, cn / ceos_s
        print(f"\nCASTLE (k={k}, l={l}, δ={delta}), {cn:,} ASHRAE-shaped rows, "
              f"{cstats.published:,} released; best of {args.repeat}")
        print(f"  file -> file                        {cf:>12,.0f} tuples/s  ({cfile_s:.2f} s)")
        print(f"  Kafka -> Kafka, exactly-once        {ce:>12,.0f} tuples/s  ({ceos_s:.2f} s)")
        print(f"  Kafka / file = {ce / cf:.2f} (target >= 0.8: "
              f"{'met' if ce / cf >= 0.8 else 'NOT met'})")
        broker.stop(kill=True)
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
