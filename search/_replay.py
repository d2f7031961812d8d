"""Resume a search from the store's own rows: no pickle, and no Ray Tune state is read.

The store holds every trial that ended (``trials``) and its per-epoch history (``epochs``);
that is all a resumed search needs. A driver that dies loses only the trials that were
still training (they had no row yet; the resumed search trains its cells' remaining budget
instead), and ``--resume`` rebuilds the rest from the rows:

- **Searchers.** Each cell's Optuna study is rebuilt by replaying the cell's stored trials,
  in the order they ended: their searched values are handed to Optuna as enqueued points
  (``points_to_evaluate``), asked for and told their stored objective (failed trials are
  told as failed), exactly as a live trial is. The cell's budget counts them. The grid
  trains only the points no row holds yet.
- **ASHA's rungs.** Each stored trial's objective curve (the mean over repeats of the
  selected validation accuracy so far, at every report epoch) is recomputed from the
  ``epochs`` table and fed to its cell's ASHA, so a trial of the resumed session is
  compared with the trials that reached a rung before the driver died.

Ray Tune's own experiment folder (which pickles its trials and searchers) lives in a
scratch folder outside the store for the session and is deleted after it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orthotune.core import OBJECTIVE, Status, mean
from orthotune.search._cell_key import cell_key
from orthotune.search._identity import config_identity
from orthotune.search._objective import RUNG_SCORE, TIME_ATTR, rung_score
from orthotune.store import Store, config_from_columns


@dataclass(frozen=True)
class StoredTrial:
    """One config's row as a resumed search needs it."""

    trial_id: str
    cell: str
    config: dict[str, Any]  # a ``TrainConfig.from_dict`` mapping (every declared field)
    status: Status
    objective: float | None  # mean validation accuracy at the selected epochs; None if unusable
    finished_at: datetime | None
    seconds: float | None = None  # the trial's training time (the store's ``seconds``)

    @property
    def failed(self) -> bool:
        return self.status == Status.FAILED or self.objective is None


def stored_trials(store: Store, search: str) -> list[StoredTrial]:
    """The search's stored configs, in the order they ended."""
    rows = store.read("trials", search=search).to_pylist()
    trials = []
    for row in rows:
        config = config_from_columns(row)
        value = row.get(OBJECTIVE)
        usable = row["status"] != Status.FAILED and value is not None and math.isfinite(value)
        seconds = row.get("seconds")
        trials.append(StoredTrial(row["trial_id"], cell_key(config), config, Status(row["status"]),
                                  float(value) if usable else None, row.get("finished_at"),
                                  float(seconds) if seconds is not None and math.isfinite(seconds) else None))
    return sorted(trials, key=lambda t: (t.finished_at is None, t.finished_at or 0, t.trial_id))


def by_cell(trials: Iterable[StoredTrial]) -> dict[str, list[StoredTrial]]:
    cells: dict[str, list[StoredTrial]] = defaultdict(list)
    for trial in trials:
        cells[trial.cell].append(trial)
    return dict(cells)


def replay_points(trials: Iterable[StoredTrial]) -> list[dict[str, Any]]:
    """The stored configs as Optuna points to enqueue (scalar values; Optuna uses the ones the
    cell's define-by-run function asks for and keeps the rest as unused fixed values)."""
    return [{k: v for k, v in trial.config.items() if not isinstance(v, list)} for trial in trials]


def remaining_points(points: list[dict[str, Any]], trials: Iterable[StoredTrial]) -> list[dict[str, Any]]:
    """Grid points no stored row holds yet, in order (a point trained twice stays stored once)."""
    done = {config_identity(trial.config) for trial in trials}
    return [point for point in points if config_identity(point) not in done]


def remaining_groups(groups: list[dict[str, Any]], trials: Iterable[StoredTrial]) -> list[dict[str, Any]]:
    """Trial groups with their stored members removed (empty groups dropped)."""
    done = {config_identity(trial.config) for trial in trials}
    kept = [{"group": [c for c in group["group"] if config_identity(c) not in done]} for group in groups]
    return [group for group in kept if group["group"]]


