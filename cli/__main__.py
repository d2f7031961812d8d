import sys

from orthotune.cli import entry

if __name__ == "__main__":  # not again in a spawned process (the plan's measuring processes)
    sys.exit(entry())
