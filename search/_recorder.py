"""Driver-side Tune callbacks: write every finished trial to the store; show progress.

A trial's rows are written once it ends, whatever the ending: ``completed`` (it trained to
its own end: max epochs or patience), ``stopped`` (ASHA stopped it: its row holds what it
had reached) or ``failed`` (a non-finite loss or weight, or an error in the trial). The
per-epoch history is collected from the reports, keyed by (config, repeat, epoch), so a
report replayed after ``Tuner.restore`` overwrites instead of duplicating; the file names
are keyed by trial id, so a trial written twice replaces its files.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from typing import Any

from ray.tune import Callback

from search._config import TrainConfig
from search._records import epoch_rows, trial_row
from search._store import Store
from search._train import COMPLETED, FAILED, ConfigResult, RunResult
from search._trainable import OBJECTIVE, member_configs

STOPPED = "stopped"


def member_trial_id(tune_trial_id: str, member: int, members: int) -> str:
    return tune_trial_id if members == 1 else f"{tune_trial_id}-{member}"


class StoreRecorder(Callback):
    """Writes each trial's ``trials`` row(s) and ``epochs`` rows when the trial ends."""

    def __init__(self, store_uri: str, search: str) -> None:
        self.store_uri, self.search = store_uri, search
        self._history: dict[str, dict[tuple[int, int, int], dict[str, float]]] = {}
        self._store: Store | None = None

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles callbacks with its state
        return {"store_uri": self.store_uri, "search": self.search, "_history": {}, "_store": None}

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store.open(self.store_uri)
        return self._store

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        history = self._history.setdefault(trial.trial_id, {})
        for member, repeat, epoch, loss, val, test in result.get("history", []):
            history[(int(member), int(repeat), int(epoch))] = {
                "train_loss": loss, "val_acc": val, "test_acc": test}

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self._write(trial, error=None)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._write(trial, error=_error_line(trial))

    def _write(self, trial, error: str | None) -> None:
        history = self._history.pop(trial.trial_id, {})
        members = member_configs(trial.config)
        last = trial.last_result or {}
        for member, values in enumerate(members):
            config = TrainConfig.from_dict(values)
            own = {(r, e): v for (m, r, e), v in history.items() if m == member}
            if last.get("final") and error is None:
                result = _final_result(config, last["results"][member])
                status, reason = result.status, result.reason
            else:
                result = _partial_result(config, own)
                status, reason = (FAILED, error) if error else (STOPPED, "stopped by the scheduler")
            trial_id = member_trial_id(trial.trial_id, member, len(members))
            row = trial_row(self.search, trial_id, result, status, reason, trial.trial_id)
            self.store.write_trial(row, epoch_rows(own, result.runs))


def _final_result(config: TrainConfig, values: dict[str, Any]) -> ConfigResult:
    runs = [RunResult(**run) for run in values["runs"]]
    return ConfigResult(config, runs, values["seconds"], values["seconds_per_epoch"], values["device"])


def _partial_result(config: TrainConfig, history: dict[tuple[int, int], dict[str, float]]) -> ConfigResult:
    """What a stopped trial reached: each repeat at its validation-best epoch so far."""
    runs = [RunResult(split, seed, status=STOPPED) for split, seed in config.runs()]
    for (repeat, epoch), values in sorted(history.items()):
        run = runs[repeat]
        run.epochs = epoch
        if values["val_acc"] > run.val_acc or math.isnan(run.val_acc):  # first best epoch wins
            run.val_acc, run.test_acc, run.best_epoch = values["val_acc"], values["test_acc"], epoch
    return ConfigResult(config, runs)


def _error_line(trial) -> str:
    error = trial.get_pickled_error() or trial.get_error()
    text = str(error).strip().splitlines() if error is not None else []
    return text[-1][:500] if text else "the trial raised an error"


def trial_status(trial) -> str | None:
    """completed | stopped | failed for an ended trial; None while it runs or waits."""
    if trial.status not in ("ERROR", "TERMINATED"):
        return None
    return ended_status(trial.last_result or {}, errored=trial.status == "ERROR")


def ended_status(last: dict[str, Any], errored: bool) -> str:
    """An ended trial's status from its last report (a final report only when it finished)."""
    if errored:
        return FAILED
    if not last.get("final"):
        return STOPPED
    failed = any(run["status"] == FAILED for result in last["results"] for run in result["runs"])
    return FAILED if failed else COMPLETED


class ProgressLine(Callback):
    """One concise line: trials by status and the best objective so far."""

    def __init__(self, every_s: float = 10.0, stream=None) -> None:
        self.every_s, self.stream = every_s, stream
        self._last_print, self._last_counts, self._start = 0.0, None, time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        return {"every_s": self.every_s, "stream": None, "_last_print": 0.0,
                "_last_counts": None, "_start": time.monotonic()}

    def on_step_end(self, iteration, trials, **info) -> None:
        counts = Counter(trial_status(t) or t.status.lower() for t in trials)
        now = time.monotonic()
        if counts == self._last_counts and now - self._last_print < self.every_s:
            return
        self._last_counts, self._last_print = counts, now
        print(self.line(trials, counts, now - self._start), file=self.stream or sys.stdout, flush=True)

    @staticmethod
    def line(trials, counts: Counter, elapsed: float) -> str:
        objectives = [t.last_result.get(OBJECTIVE) for t in trials if t.last_result]
        best = max((v for v in objectives if v is not None), default=None)
        done = counts[COMPLETED] + counts[STOPPED] + counts[FAILED]
        best_text = f"{best:.4f}" if best is not None else "-"
        return (f"[{elapsed:6.0f}s] {done}/{len(trials)} done: {counts[COMPLETED]} completed, "
                f"{counts[STOPPED]} stopped, {counts[FAILED]} failed; {counts['running']} running, "
                f"{counts['pending']} pending; best {OBJECTIVE} {best_text}")
