"""Look after the results store: `store check` lists unreadable files (--quarantine moves them
aside); `store compact` merges searches' per-trial files into a few large ones.

`orthotune store check` reads every Parquet file of the trials and epochs tables, every
search record, summary and lease, compares each summary's counts with the rows, and looks
for temporaries a dead writer left; it prints each problem and exits 1. With --quarantine it
moves them to quarantine/<UTC stamp>/<path> inside the store (nothing is deleted, no good
file is touched; a summary moved aside is written again from the rows) and exits 0. A clean
store exits 0.

`orthotune store compact` merges each search's per-trial files into compacted files (a
search's driver does this when the search finishes; this command is for stores written
before, and for searches that were interrupted). It takes each search's lease: a search
whose driver is alive is skipped (exit 1 when it was named).
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
                            "(never deletes; good files stay; a summary moved aside is written again from the rows)")
    compact = actions.add_parser("compact", help="merge searches' per-trial files into a few large Parquet files",
                                 description="Merge each search's per-trial Parquet files into a few large ones "
                                             "(readers then open a few files, not two per trial). Safe to interrupt "
                                             "and to run again; a search whose driver is alive is skipped.")
    add_store_argument(compact)
    compact.add_argument("--search", nargs="+", action="extend", default=[], metavar="NAME",
                         help="only these searches (default: every search in the store)")


def run(args: argparse.Namespace) -> int:
    return _compact(args) if args.action == "compact" else _check(args)


def _check(args: argparse.Namespace) -> int:
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


def _compact(args: argparse.Namespace) -> int:
    from orthotune.core import OrthotuneError
    from orthotune.store import Lease, LeaseHeld, Store, check_search_name, compact

    store = Store.open(args.store)
    known = sorted(set(store.table_searches()) | set(store.search_names()))
    for name in args.search:
        if check_search_name(name) not in known:
            raise OrthotuneError(f"no search {name!r} in store {store.uri!r}; searches: {', '.join(known) or 'none'}")
    held = 0
    for name in args.search or known:
        try:
            with Lease.acquire(store, name):
                print(compact(store, name).describe(), flush=True)
        except LeaseHeld as error:
            held += 1
            print(f"{name}: skipped, {error}", flush=True)
    return RUN_FAILED if held and args.search else OK
