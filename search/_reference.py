"""Reuse of the structure-agnostic reference across the searches of one store.

A space with ``reference: true`` searches, per dataset, the reference cell (``core.REFERENCE``;
``SearchSpace.reference_cells``) with the arms' budget. Its rows are ordinary trial rows of
the search that trained them, keyed like every cell (``dataset/BACKBONE/DEPTH/reference``;
the setting and split rule are the rows' own columns). A later search of the same store
trains a reference cell only where no earlier search trained the same one with the same
budget; otherwise it reuses that search's rows, and its record says whose
(``references``: cell key -> search), which the reports follow.

Reuse is decided from the records and rows alone: another search's record holds its space
and options, from which its reference cell of the same key is rebuilt; the two cells agree
when their *budget* does (:func:`reference_budget`: everything the cell's training depends on
but its name: dataset, setting, repeats, split rule, the ``train`` values it reads, fixed or
searched, ``samples``, ASHA's grace period and reduction factor, the searcher and the
scheduler; not the seed), and that search stored every trial the budget plans for the cell
(a search that stopped early is not reused). Budgets are never mixed: a cell trains all its
trials itself, or reuses all of one other search's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from orthotune.core import ConfigError
from orthotune.search._budget import grid_size
from orthotune.search._options import LaunchOptions
from orthotune.search._replay import stored_trials
from orthotune.spaces import SearchSpace, parse_space
from orthotune.store import Store


def reference_budget(cell: SearchSpace, samples: int | None, searcher: str, scheduler: str) -> str:
    """A reference cell's budget as canonical JSON: its space without its name, the trials it
    gets, the searcher and the scheduler."""
    values = {k: v for k, v in cell.to_dict().items() if k not in ("name", "setting", "repeats", "split")}
    values["samples"] = samples or cell.samples
    values["protocol"] = cell.protocol(cell.datasets[0])  # setting, repeats, split rule, as its configs get them
    return json.dumps({**values, "searcher": searcher, "scheduler": scheduler}, sort_keys=True, default=str)


def _budgets(space: SearchSpace, samples: int | None, searcher: str, scheduler: str) -> dict[str, tuple[str, int]]:
    """Each reference cell's key -> (its budget, the trials it plans)."""
    budgeted = samples or space.samples
    return {cell.key: (reference_budget(cell, samples, searcher, scheduler), min(budgeted, grid_size(cell) or budgeted))
            for cell in space.reference_cells()}


def reused_references(store: Store, options: LaunchOptions) -> dict[str, str]:
    """The reference cells of ``options``' space that another search of ``store`` trained in
    full with the same budget: cell key -> that search (the earliest created, then by name)."""
    if not options.space.reference or options.points is not None:
        return {}
    wanted = _budgets(options.space, options.samples, options.searcher, options.scheduler)
    records = sorted(((name, meta) for name, meta in store.searches().items() if name != options.name),
                     key=lambda item: (str(item[1].get("created_at") or ""), item[0]))
    found: dict[str, str] = {}
    for name, meta in records:
        theirs = _their_budgets(meta)
        matching = [key for key, (budget, _) in wanted.items()
                    if key not in found and key in theirs and theirs[key][0] == budget]
        if not matching:
            continue
        counts: dict[str, int] = {}
        for trial in stored_trials(store, name):
            counts[trial.cell] = counts.get(trial.cell, 0) + 1
        for key in matching:
            if counts.get(key, 0) >= theirs[key][1]:
                found[key] = name
    return found


def _their_budgets(meta: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """The reference budgets of a search as its record holds it; none for a record this
    version cannot read (another version's space, options missing)."""
    options = meta.get("options") if isinstance(meta, Mapping) else None
    if not isinstance(options, Mapping) or not isinstance(options.get("space"), Mapping):
        return {}
    try:
        space = parse_space(dict(options["space"]))
    except ConfigError:
        return {}
    if options.get("points") is not None:
        return {}
    return _budgets(space, options.get("samples"), str(options.get("searcher", "optuna")),
                    str(options.get("scheduler", "asha")))


def with_reused_references(options: LaunchOptions, reused: Mapping[str, str]) -> LaunchOptions:
    """``options`` whose space leaves out the ``reused`` reference cells (``SearchSpace.reused``)."""
    return replace(options, space=replace(options.space, reused=dict(reused))) if reused else options
