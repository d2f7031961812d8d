"""The ``orthotune`` command: one module per subcommand, errors as one line.

Startup is kept fast: this module and the subcommand modules import only light modules at
the top; only the chosen subcommand's options are built (``add_arguments``), and its
heavy dependencies (torch, PyG, Ray, pandas, matplotlib) are imported inside its ``run``.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from orthotune import __version__
from orthotune.cli import best, confirm, launch, logs, plan, report, slurm, status, store, train
from orthotune.cli._common import (
    BAD_INPUT,
    DEBUG_ENV,
    INTERRUPTED,
    OK,
    RUN_FAILED,
    SIGNAL_BASE,
    default_store,
    run_script,
)
from orthotune.core import OrthotuneError, SearchCrashed, SearchInterrupted, one_line

__all__ = ["default_store", "entry", "main", "run_script"]

SUBCOMMANDS: dict[str, ModuleType] = {
    "train": train, "plan": plan, "launch": launch, "status": status, "best": best, "report": report, "logs": logs,
    "store": store,
    "confirm": confirm,  # (issue 47)
    "slurm": slurm,  # (issue 39)
}

DESCRIPTION = """\
Hyperparameter search for orthogonal graph neural networks (Ortho-GConv) on Ray Tune.

Train one config, search a space of configs on a local Ray or a Ray cluster, and read the
winners and a report from the results store (Parquet files that pandas, DuckDB and Polars read).

  orthotune train --dataset cora --depth 8            # one config, its repeats
  orthotune plan --space quick                        # what a search will cost here, before it starts
  orthotune launch --space quick                      # a search; results go to the store
  orthotune slurm --space quick --nodes 2 --submit    # the same, as a Slurm batch job
  orthotune status                                    # the searches in the store
  orthotune best --yaml > best.yaml                   # each cell's validation-best config
  orthotune report --format html -o report.html       # tables and plots
  orthotune confirm --search NAME                     # the winners retrained on fresh repeats

Run `orthotune COMMAND --help` for a command's options."""

EPILOG = """\
store: commands that read or write results use --store, default $ORTHOTUNE_STORE, else ./runs/store.

exit codes:
  0    success
  1    a run failed (train: the config failed; launch: no trial succeeded; a Ray job failed), or an
       unexpected error (one line; ORTHOTUNE_DEBUG=1 shows its traceback)
  2    bad input: a value, file, data root, store or cluster that cannot be used (one line on stderr
       saying which value breaks which rule)
  130  interrupted (Ctrl-C); a search's record is kept and the line names its --resume command
  143  terminated (SIGTERM), likewise"""

#: Characters that would break a message's one line (C0 and C1 controls, Unicode line breaks).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (like every other bad input).

    Options are never abbreviated: `launch --submit` hands its words on to the job's driver
    minus --submit and --address, which must therefore be spelt out in full.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # argparse quotes the offending word as typed: a control character in it (a stray CR
        # or newline) is shown escaped, so the message stays on one line
        shown = CONTROL.sub(lambda found: repr(found.group())[1:-1], message)
        self.exit(BAD_INPUT, f"{self.prog}: error: {shown} (see `{self.prog} --help`)\n")


def build_parser(command: str | None = None) -> Parser:
    """The parser; only ``command``'s options are added, so other subcommands' imports stay unmade."""
    parser = Parser(prog="orthotune", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"orthotune {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name, module in SUBCOMMANDS.items():
        summary = (module.__doc__ or "").strip().splitlines()[0]
        sub = commands.add_parser(name, help=summary, description=(module.__doc__ or "").strip(), epilog=EPILOG,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == command:
            module.add_arguments(sub)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: the first word that is not an option (the top-level
    options take no values)."""
    return next((word for word in argv if not word.startswith("-")), None)


def entry() -> int:
    """The ``orthotune`` console script: :func:`main`, then an exit spared the interpreter's last
    full garbage collection. What a command made lives until the exit anyway; collecting it
    there took 1.2 s with torch and PyG loaded (every command's files are closed by then: the
    store and the caches write in ``with`` blocks). Not in :func:`main`, which tests call in
    their own process."""
    code = main()
    gc.freeze()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    # OpenMP's wait policy for torch's threads unless the user chose one. Its default lets
    # idle threads spin; on cores shared with other jobs a spinning thread holds the core its
    # peer needs, and a Cora GCN-8 epoch of `train` took 0.43-1.28 s instead of 0.045-0.046 s
    # (2 cores at load 5). Read when torch first loads, which the commands do after this.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    argv = list(sys.argv[1:] if argv is None else argv)
    command = chosen_command(argv)
    try:
        args = build_parser(command).parse_args(argv)
        args.words = argv[argv.index(command) + 1:]  # as typed: `launch --submit` hands them on
        return SUBCOMMANDS[args.command].run(args)
    except SearchInterrupted as error:  # the record is saved; the message names the resume command
        print(f"orthotune {command}: {one_line(error)}", file=sys.stderr)
        return SIGNAL_BASE + error.signal_number
    except SearchCrashed as error:  # the record says crashed and why; not the user's input
        return _error(command, one_line(error), RUN_FAILED)
    except OrthotuneError as error:
        return _error(command, one_line(error), BAD_INPUT)
    except BrokenPipeError:  # `orthotune best --json | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK
    except KeyboardInterrupt:
        print(f"orthotune {command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as error:  # noqa: BLE001 - every error ends as one line (ORTHOTUNE_DEBUG: traceback)
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        known = library_error(error)
        if known is not None:
            return _error(command, known, BAD_INPUT)
        return _error(command, f"unexpected {type(error).__name__}: {one_line(error)} (set {DEBUG_ENV}=1 for the "
                               f"traceback)", RUN_FAILED)


def _error(command: str | None, message: str, code: int) -> int:
    print(f"orthotune {command}: error: {message}", file=sys.stderr)
    return code


def library_error(error: Exception) -> str | None:
    """The one line for an error of a library the CLI drives (files, Arrow, YAML, Ray's start),
    or None for anything else. Library modules are looked up only if already imported: a
    command that never loaded Ray pays nothing for this."""
    if isinstance(error, UnicodeDecodeError):
        return f"a file is not UTF-8 text ({error.reason} at byte {error.start})"
    url_error = getattr(sys.modules.get("urllib.error"), "URLError", None)
    if url_error is not None and isinstance(error, url_error):  # --download without a network
        return f"cannot download: {one_line(getattr(error, 'reason', error))}"
    if isinstance(error, OSError):  # filesystems, S3 (through Arrow), sockets: ConnectionError
        where = " ".join(repr(str(f)) for f in (error.filename, error.filename2) if f is not None)
        reason = error.strerror or one_line(error)
        return f"{reason}: {where}" if where else reason
    kinds = [getattr(sys.modules.get(module), name, None) for module, name in LIBRARY_ERRORS]
    if any(isinstance(kind, type) and isinstance(error, kind) for kind in kinds):
        return f"{type(error).__name__}: {one_line(error)}"
    return None


#: Library error types turned into one line (module, attribute), when that module is loaded.
LIBRARY_ERRORS = (("pyarrow", "ArrowException"), ("yaml", "YAMLError"), ("ray.exceptions", "RaySystemError"))


if __name__ == "__main__":
    sys.exit(main())
