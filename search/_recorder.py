"""Driver-side Tune callbacks: write every finished trial to the store; show progress.

A trial's rows are written once it ends, whatever the ending: ``completed`` (it trained to
its own end: max epochs or patience), ``stopped`` (ASHA stopped it: its row holds what it
had reached) or ``failed`` (a non-finite loss or weight, or an error in the trial). The
per-epoch history is collected from the reports, keyed by (config, repeat, epoch), so a
report replayed after ``Tuner.restore`` overwrites instead of duplicating; the file names
are keyed by trial id, so a trial written twice replaces its files.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

from ray.tune import Callback

from search._config import TrainConfig
from search._records import epoch_rows, trial_row
from search._store import Store
from search._train import COMPLETED, FAILED, STOPPED, ConfigResult, RunResult
from search._trainable import OBJECTIVE, member_configs, member_trial_id


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
                status = config_status([run.status for run in result.runs])
                reason = result.reason or ("stopped by ASHA" if status == STOPPED else "")
            else:
                so_far = last.get("runs") or []
                result = _partial_result(config, so_far[member] if member < len(so_far) else [],
                                         float(last.get("time_total_s") or 0.0))
                status, reason = (FAILED, error) if error else (STOPPED, "stopped by ASHA")
            trial_id = member_trial_id(trial.trial_id, member, len(members))
            row = trial_row(self.search, trial_id, result, status, reason, trial.trial_id)
            self.store.write_trial(row, epoch_rows(own, result.runs))


def _final_result(config: TrainConfig, values: dict[str, Any]) -> ConfigResult:
    runs = [RunResult(**run) for run in values["runs"]]
    return ConfigResult(config, runs, values["seconds"], values["seconds_per_epoch"], values["device"])


def _partial_result(config: TrainConfig, runs_so_far: list[dict[str, Any]], seconds: float) -> ConfigResult:
    """What a trial the scheduler stopped had reached, from its last report (Tune's
    ``time_total_s`` is its time so far, start-up included)."""
    runs = [RunResult(**run) for run in runs_so_far] or [RunResult(s, seed) for s, seed in config.runs()]
    for run in runs:
        run.status = STOPPED
    epochs = max((run.epochs for run in runs), default=0)
    return ConfigResult(config, runs, seconds, seconds / epochs if epochs else 0.0)


def _error_line(trial) -> str:
    error = trial.get_pickled_error() or trial.get_error()
    text = str(error).strip().splitlines() if error is not None else []
    return text[-1][:500] if text else "the trial raised an error"


def trial_statuses(trial) -> list[str] | None:
    """Each config's status in an ended trial; None while it runs or waits."""
    if trial.status not in ("ERROR", "TERMINATED"):
        return None
    members = len(member_configs(trial.config))
    return member_statuses(trial.last_result or {}, trial.status == "ERROR", members)


def member_statuses(last: dict[str, Any], errored: bool, members: int) -> list[str]:
    """completed | stopped | failed per config, from the trial's last report.

    Only a trial that finished sends a final report; without one, Tune's scheduler
    stopped it. Inside a pack, a config the rung board stopped has stopped runs.
    """
    if errored:
        return [FAILED] * members
    if not last.get("final"):
        return [STOPPED] * members
    return [config_status([run["status"] for run in result["runs"]]) for result in last["results"]]


def config_status(run_statuses: list[str]) -> str:
    for status in (FAILED, STOPPED):
        if status in run_statuses:
            return status
    return COMPLETED


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
        finished = tuple(counts[s] for s in (COMPLETED, STOPPED, FAILED))
        if finished == self._last_counts and now - self._last_print < self.every_s:
            return  # a line when a config ends, else every ``every_s`` seconds
        self._last_counts, self._last_print = finished, now
        print(self.line(trials, counts, now - self._start), file=self.stream or sys.stdout, flush=True)

    @staticmethod
    def line(trials, counts: Counter, elapsed: float) -> str:
        objectives = [t.last_result.get(OBJECTIVE) for t in trials if t.last_result]
        best = max((v for v in objectives if v is not None), default=None)
        done = counts[COMPLETED] + counts[STOPPED] + counts[FAILED]
        best_text = f"{best:.4f}" if best is not None else "-"
        return (f"[{elapsed:6.0f}s] {done} configs done: {counts[COMPLETED]} completed, "
                f"{counts[STOPPED]} stopped, {counts[FAILED]} failed; {counts['running']} running, "
                f"{counts['pending']} pending; best {OBJECTIVE} {best_text}")
