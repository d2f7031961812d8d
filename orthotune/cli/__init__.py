"""The ``orthotune`` command: one module per subcommand, errors as one line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from orthotune.cli import best, launch, report, status, train
from orthotune.core import OrthotuneError

SUBCOMMANDS = {"train": train, "launch": launch, "status": status, "best": best, "report": report}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orthotune", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, module in SUBCOMMANDS.items():
        module.add_arguments(commands.add_parser(name, help=module.__doc__))
    args = parser.parse_args(argv)
    try:
        return SUBCOMMANDS[args.command].run(args)
    except OrthotuneError as error:
        print(f"orthotune {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `orthotune best --json | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"orthotune {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
