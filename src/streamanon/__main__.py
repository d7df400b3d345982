"""``python -m streamanon``: the command line (how the cluster starts its daemons)."""

from streamanon.cli import main

if __name__ == "__main__":
    main()
