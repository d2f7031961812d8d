"""What several subcommands share: exit codes, the store, data and space-subset options (light
imports only)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn

#: Exit codes, as ``orthotune --help`` documents them (a signal N exits with 128 + N).
OK, RUN_FAILED, BAD_INPUT, INTERRUPTED = 0, 1, 2, 130
SIGNAL_BASE = 128
#: Set to 1 to see the traceback of an unexpected error instead of its one line.
DEBUG_ENV = "ORTHOTUNE_DEBUG"

#: The store when neither --store nor $ORTHOTUNE_STORE names one (relative to the working folder).
DEFAULT_STORE = "runs/store"
STORE_ENV = "ORTHOTUNE_STORE"


def run_script(main: Callable[[], int]) -> NoReturn:
    """Exit with ``main()``'s status; a library refusal (a store or search that is not there,
    a bad value) as one line ``error: ...`` and exit 2, as the CLI does: for ``bench/`` scripts."""
    from orthotune.core import OrthotuneError

    try:
        code = main()
    except OrthotuneError as error:
        print(f"error: {error}", file=sys.stderr)
        code = BAD_INPUT
    sys.exit(code)


def default_store() -> str:
    """$ORTHOTUNE_STORE when set (and not empty), else ``runs/store``."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=default_store(), metavar="PATH|URI",
                        help=f"results store: a folder or a URI (s3://, gs://); default: ${STORE_ENV}, "
                             f"else ./{DEFAULT_STORE} (now: %(default)s)")


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data-root and --download (train and launch): data is read from a named folder, and
    fetched from the internet only when asked."""
    parser.add_argument("--data-root", metavar="DIR",
                        help="raw data folder (default: $ORTHOTUNE_DATA_ROOT; one of the two is required)")
    parser.add_argument("--download", action="store_true",
                        help="fetch datasets missing from the data root into it (PyG's and OGB's downloads; "
                             "default: never download, a missing file is an error)")


#: The flags that narrow a space to some of its datasets or named arms (launch, plan, slurm).
SUBSET_FLAGS = (
    ("--datasets", "DATASET", "override the space's datasets"),
    ("--arms", "ARM", "keep only these of the space's named arms (the arms it compares; those its comparisons "
                      "need must stay)"),
    ("--skip-arms", "ARM", "leave out these of the space's named arms (as --arms with the others)"),
)


def add_subset_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, metavar, text in SUBSET_FLAGS:
        parser.add_argument(flag, nargs="+", metavar=metavar, help=text)


def subset_words(args: argparse.Namespace) -> list[str]:
    """The subset flags given in ``args``, as words for another ``orthotune`` command."""
    words: list[str] = []
    for flag, _, _ in SUBSET_FLAGS:
        values = getattr(args, flag[2:].replace("-", "_"), None)
        words += [flag, *values] if values else []
    return words
