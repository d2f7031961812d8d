"""Turn a trained config into the store's rows (the columns are declared in ``_schema``)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from orthotune.core import (
    ConfigResult,
    Group,
    RunResult,
    Status,
    TrainConfig,
    by_group,
    column_name,
    declared,
    mean,
    std,
)
from orthotune.store._store import now

#: Columns of Ortho-GConv's own searched values: null for the original backbone, which has none.
ORTHO_ONLY = tuple(f.name for f in by_group(TrainConfig, Group.ORTHO))


def config_columns(config: TrainConfig) -> dict[str, Any]:
    """The config as the store's columns (names and nulls derived from the declarations)."""
    columns = {column_name(f): getattr(config, f.name) for f in declared(TrainConfig)}
    columns["splits"], columns["seeds"] = list(config.splits), list(config.seeds)
    if not config.ortho:
        columns.update(dict.fromkeys(ORTHO_ONLY))
    return columns


def config_from_columns(row: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`config_columns`: a ``TrainConfig.from_dict`` mapping (nulls dropped)."""
    values = {f.name: row.get(column_name(f)) for f in declared(TrainConfig)}
    return {k: v for k, v in values.items() if v is not None}


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
    usable = [r for r in runs if r.status != Status.FAILED]
    grad_norms = _mean_per_layer([r.grad_norms for r in usable])
    return {
        "search": search,
        "trial_id": trial_id,
        "tune_trial_id": tune_trial_id,
        "status": Status(status).value,
        "reason": reason or None,
        **config_columns(result.config),
        "val_acc": mean([r.val_acc for r in runs]),
        "val_acc_std": std([r.val_acc for r in runs]),
        "test_acc": mean([r.test_acc for r in runs]),
        "test_acc_std": std([r.test_acc for r in runs]),
        "repeat_split": [r.split for r in runs],
        "repeat_seed": [r.seed for r in runs],
        "repeat_status": [Status(r.status).value for r in runs],
        "repeat_val_acc": [r.val_acc for r in runs],
        "repeat_test_acc": [r.test_acc for r in runs],
        "repeat_val_loss": [r.val_loss for r in runs],
        "repeat_best_epoch": [r.best_epoch for r in runs],
        "repeat_epochs": [r.epochs for r in runs],
        "epochs": max((r.epochs for r in runs), default=0),
        "best_epoch": max((r.best_epoch for r in runs), default=0),
        "m_sig": mean([r.m_sig for r in usable]),
        "smoothness": mean([r.smoothness for r in usable]),
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


def _mean_per_layer(norms: Sequence[Sequence[float]]) -> list[float]:
    norms = [n for n in norms if n]
    return [float(statistics.fmean(layer)) for layer in zip(*norms)] if norms else []


def _ratio(norms: Sequence[float]) -> float | None:
    return norms[0] / norms[-1] if norms and norms[-1] > 0 else None
