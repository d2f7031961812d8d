"""Turn a trained config into the store's rows (the columns are declared in ``_store``)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from search._config import TrainConfig
from search._store import now
from search._train import ConfigResult, RunResult

#: TrainConfig fields whose store column has another name.
RENAMED = {"epochs": "max_epochs"}
#: Ortho-GConv's own values: null for the original backbone, which has none.
ORTHO_ONLY = ("T", "beta", "lam", "centre_rows", "norm_groups", "squared_norm")


def config_columns(config: TrainConfig) -> dict[str, Any]:
    columns = {RENAMED.get(k, k): v for k, v in config.to_dict().items()}
    if not config.ortho:
        columns.update(dict.fromkeys(ORTHO_ONLY))
    return columns


def trial_row(
    search: str,
    trial_id: str,
    result: ConfigResult,
    status: str,
    reason: str = "",
    tune_trial_id: str | None = None,
) -> dict[str, Any]:
    """The ``trials`` row of one config: objective, per-repeat values, steadiness, versions."""
    runs = result.runs
    usable = [r for r in runs if r.status != "failed"]
    grad_norms = _mean_per_layer([r.grad_norms for r in usable])
    return {
        "search": search,
        "trial_id": trial_id,
        "tune_trial_id": tune_trial_id,
        "status": status,
        "reason": reason or None,
        **config_columns(result.config),
        "val_acc": _mean([r.val_acc for r in runs]),
        "val_acc_std": _std([r.val_acc for r in runs]),
        "test_acc": _mean([r.test_acc for r in runs]),
        "test_acc_std": _std([r.test_acc for r in runs]),
        "repeat_split": [r.split for r in runs],
        "repeat_seed": [r.seed for r in runs],
        "repeat_status": [r.status for r in runs],
        "repeat_val_acc": [r.val_acc for r in runs],
        "repeat_test_acc": [r.test_acc for r in runs],
        "repeat_best_epoch": [r.best_epoch for r in runs],
        "repeat_epochs": [r.epochs for r in runs],
        "epochs": max((r.epochs for r in runs), default=0),
        "best_epoch": max((r.best_epoch for r in runs), default=0),
        "m_sig": _mean([r.m_sig for r in usable]),
        "smoothness": _mean([r.smoothness for r in usable]),
        "grad_norms": grad_norms,
        "grad_norm_ratio": _ratio(grad_norms),
        "seconds": result.seconds,
        "seconds_per_epoch": result.seconds_per_epoch,
        "device": result.device,
        **library_versions(),
        "finished_at": now(),
    }


def epoch_rows(history: dict[tuple[int, int], dict[str, float]], runs: Sequence[RunResult]) -> list[dict]:
    """Rows of the ``epochs`` table from ``{(repeat, epoch): values}``."""
    return [
        {"repeat": repeat, "split": runs[repeat].split, "seed": runs[repeat].seed, "epoch": epoch, **values}
        for (repeat, epoch), values in sorted(history.items())
    ]


def library_versions() -> dict[str, str]:
    import optuna
    import ray
    import torch
    import torch_geometric

    import orthotune

    return {
        "orthotune_version": orthotune.__version__,
        "torch_version": torch.__version__,
        "pyg_version": torch_geometric.__version__,
        "ray_version": ray.__version__,
        "optuna_version": optuna.__version__,
    }


def _mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values)) if values else math.nan


def _std(values: Sequence[float]) -> float:
    """Population std over the repeats (0 for one repeat), as the paper's tables report."""
    return float(statistics.pstdev(values)) if values else math.nan


def _mean_per_layer(norms: Sequence[Sequence[float]]) -> list[float]:
    norms = [n for n in norms if n]
    return [float(statistics.fmean(layer)) for layer in zip(*norms)] if norms else []


def _ratio(norms: Sequence[float]) -> float | None:
    return norms[0] / norms[-1] if norms and norms[-1] > 0 else None
