"""The invariants a search's store must hold after any schedule of faults (issue 51, item 2),
checked over what was written: a list of anomalies, empty when the store is sound."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from orthotune.store import Store, check_store, config_from_columns


def anomalies(store_path: Path, name: str, budget: int, finished: bool = True) -> list[str]:
    """What is wrong with search ``name`` in the store at ``store_path``, planned ``budget``
    trials: each line one broken invariant. ``finished``: the search must have ended whole."""
    store = Store.open(str(store_path))
    rows = store.read("trials", search=name).to_pylist()
    found = []
    twice = sorted(i for i, n in Counter(r["trial_id"] for r in rows).items() if n > 1)
    if twice:
        found.append(f"trial ids stored twice: {twice}")
    configs = Counter(_config_key(r) for r in rows)
    trained_twice = [key for key, n in configs.items() if n > 1]
    if trained_twice:
        ids = sorted(r["trial_id"] for r in rows if _config_key(r) in trained_twice)
        found.append(f"{len(trained_twice)} config(s) trained twice in one cell, trial ids {ids}")
    if len(rows) > budget:
        found.append(f"{len(rows)} trials stored, over the budget of {budget}")
    if finished and len(rows) < budget:
        found.append(f"{len(rows)} trials stored of the {budget} planned: {budget - len(rows)} lost")
    found += [f"failed trial {r['trial_id']} has no reason" for r in rows
              if r["status"] == "failed" and not r["reason"]]
    counts = {k: n for k, n in Counter(r["status"] for r in rows).items() if n}
    if store.summary(name) != counts:
        found.append(f"summary {store.summary(name)} is not the rows' {counts}")
    found += [f"store check: {p.path}: {p.kind} ({p.detail})" for p in check_store(store)]
    record = json.loads((store_path / "searches" / f"{name}.json").read_text())
    if finished and record.get("state") != "finished":
        found.append(f"search record says {record.get('state')!r}, not finished")
    if (store_path / "leases" / f"{name}.json").exists():
        found.append("a lease is left held")
    return found


def _config_key(row: dict) -> str:
    """A trial's config (its cell's columns included), as one comparable value."""
    return json.dumps(config_from_columns(row), sort_keys=True, default=str)
