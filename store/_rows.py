"""Turn a trained config into the store's rows (the columns are declared in ``_schema``)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from orthotune.core import (
    RESULT_COLUMNS,
    ConfigResult,
    Group,
    ResultColumn,
    RunResult,
    Status,
    Summary,
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
    """The ``trials`` row of one config: its config, its result (each of ``core.RESULT_COLUMNS``),
    the library versions."""
    return {
        "search": search,
        "trial_id": trial_id,
        "tune_trial_id": tune_trial_id,
        "status": Status(status).value,
        "reason": reason or None,
        **config_columns(result.config),
        **result_columns(result),
        **library_versions(),
        "finished_at": now(),
    }


def result_columns(result: ConfigResult) -> dict[str, Any]:
    """The result as the store's columns, one per ``core.RESULT_COLUMNS`` entry."""
    return {column.name: summarise(column, result) for column in RESULT_COLUMNS}


def summarise(column: ResultColumn, result: ConfigResult) -> Any:
    """The value of ``column`` for ``result`` (see ``core.Summary``)."""
    if column.summary is Summary.CONFIG:
        return getattr(result, column.of)
    runs = result.runs
    values = [getattr(r, column.of) for r in runs]
    usable = [getattr(r, column.of) for r in runs if r.status != Status.FAILED]
    match column.summary:
        case Summary.MEAN:
            return mean(values)
        case Summary.STD:
            return std(values)
        case Summary.REPEATS:  # strings (the Status values) as plain text
            return [str(v) for v in values] if column.kind == "strs" else values
        case Summary.MOST:
            return max(values, default=0)
        case Summary.USABLE_MEAN:
            return mean(usable)
        case Summary.LAYER_MEAN:
            return _mean_per_layer(usable)
        case Summary.LAYER_RATIO:
            return _ratio(_mean_per_layer(usable))
    raise AssertionError(column.summary)


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
