"""The search's end when no node of the cluster can run a trial (``_guards`` says why): a Tune
callback, so this module loads Ray."""

from __future__ import annotations

import time
from typing import Any

from ray.tune import Callback

from orthotune.search._guards import NoNodeLeft

#: How often the cluster's resources are read while every trial waits.
CHECK_EVERY_S = 2.0


class NodeWatch(Callback):
    """Ends the search when, for ``wait_s`` seconds, no trial runs, some wait, and the whole
    cluster has too few resources for any of them (every node that could run one is gone)."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self._since: float | None = None  # when the cluster was first seen unable to run a trial
        self._checked = 0.0

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if any(trial.status == "RUNNING" for trial in trials):
            self._since = None
            return
        waiting = [trial for trial in trials if trial.status == "PENDING"]
        now = time.monotonic()
        if not waiting or now - self._checked < CHECK_EVERY_S:
            if not waiting:
                self._since = None
            return
        self._checked = now
        import ray

        cluster = ray.cluster_resources()
        needs = [_required(trial) for trial in waiting]
        if any(_fits(need, cluster) for need in needs):
            self._since = None
            return
        self._since = self._since or now
        if now - self._since >= self.wait_s:
            need = ", ".join(f"{amount:g} {name}" for name, amount in sorted(needs[0].items()))
            have = ", ".join(f"{amount:g} {name}" for name, amount in sorted(cluster.items())
                             if name in needs[0]) or "none of them"
            raise NoNodeLeft(f"no node of the Ray cluster can run a trial (a trial needs {need}; the cluster "
                             f"has {have}) for {self.wait_s:g} s; {len(waiting)} trial(s) waiting")


def _required(trial: Any) -> dict[str, float]:
    needs = trial.placement_group_factory.required_resources
    return {name: float(amount) for name, amount in needs.items() if amount}


def _fits(need: dict[str, float], cluster: dict[str, float]) -> bool:
    return all(cluster.get(name, 0.0) >= amount for name, amount in need.items())