def objective_curves(store: Store, search: str, trials: Iterable[StoredTrial],
                     report_every: int) -> dict[str, list[tuple[int, float]]]:
    """Per stored trial: ``(epoch, rung score)`` at each report epoch, as its trainer reported.

    The objective at an epoch is the mean over repeats of the validation accuracy at each
    repeat's selected epoch so far (by validation accuracy, or by validation loss where the
    config selects by it), as :class:`~orthotune.training.TrainingLoop` computes it;
    ASHA ranks by :func:`rung_score` of it and each repeat's lowest validation loss so far.
    """
    trials = list(trials)
    if not trials:
        return {}
    wanted = {t.trial_id: t for t in trials}
    columns = ["trial_id", "repeat", "epoch", OBJECTIVE, "val_loss"]
    rows = store.read("epochs", search=search).select(columns).to_pylist()
    per_trial: dict[str, dict[int, list[tuple[int, float, float]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["trial_id"] in wanted:
            per_trial[row["trial_id"]][row["repeat"]].append((row["epoch"], row[OBJECTIVE], row["val_loss"]))
    return {trial_id: _curve(per_trial[trial_id], wanted[trial_id].config.get("selection") == "val_loss",
                             report_every) for trial_id in per_trial}


def _curve(repeats: Mapping[int, list[tuple[int, float, float]]], by_loss: bool,
           report_every: int) -> list[tuple[int, float]]:
    selected: dict[int, dict[int, float]] = {}
    lowest: dict[int, dict[int, float]] = {}
    last = 0
    for repeat, epochs in repeats.items():
        best, value, values, low, lows = -math.inf, math.nan, {}, math.inf, {}
        for epoch, val_acc, val_loss in sorted(epochs):
            score = -_finite(val_loss) if by_loss else _finite(val_acc)
            if score > best:
                best, value = score, val_acc
            values[epoch] = value
            if val_loss is not None and math.isfinite(val_loss):
                low = min(low, val_loss)
            lows[epoch] = low
            last = max(last, epoch)
        selected[repeat], lowest[repeat] = values, lows
    report_epochs = [e for e in range(report_every, last + 1, report_every)] + ([last] if last % report_every else [])
    curve = []
    for epoch in report_epochs:
        values = [_at(per_epoch, epoch) for per_epoch in selected.values()]
        finite = [v for v in values if v is not None and math.isfinite(v)]
        losses = [_at(per_epoch, epoch) for per_epoch in lowest.values()]
        curve.append((epoch, rung_score(mean(finite) if finite else 0.0,
                                        [math.inf if v is None else v for v in losses])))
    return curve


def _at(per_epoch: Mapping[int, float], epoch: int) -> float | None:
    """The selected value at ``epoch``, or at the repeat's last epoch if it stopped before."""
    if epoch in per_epoch:
        return per_epoch[epoch]
    earlier = [e for e in per_epoch if e <= epoch]
    return per_epoch[max(earlier)] if earlier else None


def _finite(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else -math.inf


def replay_rungs(scheduler: Any, trials: Iterable[StoredTrial], curves: Mapping[str, list[tuple[int, float]]]) -> int:
    """Feed stored trials' curves to a :class:`CellScheduler` (one ASHA per cell), as their
    reports reached it; returns how many trials it was given."""
    from orthotune.search._grouping import Member

    given = 0
    for trial in trials:
        curve = curves.get(trial.trial_id)
        if not curve:
            continue
        member = Member(f"stored-{trial.trial_id}", trial.cell)
        scheduler.on_trial_add(None, member)
        for epoch, value in curve:
            scheduler.on_trial_result(None, member, {TIME_ATTR: epoch, RUNG_SCORE: value})
        epoch, value = curve[-1]
        scheduler.on_trial_complete(None, member, {TIME_ATTR: epoch, RUNG_SCORE: value})
        given += 1
    return given
