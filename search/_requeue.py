"""Configs whose trial Ray Tune gave up on for want of a worker: trained again.

Tune retries a trial whose worker dies while it trains (``FailureConfig(max_failures)``),
but not one whose worker dies before the trial runs: a new actor that fails to start on a
node being lost, or a reused actor whose node died while Tune was resetting it for the next
trial (``TuneController._process_trial_failure`` recovers RUNNING trials only). Such a trial
reaches the searcher as an error and the callbacks as a failed trial, although nothing in
its config failed: in orthotune a trial never raises to Tune (``train_trial`` stores its own
failures), so every error Tune reports is the worker's.

:class:`Requeue` wraps the search's searcher, as Ray Tune's ``search/repeater.py`` wraps one:
the config of a trial that errored is suggested again for the next trial Tune asks for, under
its first trial's id toward the inner searcher (an Optuna trial stays one trial), until the
config has had ``retries`` attempts beyond its first, counting those Tune made itself
(:class:`RetryLedger`, a callback, counts them). The store writes no row for the trial given
up on and the progress display leaves it out: the config's row is the new trial's.
"""

from __future__ import annotations

import copy
from collections import Counter, deque
from typing import Any

from ray.tune import Callback
from ray.tune.search import Searcher

from orthotune.search._checkpoints import save_summary, stored_state_refused


class RetryLedger(Callback):
    """Attempts per Tune trial (Tune's own retries included) and the trials whose config was
    suggested again; shared by :class:`Requeue`, the store's recorder and the progress display."""

    def __init__(self, retries: int) -> None:
        self.retries = retries
        self.recovered: Counter[str] = Counter()
        self.requeued: set[str] = set()

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        self.recovered[trial.trial_id] += 1

    def attempts(self, trial_id: str) -> int:
        """The attempts a trial that just errored made: Tune's retries and the last one."""
        return self.recovered[trial_id] + 1


class Requeue(Searcher):
    """Suggests again the config of a trial that errored, up to the ledger's ``retries``."""

    def __init__(self, inner: Searcher, ledger: RetryLedger, metric: str | None = None,
                 mode: str | None = None) -> None:
        super().__init__(metric=metric, mode=mode)
        self.inner, self.ledger = inner, ledger
        self.routes: dict[str, tuple[str, dict[str, Any]]] = {}  # Tune trial id -> (inner id, config)
        self.spent: Counter[str] = Counter()  # inner id -> attempts its config has made
        self.queue: deque[tuple[str, dict[str, Any]]] = deque()  # configs to train again
        self.inner_done = False

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        super().set_search_properties(metric, mode, config, **spec)
        return self.inner.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self.queue:
            inner_id, config = self.queue.popleft()
        else:
            config = None if self.inner_done else self.inner.suggest(trial_id)
            if config == Searcher.FINISHED:
                self.inner_done = True
            if not isinstance(config, dict):
                # finished only once no running trial can still hand its config back
                return Searcher.FINISHED if self.inner_done and not self.routes else None
            inner_id = trial_id
        self.routes[trial_id] = (inner_id, copy.deepcopy(config))
        return config

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if trial_id in self.routes:
            self.inner.on_trial_result(self.routes[trial_id][0], result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id not in self.routes:
            return
        inner_id, config = self.routes.pop(trial_id)
        if error:
            self.spent[inner_id] += self.ledger.attempts(trial_id)
            if self.spent[inner_id] <= self.ledger.retries:
                self.ledger.requeued.add(trial_id)
                self.queue.append((inner_id, config))
                return
        self.spent.pop(inner_id, None)
        self.inner.on_trial_complete(inner_id, result, error=error)

    # -- state: Tune checkpoints searchers; orthotune resumes from the store instead ---------

    def save(self, checkpoint_path: str) -> None:
        save_summary({"queued": len(self.queue), "requeued": len(self.ledger.requeued)}, checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        stored_state_refused(checkpoint_path)
