"""streamanon on Apache Flink: PyFlink functions and job builders (the ``flink`` extra).

Importing this package needs nothing beyond the core. Records cross between the JVM and
Python, and between tasks, in batches only; the jobs' outputs are identical to the
commands' (``streamanon z``, ``streamanon castle``).

Design: docs/design/flink.md
"""
