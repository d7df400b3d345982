"""Your own PyFlink job: your KafkaSource, streamanon's z-anonymity, your KafkaSink.

Run: python flink_kafka_job.py HOST:PORT IN_TOPIC OUT_TOPIC --z 5 --delta-t 3600
tests/flink/test_user_kafka_job.py runs it against a real broker (the Flink guide shows it).
"""

from __future__ import annotations

import argparse

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.serialization import SimpleStringSchema
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DeliveryGuarantee
from pyflink.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)

import streamanon.flink
from streamanon.flink.kafka_jars import ensure_jars, jar_urls


def parse(line: str) -> dict:
    """A ``t,u,a`` message as the record the operator takes (a dict of named fields)."""
    t, u, a = line.split(",", 2)
    return {"t": t, "u": u, "a": a}


def build(env: StreamExecutionEnvironment, *, bootstrap: str, source_topic: str,
          sink_topic: str, z: int, delta_t: float) -> None:
    """Add the pipeline to ``env``: topic -> records -> z-anonymity -> topic."""
    source = (KafkaSource.builder()
              .set_bootstrap_servers(bootstrap)
              .set_topics(source_topic)
              .set_group_id("my-anonymizer")
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_value_only_deserializer(SimpleStringSchema())
              .build())
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "my topic")
    records = lines.map(parse, output_type=Types.PICKLED_BYTE_ARRAY())

    released = streamanon.flink.z_anonymize(records, z=z, delta_t=delta_t)

    texts = released.map(lambda r: f"{r['t']},{r['u']},{r['a']}", output_type=Types.STRING())
    sink = (KafkaSink.builder()
            .set_bootstrap_servers(bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder()
                                   .set_topic(sink_topic)
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
            .build())
    texts.sink_to(sink)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("source_topic")
    parser.add_argument("sink_topic")
    parser.add_argument("--z", type=int, required=True)
    parser.add_argument("--delta-t", type=float, required=True)
    args = parser.parse_args()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.add_jars(*jar_urls(ensure_jars()))  # Flink's Kafka connector (fetched at first use)
    env.enable_checkpointing(10_000)  # the operator's state is checkpointed with the job's
    build(env, bootstrap=args.bootstrap, source_topic=args.source_topic,
          sink_topic=args.sink_topic, z=args.z, delta_t=args.delta_t)
    env.execute("my z-anonymized topic")


if __name__ == "__main__":
    main()
