"""streamanon on Apache Flink: PyFlink functions and job builders (the ``flink`` extra).

Importing this package needs nothing beyond the core. The modules, each depending only on
those after it: the jobs, :mod:`.z_job` and :mod:`.castle_job` (each with its file/TCP and
its Kafka variant); :mod:`.kafka_connector` (``kafka://`` sources and sinks, with the jars of
:mod:`.kafka_jars`) and :mod:`.runtime` (endpoints, job options, routing, file and TCP
sources, part-file sinks, running a job); the PyFlink functions, :mod:`.castle` and
:mod:`.functions`, their Flink state in :mod:`.state`. The modules that touch PyFlink import
it when they are imported (:mod:`.runtime` and :mod:`.env` only when a job is built), while
:mod:`.splits` (file splits), :mod:`.zbatch` (z batches: parsing, key groups, the per-group
operator), :mod:`.castle_rows` (CASTLE batches and outcomes) and :mod:`.outcomes` (outcome
lines and batches, the merge of a job's part files) need no PyFlink.

Records cross between the JVM and Python, and between tasks, in batches only::

    file: split numbers -> ReadSplits  |  stream: lines -> BatchLines     (parallelism 1)
        -> (key group, batch) -> keyed operator per key group             (parallelism p)
        -> outcome batches / lines -> exactly-once part files -> merged -o file

* z-anonymity: :func:`streamanon.flink.z_job.run_z_job` (``streamanon flink z``), keyed by 128
  key groups of the coarsest hierarchy level, output identical to ``streamanon z``.
* CASTLE: :func:`streamanon.flink.castle_job.run_castle_job` (``streamanon flink castle``), a keyed
  broadcast operator over ``crc32(id) mod partitions`` with the rules on a broadcast stream;
  per partition it releases exactly what ``streamanon castle`` releases on that partition.

Another source can feed the same keyed operators: a stream of lines goes through
:class:`~streamanon.flink.functions.BatchLines` (see
:func:`streamanon.flink.runtime.batch_source`), or a source emits ``(key group, batch)``
pairs itself with the chunk parsers of :mod:`.zbatch` and :mod:`.castle_rows`, as
:func:`streamanon.flink.kafka_connector.kafka_batches` does.

Submitting to a Flink 2.3 cluster (tried against a standalone cluster started with
``start-cluster.sh``, see :mod:`.standalone`): install streamanon with the extra into the same
path on the client and on every TaskManager, put input and ``--work-dir`` on a filesystem all of
them see, and run::

    flink run -m JOBMANAGER:8081 -pyclientexec /opt/venv/bin/python \\
        -pyexec /opt/venv/bin/python -pym streamanon.flink \\
        z --z 5 --delta-t 3600 -p 8 /shared/trace.csv \\
        --work-dir /shared/run1 -o /shared/published.csv

``python -m streamanon.flink`` is ``streamanon flink``; the client merges the part files into
``-o`` when the job ends (or run ``streamanon flink merge /shared/run1/parts -o out.csv``).
Thread mode (the default) on a cluster needs the TaskManagers started with ``PYTHONPATH``
naming the environment's site-packages (see :mod:`.env`) and Flink's ``opt/flink-python*.jar``
in their ``lib`` with ``classloader.parent-first-patterns.additional: pemja.`` (else the second
job on a TaskManager cannot load the embedded interpreter); :mod:`.standalone` does both.
"""
