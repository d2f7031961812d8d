"""The driver-side Tune callback that writes every finished trial to the store.

A trial's rows are written once it ends, whatever the ending: ``completed`` (it trained to
its own end: max epochs or patience), ``stopped`` (ASHA stopped it: its row holds what it
had reached) or ``failed`` (a non-finite loss or weight, or an error in the trial). The
per-epoch history is collected from the reports, keyed by (config, repeat, epoch), so a
report of an attempt Tune retried (its worker died) overwrites instead of duplicating; the file names
are keyed by trial id, so a trial written twice replaces its files. After each trial the
search's summary (its trial counts by status, what ``orthotune status`` shows) is rewritten.
"""

from __future__ import annotations

import shlex
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from ray.tune import Callback

from orthotune.core import ConfigResult, EpochRow, RunResult, Status, TrainConfig
from orthotune.search._allocation import AdaptiveBudget
from orthotune.search._cell_key import cell_key, member_configs
from orthotune.search._requeue import RetryLedger
from orthotune.search._trainable import error_line, member_trial_id
from orthotune.store import Store, compact, epoch_rows, trial_row


class StoreRecorder(Callback):
    """Writes each trial's ``trials`` row(s) and ``epochs`` rows when the trial ends."""

    def __init__(self, store_uri: str, search: str, ledger: RetryLedger | None = None,
                 fence: Callable[[], None] | None = None, budget: AdaptiveBudget | None = None) -> None:
        self.store_uri, self.search, self.ledger = store_uri, search, ledger
        self.fence = fence  # the driver's lease check: a driver whose lease was taken over writes nothing
        self.budget = budget  # ``--budget adaptive``: each stored row is told to it (its looks)
        self._history: dict[str, dict[tuple[int, int, int], dict[str, float]]] = {}
        self._store: Store | None = None
        #: Each stored trial's status (this session's and, read once, the earlier sessions'):
        #: the summary's counts. A trial written again (Tune retried it) counts once.
        self._statuses: dict[str, str] | None = None

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles callbacks with its state
        return {"store_uri": self.store_uri, "search": self.search, "ledger": None, "fence": None, "_history": {},
                "_store": None, "_statuses": None, "budget": None}

    def setup(self, **info) -> None:
        self._stored_statuses()  # a resumed search's earlier trials: read now, not at its first trial's end

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store.open(self.store_uri).fenced(self.fence)
        return self._store

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        history = self._history.setdefault(trial.trial_id, {})
        for values in result.get("history", []):
            row = EpochRow.from_list(values)
            history[(row.member, row.repeat, row.epoch)] = row.values()

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self._write(trial, error=None)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        if self.ledger is not None and trial.trial_id in self.ledger.requeued:
            self._history.pop(trial.trial_id, None)  # its config trains again as a new trial
            return
        self._write(trial, error=_error_line(trial))

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        """Tune restarts a trial whose worker died (FailureConfig): it trains again from its
        first epoch, so the history of the lost attempt goes."""
        self._history.pop(trial.trial_id, None)

    def _write(self, trial, error: str | None) -> None:
        history = self._history.pop(trial.trial_id, {})
        members = member_configs(trial.config)
        last = trial.last_result or {}
        for member, values in enumerate(members):
            config = TrainConfig.from_dict(values)
            own = {(r, e): v for (m, r, e), v in history.items() if m == member}
            if last.get("final") and error is None:
                result = _final_result(config, last["results"][member])
                status = result.status
                reason = result.reason or ("stopped by ASHA" if status == Status.STOPPED else "")
            else:
                so_far = last.get("runs") or []
                result = _partial_result(config, so_far[member] if member < len(so_far) else [],
                                         float(last.get("time_total_s") or 0.0))
                status, reason = (Status.FAILED, error) if error else (Status.STOPPED, "stopped by ASHA")
            trial_id = member_trial_id(trial.trial_id, member, len(members))
            row = trial_row(self.search, trial_id, result, status, reason, trial.trial_id)
            self.store.write_trial(row, epoch_rows(own, result.runs))
            if self.budget is not None:
                self.budget.record_row(cell_key(values), row)
            self._stored_statuses()[trial_id] = row["status"]
        self.store.write_summary(self.search, Counter(self._stored_statuses().values()))

    def _stored_statuses(self) -> dict[str, str]:
        if self._statuses is None:
            self._statuses = self.store.trial_statuses(self.search)
        return self._statuses


def compact_finished(store: Store, search: str) -> None:
    """Merge a finished search's trial files into compacted ones (its driver holds the lease).
    A store that cannot take it keeps the trial files, which read as before: one warning line."""
    try:
        compact(store, search)
    except OSError as error:
        command = shlex.join(["orthotune", "store", "compact", "--search", search, "--store", store.uri])
        print(f"orthotune: warning: search {search!r} finished, but its trial files were not compacted "
              f"({error_line(error)}); they read as they are; compact them with: {command}", file=sys.stderr)


def _final_result(config: TrainConfig, values: dict[str, Any]) -> ConfigResult:
    runs = [_run(run) for run in values["runs"]]
    return ConfigResult(config, runs, values["seconds"], values["seconds_per_epoch"], values["device"])


def _partial_result(config: TrainConfig, runs_so_far: list[dict[str, Any]], seconds: float) -> ConfigResult:
    """What a trial the scheduler stopped had reached, from its last report (Tune's
    ``time_total_s`` is its time so far, start-up included)."""
    runs = [_run(run) for run in runs_so_far] or [RunResult(s, seed) for s, seed in config.runs()]
    for run in runs:
        run.status = Status.STOPPED
    epochs = max((run.epochs for run in runs), default=0)
    return ConfigResult(config, runs, seconds, seconds / epochs if epochs else 0.0)


def _error_line(trial) -> str:
    """Why Tune gave up on a trial (its worker died, or Ray failed under it), in one line:
    the first line of the latest failure in the trial's error file, which Tune writes as
    text beside a pickled copy (never unpickled here). Reading it can itself fail (a worker
    killed mid-write), which must not take the search down with it."""
    try:
        with open(trial.error_file) as source:
            failures = source.read().split("Failure # ")
    except (OSError, TypeError, AttributeError):
        return "the trial's worker failed"
    lines = [line.strip() for line in failures[-1].splitlines()[1:] if line.strip()]
    return f"the trial's worker failed: {lines[0]}"[:500] if lines else "the trial's worker failed"


def trial_statuses(trial) -> list[Status] | None:
    """Each config's status in an ended trial; None while it runs or waits."""
    if trial.status not in ("ERROR", "TERMINATED"):
        return None
    members = len(member_configs(trial.config))
    return member_statuses(trial.last_result or {}, trial.status == "ERROR", members)


def member_statuses(last: dict[str, Any], errored: bool, members: int) -> list[Status]:
    """completed | stopped | failed per config, from the trial's last report.

    Only a trial that finished sends a final report; without one, Tune's scheduler
    stopped it. Inside a pack, a config the rung board stopped has stopped runs.
    """
    if errored:
        return [Status.FAILED] * members
    if not last.get("final"):
        return [Status.STOPPED] * members
    return [Status.worst(run["status"] for run in result["runs"]) for result in last["results"]]


def _run(values: dict[str, Any]) -> RunResult:
    """A repeat's result from its reported JSON form."""
    return RunResult(**{**values, "status": Status(values["status"])})
