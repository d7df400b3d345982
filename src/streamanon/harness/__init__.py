"""Local harnesses: throw-away brokers, database servers and whole sites on loopback.

Nothing here is part of a deployment. These modules start real processes (a Kafka-compatible
broker, a PostgreSQL server, a local deZent site and its sensor replay) for try-outs, the demo,
the tests and the benchmarks, and remove what they made when they stop.
"""
