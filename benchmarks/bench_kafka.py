"""Kafka -> operator -> Kafka throughput vs the file path, on one real broker process.

    .venv/bin/python benchmarks/bench_kafka.py             # z: 500,000 tuples; CASTLE: 20,000
    .venv/bin/python benchmarks/bench_kafka.py --z-n 1000000 --castle-n 50000

Starts a Tansu broker (memory storage) on loopback, produces a seeded trace to a topic (one
partition), then in this process, one after another on the same input:

* z, file path (``run_z``: file -> operator -> file);
* z, Kafka -> Kafka exactly-once (:class:`ExactlyOnceRun`, a checkpoint every 5 s: flush +
  pickled state in the progress topic);
* z, Kafka -> Kafka without periodic checkpoints (one snapshot at the start and the end: the
  same consume/produce path with at-least-once cost, i.e. what exactly-once adds is the
  difference);
* CASTLE, file path vs Kafka -> Kafka exactly-once.

Throughput = input tuples / wall time of the whole run (start-up, end-offset discovery and
the final flush included). The pipeline runs on one Python thread; librdkafka's I/O threads
and the broker share the machine's other core. Each Kafka output is checked equal to the
file path's output.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "io"))


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    from streamanon.io.kafka_broker import quiet_logs

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 2_000_000, **quiet_logs()})
    for v in values:
        while True:
            try:
                p.produce(topic, v, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def _read_values(bootstrap: str, topic: str) -> list[bytes]:
    from conftest import read_topic

    return [v for v, _ in read_topic(bootstrap, topic)[0]]


def _kafka_run(bootstrap: str, inp: str, names: list[str], make_stage, every: float,
               fetch: int = 50_000) -> tuple[float, dict]:
    from streamanon.io.kafka import KafkaSink, KafkaSource
    from streamanon.io.kafka_broker import create_topics
    from streamanon.io.kafka_eos import ExactlyOnceRun, ProgressLog

    create_topics(bootstrap, {n: 1 for n in names})
    start = time.perf_counter()
    source = KafkaSource(bootstrap, inp, group=f"bench-{names[0]}", start="earliest",
                         until_end=True, fetch_batch=fetch)
    sinks = {"published": KafkaSink(bootstrap, names[0]),
             "rejects": KafkaSink(bootstrap, names[1])}
    run = ExactlyOnceRun(source, sinks, ProgressLog(bootstrap, names[2]), make_stage,
                         checkpoint_every=every)
    summary = run.run()
    return time.perf_counter() - start, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--z-n", type=int, default=500_000)
    ap.add_argument("--castle-n", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    from conftest import z_trace
    from streamanon.castle import CastleAnonymizer, RuleSet
    from streamanon.cli.castle import run_castle
    from streamanon.cli.zanon import run_z
    from streamanon.data import ashrae
    from streamanon.io.kafka_broker import Broker, create_topics
    from streamanon.io.kafka_run import CastleStage, ZStage
    from streamanon.zanon import ZAnonymizer

    tmp = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    print(f"load average before: {os.getloadavg()}")
    with Broker(tmp / "broker") as broker:
        bs = broker.bootstrap
        # -- z ---------------------------------------------------------------------------
        z, dt = 5, 60.0
        trace = z_trace(args.z_n, seed=args.seed, users=2000, values=200)
        create_topics(bs, {"z-in": 1})
        _produce(bs, "z-in", trace)
        src = tmp / "z.csv"
        src.write_bytes(b"t,u,a\n" + b"\n".join(trace) + b"\n")
        t0 = time.perf_counter()
        stats = run_z(src, tmp / "z-out.csv", ZAnonymizer(z=z, delta_t=dt))
        file_s = time.perf_counter() - t0
        expected = (tmp / "z-out.csv").read_bytes().splitlines()[1:]

        def z_stage() -> ZStage:
            return ZStage(ZAnonymizer(z=z, delta_t=dt), source="kafka z-in")

        eos_s, eos = _kafka_run(bs, "z-in", ["z-eos-out", "z-eos-rej", "z-eos-prog"], z_stage,
                                5.0)
        alo_s, _ = _kafka_run(bs, "z-in", ["z-alo-out", "z-alo-rej", "z-alo-prog"], z_stage,
                                math.inf)
        for name in ("z-eos-out", "z-alo-out"):
            assert _read_values(bs, name) == expected, f"{name} differs from the file path"
        n = stats.read
        f, e, a = n / file_s, n / eos_s, n / alo_s
        print(f"\nz (z={z}, Δt={dt:g} s), {n:,} tuples, {stats.published:,} published, "
              "one input partition")
        print(f"  file -> file                         {f:>12,.0f} tuples/s  ({file_s:.2f} s)")
        print(f"  Kafka -> Kafka, exactly-once          {e:>12,.0f} tuples/s  ({eos_s:.2f} s, "
              f"{eos['delivery']['checkpoints_written']} checkpoints)")
        print(f"  Kafka -> Kafka, no periodic checkpoint {a:>11,.0f} tuples/s  ({alo_s:.2f} s)")
        print(f"  exactly-once / no-checkpoint = {e / a:.2f}; exactly-once / file = {e / f:.2f}; "
              f"target >= 200,000 tuples/s: {'met' if e >= 200_000 else 'NOT met'}")
        # -- CASTLE ------------------------------------------------------------------------
        data = ashrae.write_csv(tmp / "castle.csv", ashrae.generate(args.castle_n,
                                                                     seed=args.seed))
        rules_file = tmp / "rules.toml"
        rules_file.write_text(ashrae.rules_toml())
        header, *lines = data.read_bytes().splitlines()
        create_topics(bs, {"c-in": 1})
        _produce(bs, "c-in", lines)
        k, l, delta = 5, 2, 1250  # noqa: E741

        def castle_op() -> CastleAnonymizer:
            return CastleAnonymizer(RuleSet.load(rules_file), k=k, l=l, delta=delta, beta=50,
                                    mu=100, zeta=10)

        t0 = time.perf_counter()
        cstats = run_castle(data, tmp / "c-out.csv", castle_op())
        cfile_s = time.perf_counter() - t0

        def c_stage() -> CastleStage:
            return CastleStage(castle_op(), source="kafka c-in",
                               columns=header.decode().split(","))

        ceos_s, _ = _kafka_run(bs, "c-in", ["c-eos-out", "c-eos-rej", "c-eos-prog"], c_stage,
                               5.0, fetch=5_000)
        assert _read_values(bs, "c-eos-out") == (tmp / "c-out.csv").read_bytes().splitlines(
        )[1:], "CASTLE Kafka output differs from the file path"
        cn = cstats.read
        cf, ce = cn / cfile_s, cn / ceos_s
        print(f"\nCASTLE (k={k}, l={l}, δ={delta}), {cn:,} ASHRAE-shaped rows, "
              f"{cstats.published:,} released")
        print(f"  file -> file                         {cf:>12,.0f} tuples/s  ({cfile_s:.2f} s)")
        print(f"  Kafka -> Kafka, exactly-once          {ce:>12,.0f} tuples/s  ({ceos_s:.2f} s)")
        print(f"  Kafka / file = {ce / cf:.2f} (target >= 0.8: "
              f"{'met' if ce / cf >= 0.8 else 'NOT met'})")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
