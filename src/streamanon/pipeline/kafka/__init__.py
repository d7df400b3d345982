"""``kafka://`` endpoints of the pipeline.

* :mod:`~streamanon.pipeline.kafka.options` — URLs,
  :class:`~streamanon.pipeline.kafka.options.KafkaOptions`, default groups.
* :mod:`~streamanon.pipeline.kafka.admin` — topics: their partitions, creating them.
* :mod:`~streamanon.pipeline.kafka.client` — the source of raw messages and the sink of
  text messages (librdkafka clients, broker outages, stop signals).
* :mod:`~streamanon.pipeline.kafka.exactly_once` — exactly-once runs without transactions.
* :mod:`~streamanon.pipeline.kafka.run` — :func:`~streamanon.pipeline.kafka.run.run_kafka`,
  a stage from a topic to its outputs.
"""
