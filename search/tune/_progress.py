"""A progress line for searches, fed from Tune's trial events (the store is written elsewhere)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

from ray.tune import Callback

from orthotune.core import Status
from orthotune.search.tune._recorder import trial_statuses
from orthotune.search.tune._trainable import OBJECTIVE


class ProgressLine(Callback):
    """One concise line: trials by status and the best objective so far."""

    def __init__(self, every_s: float = 30.0, stream=None) -> None:
        self.every_s, self.stream = every_s, stream
        self._last_print, self._last_counts, self._start = 0.0, None, time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        return {"every_s": self.every_s, "stream": None, "_last_print": 0.0,
                "_last_counts": None, "_start": time.monotonic()}

    def on_step_end(self, iteration, trials, **info) -> None:
        counts = Counter()
        for trial in trials:
            counts.update(trial_statuses(trial) or [trial.status.lower()])
        now = time.monotonic()
        finished = tuple(counts[s] for s in tuple(Status))
        if finished == self._last_counts and now - self._last_print < self.every_s:
            return  # a line when a config ends, else every ``every_s`` seconds
        self._last_counts, self._last_print = finished, now
        print(self.line(trials, counts, now - self._start), file=self.stream or sys.stdout, flush=True)

    @staticmethod
    def line(trials, counts: Counter, elapsed: float) -> str:
        objectives = [t.last_result.get(OBJECTIVE) for t in trials if t.last_result]
        best = max((v for v in objectives if v is not None), default=None)
        done = counts[Status.COMPLETED] + counts[Status.STOPPED] + counts[Status.FAILED]
        best_text = f"{best:.4f}" if best is not None else "-"
        return (f"[{elapsed:6.0f}s] {done} configs done: {counts[Status.COMPLETED]} completed, "
                f"{counts[Status.STOPPED]} stopped, {counts[Status.FAILED]} failed; {counts['running']} running, "
                f"{counts['pending']} pending; best {OBJECTIVE} {best_text}")
