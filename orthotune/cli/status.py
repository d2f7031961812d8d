"""List the searches in a store with their trial counts by status."""

from __future__ import annotations

import argparse
from collections import Counter

from orthotune.core import Status
from orthotune.search.store import Store

STATUSES = tuple(s.value for s in Status)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True, help="store root: a path or a URI")


def run(args: argparse.Namespace) -> int:
    print(format_status(search_status(Store.open(args.store))))
    return 0


def search_status(store: Store) -> list[dict]:
    """One entry per search: its state and trial counts by status."""
    trials = store.read("trials").select(["search", "status"]).to_pylist()
    counts: dict[str, Counter] = {}
    for row in trials:
        counts.setdefault(row["search"], Counter())[row["status"]] += 1
    names = sorted(set(store.search_names()) | set(counts))
    entries = []
    for name in names:
        meta = store.search_meta(name) if name in store.search_names() else {}
        entries.append({"search": name, "state": meta.get("state", "unknown"),
                        "created_at": meta.get("created_at", ""), **{s: counts.get(name, Counter())[s]
                                                                      for s in STATUSES}})
    return entries


def format_status(entries: list[dict]) -> str:
    if not entries:
        return "no searches in this store"
    header = f"{'search':<32} {'state':<12} {'trials':>6} " + " ".join(f"{s:>9}" for s in STATUSES)
    rows = [header]
    for e in entries:
        total = sum(e[s] for s in STATUSES)
        rows.append(f"{e['search']:<32} {e['state']:<12} {total:>6} " + " ".join(f"{e[s]:>9}" for s in STATUSES))
    return "\n".join(rows)
