"""z-anonymity inside your own PyFlink job: your KafkaSource, streamanon's operator, your
KafkaSink.

Messages of the input topic are JSON objects ``{"t": ..., "u": ..., "a": ...}`` (any other
fields ride along); the output topic gets the released ones, ``a`` generalized.

    python docs/examples/flink_operator_job.py --bootstrap localhost:9092 \\
        --input events --output events.anon --z 5 --delta-t 600 [--bounded]

``--bounded`` reads the topic up to its end offsets at the start and ends; without it the
job runs until cancelled. The Kafka connector's jars come from
``python -m streamanon.flink.kafka_jars`` (fetched and checked once); any other copy of
flink-connector-kafka for Flink 2 works too.
"""

from __future__ import annotations

import argparse
import json

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.serialization import SimpleStringSchema
from pyflink.datastream.connectors.base import DeliveryGuarantee
from pyflink.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)

from streamanon.flink import z_anonymize
from streamanon.flink.env import make_env
from streamanon.flink.kafka_jars import ensure_jars, jar_urls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--z", type=int, default=5)
    ap.add_argument("--delta-t", type=float, default=600.0)
    ap.add_argument("--bounded", action="store_true")
    args = ap.parse_args()

    # make_env: the worker interpreter is this one, Python in the TaskManager's threads
    env = make_env(parallelism=1, checkpoint_interval_ms=1000)
    env.add_jars(*jar_urls(ensure_jars()))

    source = (KafkaSource.builder()
              .set_bootstrap_servers(args.bootstrap)
              .set_topics(args.input)
              .set_property("partition.discovery.interval.ms", "-1")
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_value_only_deserializer(SimpleStringSchema()))
    if args.bounded:
        source = source.set_bounded(KafkaOffsetsInitializer.latest())
    sink = (KafkaSink.builder()
            .set_bootstrap_servers(args.bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder()
                                   .set_topic(args.output)
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
            .build())

    records = (env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "events")
               .map(json.loads, output_type=Types.PICKLED_BYTE_ARRAY()))
    released = z_anonymize(records, z=args.z, delta_t=args.delta_t)
    released.map(json.dumps, output_type=Types.STRING()).sink_to(sink)
    env.execute("anonymize events")


if __name__ == "__main__":
    main()
