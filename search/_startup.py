"""Two Ray Tune defaults that delayed a search's first trial, and what a search does instead.

Measured on a 2-core machine with Ray 2.60, from ``Tuner.fit`` to the first trials' entry
(the timers of ``bench/throughput.py --breakdown``, 16 configs x 20 epochs): 4.8 s, of which
about 2.8 s is a worker importing Ray Tune, torch, PyG and orthotune; 3.0-3.2 s without these:

- **Trials on new workers.** Tune gives every trainable a runtime env of its own,
  ``{"env_vars": {"PL_DISABLE_FORK": "1"}}`` (a PyTorch Lightning setting). A runtime env
  other than the job's keeps Ray from using the workers it started with the job, so each
  trial waited for a new worker process to start and import Ray before its own imports.
  Inside :func:`trials_on_started_workers` the variable is not set (orthotune does not use
  Lightning); with no other variable to pass, the trial actors run on the workers Ray has
  already started.
- **Callback telemetry by import.** Before creating its controller, Tune records which
  callback classes a run uses (``ray.air._internal.usage.tag_callbacks``). To compare class
  names it imports the MLflow, W&B, Comet and Aim integrations, and with MLflow and W&B
  installed (orthotune's trackers) that import took 0.95 s of the driver, before any trial
  could be scheduled. :func:`callback_usage_by_name` records the same tag from the
  integrations' class names without importing them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The callback classes Ray Tune's usage tag counts by name, besides its default callbacks
#: (``ray.air._internal.usage._count_callbacks``).
INTEGRATION_CALLBACKS = ("WandbLoggerCallback", "MLflowLoggerCallback", "CometLoggerCallback", "AimLoggerCallback")


@contextmanager
def trials_on_started_workers() -> Iterator[None]:
    """Inside, Ray Tune adds no variable of its own to the trial actors' runtime env."""
    from ray.tune.execution import class_cache

    saved = class_cache.DEFAULT_ENV_VARS
    class_cache.DEFAULT_ENV_VARS = {}
    try:
        yield
    finally:
        class_cache.DEFAULT_ENV_VARS = saved


def callback_counts(callbacks: list[Any] | None) -> dict[str, int]:
    """Ray Tune's count of callbacks by kind: a built-in class by its name, others as
    ``CustomLoggerCallback`` or ``CustomCallback``."""
    from ray.tune import Callback
    from ray.tune.logger import LoggerCallback
    from ray.tune.utils.callback import DEFAULT_CALLBACK_CLASSES

    built_in = set(INTEGRATION_CALLBACKS) | {cls.__name__ for cls in DEFAULT_CALLBACK_CLASSES}
    counts: dict[str, int] = {}
    for callback in callbacks or []:
        if not isinstance(callback, Callback):
            continue  # Tune refuses it later
        name = type(callback).__name__
        if name not in built_in:
            name = "CustomLoggerCallback" if isinstance(callback, LoggerCallback) else "CustomCallback"
        counts[name] = counts.get(name, 0) + 1
    return counts


@contextmanager
def callback_usage_by_name() -> Iterator[None]:
    """Inside, Ray Tune's callback usage tag is recorded without importing its integrations
    (with Ray's own recorder; a Ray without it keeps its own tagging)."""
    from ray.air._internal import usage

    record, keys = getattr(usage, "record_extra_usage_tag", None), getattr(usage, "TagKey", None)
    if record is None or not hasattr(keys, "AIR_CALLBACKS"):
        yield
        return

    def tag_callbacks(callbacks: list[Any] | None) -> bool:
        counts = callback_counts(callbacks)
        if counts:
            record(keys.AIR_CALLBACKS, json.dumps(counts))
        return bool(counts)

    saved = usage.tag_callbacks
    usage.tag_callbacks = tag_callbacks
    try:
        yield
    finally:
        usage.tag_callbacks = saved
