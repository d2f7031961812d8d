"""The benchmarks' one hook into a search: :func:`instrumented`.

Not part of search's face (``orthotune.search.__all__``): ``bench/throughput.py
--breakdown`` uses it to say where a search's wall goes. Inside it, the driver's own parts
of a search (the searcher, the store's writes, TensorBoard, the progress display) run
through the benchmark's timer, and every ended trial hands over its worker's timings
(where the worker's time went, ``_trainable.WorkerTimings``), which the workers send only
while ``ORTHOTUNE_TIMINGS=1`` is in their environment. Which methods do each part is this
module's knowledge, not the benchmark's, so a renamed method is changed here alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from orthotune.search._live import TensorBoardLogger
from orthotune.search._progress import SearchProgress
from orthotune.search._recorder import StoreRecorder
from orthotune.search._requeue import Requeue
from orthotune.search._trainable import TIMINGS_ENV

__all__ = ["DRIVER_PARTS", "instrumented"]

#: The driver's parts of a search, each with the class and the methods that do it.
DRIVER_PARTS: dict[str, tuple[type, tuple[str, ...]]] = {
    "searcher": (Requeue, ("suggest", "on_trial_result", "on_trial_complete")),
    "store writes (recorder)": (StoreRecorder, ("_write",)),
    "history kept per report (recorder)": (StoreRecorder, ("on_trial_result",)),
    "TensorBoard event files": (TensorBoardLogger,
                                ("on_trial_result", "on_trial_complete", "on_trial_error", "on_experiment_end")),
    "progress display": (SearchProgress, ("on_step_end", "on_trial_complete", "on_trial_error", "on_experiment_end")),
}

#: The callback every ended trial passes through: its last result holds the worker's timings.
TRIAL_END = (StoreRecorder, "on_trial_complete")

#: A benchmark's timer: ``wrap(part, method)`` returns the method timed as ``part``.
Wrap = Callable[[str, Callable[..., Any]], Callable[..., Any]]


@contextmanager
def instrumented(wrap: Wrap, on_trial_end: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Inside, each method of :data:`DRIVER_PARTS` is ``wrap(part, method)`` (parts in that
    order), each ended trial's worker timings go to ``on_trial_end``, and ``ORTHOTUNE_TIMINGS``
    is set: enter it before Ray starts, so that the workers inherit it. Everything is
    restored after."""
    patched: list[tuple[type, str, Any]] = []
    for part, (cls, methods) in DRIVER_PARTS.items():
        for name in methods:
            patched.append((cls, name, getattr(cls, name)))
            setattr(cls, name, wrap(part, getattr(cls, name)))
    owner, name = TRIAL_END
    patched.append((owner, name, getattr(owner, name)))
    setattr(owner, name, _collecting(getattr(owner, name), on_trial_end))
    saved = os.environ.get(TIMINGS_ENV)
    os.environ[TIMINGS_ENV] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(TIMINGS_ENV, None)
        else:
            os.environ[TIMINGS_ENV] = saved
        for cls, method, original in reversed(patched):
            setattr(cls, method, original)


def _collecting(on_trial_complete: Callable[..., None], on_trial_end: Callable[[dict[str, Any]], None]):
    def collect(recorder, iteration, trials, trial, **info):
        timings = (trial.last_result or {}).get("timings")
        if timings:
            on_trial_end(timings)
        return on_trial_complete(recorder, iteration, trials, trial, **info)
    return collect
