"""Packed against alone on one device, at several dropout rates and precisions (``bench/gpu.py``'s
``equality`` part): packing must not change a run, and a captured CUDA graph must train as the
eager pack and replay the same from the seed."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch

from orthotune.training import TrainOptions, train_node


def equality(data, device: torch.device, count: int, epochs: int, seed: int, dropouts: tuple[float, ...],
             make_configs: Callable[..., list], pack_options: Callable[..., TrainOptions]) -> dict[str, Any]:
    """Packed against alone (packing must not change a run): ``count`` configs at learning
    rates up to 0.01 (and, dropout off, up to 0.05), at each dropout rate of ``dropouts``,
    each trained alone and in one pack, under strict FP32 and TF32 (dropout off, also strict
    FP32 deterministic). Under strict FP32 on a GPU also the pack captured as a CUDA graph
    against the eager pack, and the captured pack run twice (a replay's dropout must come
    from the seed). Per comparison: configs whose selected epoch differs, and the largest
    differences of validation and test accuracy."""
    rows: dict[str, Any] = {}
    for dropout in dropouts:
        for rates, top in (("lr <= 0.01", -2.0), ("lr <= 0.05", -1.3))[: 2 if dropout == 0 else 1]:
            configs = make_configs(count, epochs, 2, seed, max_log_lr=top, dropout=dropout)
            variants = (("strict fp32", dict(tf32=False)), ("tf32", dict(tf32=True)))
            if dropout == 0:
                variants += (("strict fp32 deterministic", dict(tf32=False, deterministic=True)),)
            for name, switches in variants:
                key = f"dropout {dropout}, {rates}, {name}"
                try:
                    alone = [train_node(c, data, device, options=TrainOptions(**switches))[0].runs[0]
                             for c in configs]
                    packed = [r.runs[0] for r in train_node(configs, data, device,
                                                              options=pack_options(str(count), **switches))]
                    rows[f"{key}: packed vs alone"] = _compare(packed, alone)
                    if name == "strict fp32" and device.type == "cuda":
                        graph = pack_options(str(count), True, **switches)
                        graphed = [r.runs[0] for r in train_node(configs, data, device, options=graph)]
                        rows[f"{key}: packed graph vs packed eager"] = _compare(graphed, packed)
                        again = [r.runs[0] for r in train_node(configs, data, device, options=graph)]
                        rows[f"{key}: packed graph rerun vs packed graph"] = _compare(again, graphed)
                except Exception as error:  # noqa: BLE001
                    rows[key] = {"error": f"{type(error).__name__}: {error}"[:400]}
    return rows


def _compare(runs, reference) -> dict[str, Any]:
    return {"configs": len(runs),
            "best_epoch_differs": sum(a.best_epoch != b.best_epoch for a, b in zip(runs, reference)),
            "max_abs_val_diff": max(abs(a.val_acc - b.val_acc) for a, b in zip(runs, reference)),
            "max_abs_test_diff": max(abs(a.test_acc - b.test_acc) for a, b in zip(runs, reference)),
            "identical": sum((a.best_epoch, a.val_acc, a.test_acc) == (b.best_epoch, b.val_acc, b.test_acc)
                             for a, b in zip(runs, reference)),
            "mean_test": statistics.fmean(a.test_acc for a in runs),
            "mean_test_reference": statistics.fmean(b.test_acc for b in reference)}


def reruns(data, device: torch.device, count: int, epochs: int, seed: int, dropout: float,
           make_configs: Callable[..., list], pack_options: Callable[..., TrainOptions]) -> dict[str, Any]:
    """The same pack trained twice from the same seeds, eagerly and captured as a CUDA graph,
    under strict FP32 with and without deterministic mode: whether a rerun reproduces every
    run (a captured graph's dropout must replay from the seed; atomics may not)."""
    rows: dict[str, Any] = {}
    configs = make_configs(count, epochs, 2, seed, max_log_lr=-2.0, dropout=dropout)
    for graph in (False, True) if device.type == "cuda" else (False,):
        for deterministic in (False, True):
            options = pack_options(str(count), graph, tf32=False, deterministic=deterministic)
            key = f"dropout {dropout}, {'graph' if graph else 'eager'}, strict fp32" + (
                ", deterministic" if deterministic else "")
            try:
                first = [r.runs[0] for r in train_node(configs, data, device, options=options)]
                second = [r.runs[0] for r in train_node(configs, data, device, options=options)]
                rows[f"{key}: rerun vs run"] = _compare(second, first)
            except Exception as error:  # noqa: BLE001
                rows[key] = {"error": f"{type(error).__name__}: {error}"[:400]}
    return rows
