"""streamanon on Apache Flink: PyFlink functions and job builders (the ``flink`` extra).

Importing this package needs nothing beyond the core; the modules that touch PyFlink
(:mod:`.env`, :mod:`.functions`, :mod:`.job`) import it when they are imported, and
:mod:`.outcomes` (merging a job's part files) needs no PyFlink at all.

* z-anonymity: :func:`streamanon.flink.job.run_z_job`, keyed by the coarsest hierarchy level.
"""
