"""streamanon on Apache Flink: PyFlink functions and job builders (the ``flink`` extra).

Importing this package needs nothing beyond the core; the modules that touch PyFlink
(:mod:`.env`, :mod:`.functions`, :mod:`.job`, :mod:`.castle`) import it when they are
imported, while :mod:`.lines` (line validation, z outcomes), :mod:`.castle_rows` (CASTLE rows
and outcomes) and :mod:`.outcomes` (merging a job's part files) need no PyFlink at all.

* z-anonymity: :func:`streamanon.flink.job.run_z_job` (``streamanon flink z``), keyed by the
  coarsest hierarchy level, output identical to ``streamanon z``.
* CASTLE: :func:`streamanon.flink.castle.run_castle_job` (``streamanon flink castle``), a keyed
  broadcast operator over ``crc32(id) mod partitions`` with the rules on a broadcast stream;
  per partition it releases exactly what ``streamanon castle`` releases on that partition.

Submitting to a Flink 2.3 cluster (tried against a standalone cluster started with
``start-cluster.sh``): install streamanon with the extra into the same path on the client and
on every TaskManager, put input and ``--work-dir`` on a filesystem all of them see, and run::

    flink run -m JOBMANAGER:8081 -pyclientexec /opt/venv/bin/python \
        -pyexec /opt/venv/bin/python -pym streamanon.flink \
        z --z 5 --delta-t 3600 -p 8 --mode process /shared/trace.csv \
        --work-dir /shared/run1 -o /shared/published.csv

``python -m streamanon.flink`` is ``streamanon flink``; the client merges the part files into
``-o`` when the job ends (or run ``streamanon flink merge /shared/run1/parts -o out.csv``).
Thread mode on a cluster needs the TaskManagers started with ``PYTHONPATH`` naming the
environment's site-packages (see :mod:`.env`); process mode needs nothing more.
"""
