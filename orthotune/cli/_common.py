"""What several subcommands share: exit codes and the store option (light imports only)."""

from __future__ import annotations

import argparse
import os

#: Exit codes, as ``orthotune --help`` documents them.
OK, RUN_FAILED, BAD_INPUT, INTERRUPTED = 0, 1, 2, 130

#: The store when neither --store nor $ORTHOTUNE_STORE names one (relative to the working folder).
DEFAULT_STORE = "runs/store"
STORE_ENV = "ORTHOTUNE_STORE"


def default_store() -> str:
    """$ORTHOTUNE_STORE when set (and not empty), else ``runs/store``."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=default_store(), metavar="PATH|URI",
                        help=f"results store: a folder or a URI (s3://, gs://); default: ${STORE_ENV}, "
                             f"else ./{DEFAULT_STORE} (now: %(default)s)")
