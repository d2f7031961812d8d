"""Stores for the report tests: one from real training, and hand-built ones with known answers.

Imported by tests/reports and tests/cli (not collected: no test_ prefix).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import torch

from orthotune.core import TrainConfig
from orthotune.store import TRIALS_SCHEMA, Store, epoch_rows, trial_row
from orthotune.training import run_configs

#: The small real search: Texas full-supervised (183 nodes, so it trains in seconds), Geom-GCN
#: splits 0-2, GCN at depths 2 and 4, the original backbone and Ortho-GConv at T = 2 and 4.
REAL_SEARCH = "tiny-real"
REAL_COMMON = dict(dataset="texas", setting="full", backbone="gcn", hidden=32, lr=0.05, dropout=0.2,
                   epochs=40, patience=40, splits=(0, 1, 2), seeds=(0,))


def real_configs() -> list[TrainConfig]:
    configs = []
    for depth in (2, 4):
        configs.append(TrainConfig(depth=depth, ortho=False, **REAL_COMMON))
        configs += [TrainConfig(depth=depth, ortho=True, T=t, beta=0.4, lam=5e-4, **REAL_COMMON) for t in (2, 4)]
    return configs


def build_real_store(root: Path) -> Store:
    """Train ``real_configs()`` for real (one at a time, as a search trial would) and store them.

    Built once per session: a second caller finds the finished store (``DONE`` file).
    """
    done = root / "DONE"
    if done.exists():
        return Store.open(str(root))
    store = Store.open(str(root), create=True)
    torch.set_num_threads(1)
    for number, config in enumerate(real_configs()):
        history: dict[tuple[int, int], dict[str, float]] = {}

        def remember(report, history=history) -> None:
            for repeat, (loss, val, test) in enumerate(zip(report.train_loss[0], report.val_acc[0],
                                                           report.test_acc[0])):
                history[(repeat, report.epoch)] = {"train_loss": loss, "val_acc": val, "test_acc": test}

        result = run_configs([config], torch.device("cpu"), None, remember)[0]
        row = trial_row(REAL_SEARCH, f"t{number:02d}", result, result.status, result.reason)
        store.write_trial(row, epoch_rows(history, result.runs))
    done.write_text("ok")
    return store


# -- hand-built rows ------------------------------------------------------------------------

_START = datetime(2025, 1, 1, tzinfo=UTC)


def hand_row(trial_id: str, val: list[float] | None = None, test: list[float] | None = None,
             search: str = "hand", minutes: int = 0, **columns: Any) -> dict[str, Any]:
    """A complete trials row with per-repeat ``val``/``test`` accuracies (splits 0..n-1).

    Means and population stds are derived from the per-repeat values as trial_row does;
    any column can be overridden. Defaults: Cora full, GCN depth 2, original, completed.
    """
    val = [0.8, 0.8] if val is None else val
    test = [0.7, 0.7] if test is None else test
    n = len(val)
    row: dict[str, Any] = {f.name: None for f in TRIALS_SCHEMA}
    row.update(
        search=search, trial_id=trial_id, status="completed", dataset="cora", setting="full", backbone="gcn",
        depth=2, ortho=False, hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, max_epochs=100, patience=10,
        alpha=0.1, theta=0.5, jk="cat", splits=list(range(n)), seeds=[0],
        val_acc=_mean(val), val_acc_std=_pstd(val), test_acc=_mean(test), test_acc_std=_pstd(test),
        repeat_split=list(range(n)), repeat_seed=[0] * n, repeat_status=["completed"] * n,
        repeat_val_acc=val, repeat_test_acc=test, repeat_best_epoch=[5] * n, repeat_epochs=[20] * n,
        epochs=20, best_epoch=5, m_sig=1.0, smoothness=0.5, grad_norms=[0.1, 0.1], grad_norm_ratio=1.0,
        seconds=1.0, seconds_per_epoch=0.05, device="cpu", finished_at=_START + timedelta(minutes=minutes),
    )
    if columns.get("ortho"):
        row.update(T=4, beta=0.4, lam=5e-4, centre_rows=False, norm_groups=1, squared_norm=False)
    row.update(columns)
    return row


def hand_store(root: Path, rows: list[dict[str, Any]]) -> Store:
    store = Store.open(str(root), create=True)
    for row in rows:
        store.write_trial(row, [])
    return store


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _pstd(values: list[float]) -> float:
    if not values:
        return math.nan
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))



# -- tuning curves: each arm's trials in start order, one a minute ---------------------------

CURVE_BASE = [0.70, 0.72, 0.71, 0.73, 0.69]
JITTER = [0.001, -0.002, 0.0, 0.002, -0.001]  # per-repeat differences, so the paired test has a CI


def curve_row(trial_id: str, val: float | list[float], test: list[float], minute: float, **columns: Any
              ) -> dict[str, Any]:
    """A current row (variant and selection set) that started at ``minute`` and trained one second."""
    vals = val if isinstance(val, list) else [val] * len(test)
    finished = _START + timedelta(minutes=minute, seconds=1)
    return hand_row(trial_id, val=vals, test=test, **{"variant": "default", "selection": "val_acc",
                                                      "finished_at": finished, "seconds": 1.0, **columns})


def shifted(values: list[float], by: float, jitter: bool = False) -> list[float]:
    return [v + by + (j if jitter else 0.0) for v, j in zip(values, JITTER, strict=True)]


def shrinking_rows(n: int = 8) -> list[dict[str, Any]]:
    """The original arm improves with every trial (validation and test), the Ortho-GConv arm's
    first trial stays its best: the gain falls from +5 by 0.5 points a trial."""
    rows = []
    for i in range(n):
        rows.append(curve_row(f"o{i}", 0.70 + 0.01 * i, shifted(CURVE_BASE, 0.005 * i), i, lr=0.001 * (i + 1)))
        rows.append(curve_row(f"x{i}", 0.80 - 0.01 * i, shifted(CURVE_BASE, 0.05, jitter=True), i, ortho=True,
                              lr=0.001 * (i + 1)))
    return rows


def stable_rows(n: int = 8) -> list[dict[str, Any]]:
    """Both arms find their winner in the first trial: the gain is +5 at every k."""
    rows = []
    for i in range(n):
        rows.append(curve_row(f"o{i}", 0.80 - 0.01 * i, shifted(CURVE_BASE, -0.01 * i), i, lr=0.001 * (i + 1)))
        rows.append(curve_row(f"x{i}", 0.80 - 0.01 * i, shifted(CURVE_BASE, 0.05, jitter=True), i, ortho=True,
                              lr=0.001 * (i + 1)))
    return rows
