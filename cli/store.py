"""Look after the results store: `store check` lists unreadable files; --quarantine moves them aside.

`orthotune store check` reads every Parquet file of the trials and epochs tables, every
search record and lease, and looks for temporaries a dead writer left; it prints each
problem and exits 1. With --quarantine it moves them to quarantine/<UTC stamp>/<path> inside
the store (nothing is deleted, no good file is touched) and exits 0. A clean store exits 0.
"""

from __future__ import annotations

import argparse

from orthotune.cli._common import OK, RUN_FAILED, add_store_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="list corrupt Parquet files, unreadable JSON and leftover temporaries",
                               description="List the store's corrupt Parquet files, unreadable JSON documents "
                                           "and leftover temporaries; --quarantine moves them aside.")
    add_store_argument(check)
    check.add_argument("--quarantine", action="store_true",
                       help="move each problem file to quarantine/<UTC stamp>/<its path> inside the store "
                            "(never deletes; good files stay)")


def run(args: argparse.Namespace) -> int:
    from orthotune.store import Store, check_store, quarantine

    store = Store.open(args.store)
    problems = check_store(store)
    if not problems:
        print(f"store {store.uri} is clean")
        return OK
    for problem in problems:
        print(problem.describe())
    if not args.quarantine:
        print(f"{len(problems)} problem file(s) left in place; move them aside with: "
              f"{store.check_command('--quarantine')}")
        return RUN_FAILED
    moved = quarantine(store, problems)
    for source, target in moved:
        print(f"moved {source} -> {target}")
    print(f"quarantined {len(moved)} file(s) in store {store.uri}")
    return OK
