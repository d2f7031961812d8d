"""Trial groups: one Ray trial trains several configs (``--configs-per-trial``) as one
packed model (the training layer's pack: configs that share a pack key).

How ASHA's per-config decisions survive grouping:

- **Suggesting.** :class:`GroupSearcher` wraps the real searcher (Optuna's samplers). Each
  config it is given is a trial of that searcher under its own id; configs wait in a small
  buffer until ``group_size`` of them share a pack key (dataset, backbone, depth, form and
  the structural training values), and then go to Ray as one trial ``{"group": [...]}``.
  When a group ends, each config's own objective goes back to the searcher under its own
  id, so Optuna learns from every config, not from groups.
- **Stopping.** Ray Tune's scheduler sees groups, so it runs them FIFO; ASHA runs one level
  down, per config: :class:`RungBoard` is a Ray actor holding Ray's own
  ``AsyncHyperBandScheduler``, fed each config's objective at the report cadence under
  the config's id. A config it stops is frozen inside the group at what it reached (the
  trainer drops it from the active mask) and is stored as ``stopped``; the rest of the
  group trains on. A group ends when its last config ends.
- **Cells.** The board's scheduler keeps one ASHA per cell (dataset, backbone, depth,
  arm), as Tune's does without packing: a config is compared only within its cell.
- **Resuming.** A resumed search rebuilds the inner searcher and the board's rungs from
  the store's rows (``_replay``); nothing here is pickled.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import ray
from ray.tune.search import Searcher

from orthotune.core import TrainConfig
from orthotune.search._checkpoints import save_summary, stored_state_refused
from orthotune.search._objective import RUNG_SCORE, TIME_ATTR
from orthotune.training import pack_key

PackKey = Callable[[dict[str, Any]], tuple]


def config_pack_key(values: dict[str, Any]) -> tuple:
    return pack_key(TrainConfig.from_dict(values))


class PointSearcher(Searcher):
    """Suggests given configs in order, each once (the grid: every point of a space).

    Ray's ``BasicVariantGenerator`` resolves ``points_to_evaluate`` against a parameter
    space and cannot take groups (lists of configs) as points, hence this.
    """

    def __init__(self, points: list[dict[str, Any]], metric: str | None = None, mode: str | None = None) -> None:
        super().__init__(metric=metric, mode=mode)
        self.points, self.given = list(points), 0

    def suggest(self, trial_id: str) -> dict[str, Any] | str:
        if self.given >= len(self.points):
            return Searcher.FINISHED
        self.given += 1
        return copy.deepcopy(self.points[self.given - 1])

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        pass

    def save(self, checkpoint_path: str) -> None:
        save_summary({"points": len(self.points), "given": self.given}, checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        stored_state_refused(checkpoint_path)


class GroupSearcher(Searcher):
    """Groups the configs a searcher suggests into trial groups that share a pack key."""

    def __init__(self, inner: Searcher, group_size: int, samples: int, key: PackKey = config_pack_key,
                 metric: str | None = None, mode: str | None = None) -> None:
        super().__init__(metric=metric, mode=mode)
        self.inner, self.group_size, self.samples, self.key = inner, group_size, samples, key
        self.buffer: list[tuple[str, dict[str, Any]]] = []
        self.members: dict[str, list[str]] = {}
        self.asked, self.inner_done = 0, False
        self.starved = False  # the inner searcher proposed nothing last time (an adaptive look waits)

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        super().set_search_properties(metric, mode, config, **spec)
        return self.inner.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        self._fill()
        group = self._next_group()
        if group is None:
            return Searcher.FINISHED if self.inner_done and not self.buffer else None
        self.members[trial_id] = [member_id for member_id, _ in group]
        return {"group": [config for _, config in group]}

    def _fill(self) -> None:
        """Ask the real searcher until the buffer holds a few groups' worth of configs."""
        while len(self.buffer) < 4 * self.group_size and not self.inner_done:
            if self.asked >= self.samples:
                self.inner_done = True
                break
            member_id = f"config{self.asked:06d}"
            suggestion = self.inner.suggest(member_id)
            self.starved = suggestion is None
            if suggestion == Searcher.FINISHED:
                self.inner_done = True
            elif suggestion is not None:
                self.asked += 1
                self.buffer.append((member_id, suggestion))
            else:
                break

    def _next_group(self) -> list[tuple[str, dict[str, Any]]] | None:
        groups: dict[tuple, list[int]] = {}
        for index, (_, config) in enumerate(self.buffer):
            groups.setdefault(self.key(config), []).append(index)
        if not groups:
            return None
        largest = max(groups.values(), key=len)
        full = len(largest) >= self.group_size
        # a starved inner searcher may wait for these very configs (a look needs them ended)
        if not (full or self.inner_done or self.starved or len(self.buffer) >= 4 * self.group_size):
            return None
        chosen = largest[: self.group_size]
        group = [self.buffer[i] for i in chosen]
        self.buffer = [entry for i, entry in enumerate(self.buffer) if i not in set(chosen)]
        return group

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass  # configs are judged per config on the rung board, not by the searcher

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        members = self.members.pop(trial_id, [])
        values = (result or {}).get("member_val_acc") or []
        for index, member_id in enumerate(members):
            own = {self.metric: values[index]} if index < len(values) else None
            self.inner.on_trial_complete(member_id, own, error=error or own is None)

    def save(self, checkpoint_path: str) -> None:
        save_summary({"asked": self.asked, "buffered": len(self.buffer), "groups_running": len(self.members)},
                     checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        stored_state_refused(checkpoint_path)


def group_points(points: list[dict[str, Any]], group_size: int, key: PackKey = config_pack_key) -> list[dict]:
    """Grid points grouped by pack key (in order) into trial groups of at most ``group_size``."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for point in points:
        groups.setdefault(key(point), []).append(point)
    return [{"group": group[i:i + group_size]} for group in groups.values()
            for i in range(0, len(group), group_size)]


class Member:
    """What Ray's ASHA reads of a trial: its id (and, for a per-cell scheduler, its cell)."""

    def __init__(self, trial_id: str, cell: str | None = None) -> None:
        self.trial_id, self.cell, self.config = trial_id, cell, {}


@ray.remote(num_cpus=0)
class RungBoard:
    """Ray's own ASHA, deciding per config for configs trained inside trial groups."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.known: set[str] = set()

    def decide(self, reports: list[tuple[str, str, int, float]]) -> list[bool]:
        """For each ``(config id, cell, epoch, rung score)``: should that config stop now?

        The scheduler is a :class:`~orthotune.search._cells.CellScheduler`: a config is
        compared only with configs of its own cell.
        """
        from ray.tune.schedulers import TrialScheduler

        verdicts = []
        for member_id, cell, epoch, score in reports:
            member = Member(member_id, cell)
            if member_id not in self.known:
                self.known.add(member_id)
                self.scheduler.on_trial_add(None, member)
            action = self.scheduler.on_trial_result(None, member, {TIME_ATTR: epoch, RUNG_SCORE: score})
            verdicts.append(action == TrialScheduler.STOP)
        return verdicts
