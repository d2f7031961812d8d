"""The invariants a search's store must hold after any schedule of faults (issue 51, item 2),
checked over what was written: a list of anomalies, empty when the store is sound.

:func:`anomalies` reads the store (a folder or any URI ``Store.open`` takes); :func:`leftovers`
looks at the machine: processes of the search's drivers and temporary folders left behind."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from orthotune.store import Store, check_store, config_from_columns


def anomalies(store_path: Path | str, name: str, budget: int, finished: bool = True,
              grid: dict[str, list] | None = None, pairs: int | None = None) -> list[str]:
    """What is wrong with search ``name`` in the store at ``store_path``, planned ``budget``
    trials: each line one broken invariant. ``finished``: the search must have ended whole.
    ``grid``: each config column's allowed values (a row holding another was altered).
    ``pairs``: how many pairs of arms the report must give a verdict (None: not counted)."""
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
    found += [f"trial {r['trial_id']} holds {column}={r[column]!r}, not one of the space's {allowed}"
              for r in rows for column, allowed in (grid or {}).items() if r[column] not in allowed]
    counts = {k: n for k, n in Counter(r["status"] for r in rows).items() if n}
    if store.summary(name) != counts:
        found.append(f"summary {store.summary(name)} is not the rows' {counts}")
    found += [f"store check: {p.path}: {p.kind} ({p.detail})" for p in check_store(store)]
    record = store.search_meta(name) if store.exists(f"searches/{name}.json") else {}
    if finished and record.get("state") != "finished":
        found.append(f"search record says {record.get('state')!r}, not finished")
    if store.exists(f"leases/{name}.json"):
        found.append("a lease is left held")
    if finished and rows:
        found += _verdict_anomalies(store, name, len(rows), pairs)
    return found


def _verdict_anomalies(store: Store, name: str, trials: int, pairs: int | None) -> list[str]:
    """The report pipeline run on the search (what ``report`` and ``best`` compute): it must
    end over every stored trial, with a verdict for each of its ``pairs`` of arms."""
    from orthotune.reports import Filters, build_report, pair_verdicts

    only = Filters(searches=(name,))
    try:
        report = build_report(store, only, plots=False)
        verdicts = pair_verdicts(store, only)
    except Exception as error:  # noqa: BLE001  (any failure of the pipeline is the anomaly)
        return [f"the report pipeline failed: {type(error).__name__}: {error}"]
    found = [] if report.trials == trials else [f"the report counts {report.trials} trials of {trials} stored"]
    judged = [line for line in verdicts.lines if "mean gain" in line]  # both arms have a winner
    if pairs is not None and len(judged) != pairs:
        found.append(f"{len(judged)} of {pairs} pairs judged (both arms' winners, their gain): {list(verdicts.lines)}")
    return found


def leftovers(sessions: list[int], temporary: Path) -> list[str]:
    """Processes left in the sessions of the drivers ``sessions`` (their pids; each driver was
    started in a session of its own, its local Ray with it) and orthotune's temporary folders
    (Ray Tune's scratch, a job's staging) left in ``temporary`` (the drivers' ``$TMPDIR``)."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "name"]):
        try:
            session = os.getsid(process.info["pid"])
        except OSError:
            continue
        if session in sessions and process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
            found.append(f"process {process.info['pid']} ({process.info['name']}) of driver {session}'s session "
                         f"is left running")
    if temporary.is_dir():
        found += [f"temporary folder {entry.name} is left behind" for entry in sorted(temporary.iterdir())
                  if entry.name.startswith("orthotune-")]
    return found


def _config_key(row: dict) -> str:
    """A trial's config (its cell's columns included), as one comparable value."""
    return json.dumps(config_from_columns(row), sort_keys=True, default=str)
