"""``python -m streamanon.flink ARGS`` is ``streamanon flink ARGS``: the entry point for
``flink run --python-module streamanon.flink z ...`` on a Flink cluster (see README)."""

import sys

from streamanon.cli import app

if __name__ == "__main__":
    app(args=["flink", *sys.argv[1:]], prog_name="python -m streamanon.flink")
