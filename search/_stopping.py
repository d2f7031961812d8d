"""When a pair's verdict is done: the stopping rules of an adaptive budget, as pure arithmetic.

A pair (one cell's original arm against its Ortho-GConv arm) is looked at after k trials per
arm, for k = ``first``, ``first + step``, ... and always at the ``maximum``; both arms move in
lockstep, so a look at k needs the first k trials of *both* arms ended. At a look the rule
reads validation only, and reads it the same way for both arms: each arm's winner among its
first k trials (the best validation mean, ties to the lower validation std: the first two
keys of the report's tie rule, the only ones that change what the rule reads) and its own
standard error. It never reads test accuracy nor which arm leads, so the decision to stop
carries no information about the test results beyond what validation already does, and the
paired test with Holm at each pair's stopping budget stays as valid as at a fixed budget
(the argument and its A/A measurement: ``docs/adaptive.md``).

Every function here takes arrays with any leading batch shape (the A/A simulation decides
10^4 families at once) and is a pure function of one arm's trials in the order the searcher
proposed them: nothing of Ray, the store or the reports. The rules are chosen by name
(:data:`STOPPING_RULES`); ``never`` is the fixed budget; ``flat-or-same`` an opt-in, more
lenient rule that failed its held-out check: it stops more, and changes more of the fixed
budget's verdicts than ``flat`` (the replays: ``docs/adaptive.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from orthotune.core import Registry, check

#: No look before this many trials per arm. Why 20: the default searcher is Optuna's TPE,
#: whose first 10 proposals are random; before 20 trials fewer than half of an arm's budget
#: was guided by the model, and a winner is close to the best of a few random draws (the
#: reports' few-trials warning states the same threshold).
FEW_TRIALS = 20
#: Trials per arm between two looks, unless the search says otherwise.
LOOK_STEP = 5


@dataclass(frozen=True)
class Looks:
    """Where a pair is looked at: ``first``, ``first + step``, ... below ``maximum``, then
    ``maximum`` (trials per arm, both arms alike)."""

    first: int
    step: int
    maximum: int

    def __post_init__(self) -> None:
        check(self.step >= 1, f"look step {self.step}: must be at least 1 trial per arm")
        check(self.first >= FEW_TRIALS,
              f"first look {self.first}: must be at least {FEW_TRIALS} trials per arm (before that the "
              f"searcher still proposes at random)")
        check(self.first <= self.maximum,
              f"first look {self.first}: beyond the maximum of {self.maximum} trials per arm")

    def at(self) -> tuple[int, ...]:
        """Every look, the maximum last."""
        return (*range(self.first, self.maximum, self.step), self.maximum)


def budget_looks(maximum: int, first: int = FEW_TRIALS, step: int = LOOK_STEP) -> Looks:
    """The looks of an adaptive budget of ``maximum`` trials per cell and arm (the space's
    ``samples`` or ``--samples``), refused in one line where the budget cannot hold one look."""
    check(maximum >= FEW_TRIALS,
          f"budget adaptive: the space gives {maximum} trial(s) per cell and arm; an adaptive budget needs at least "
          f"{FEW_TRIALS} (its first look comes after the searcher stops proposing at random)")
    return Looks(first, step, maximum)


@dataclass(frozen=True)
class ArmTrials:
    """One arm's trials in the order they were proposed: the validation mean over the
    repeats (NaN: failed, never a winner), its sample std and the number of repeats. Shapes
    ``(..., n)``; ``repeats`` broadcasts against them."""

    val: np.ndarray
    val_std: np.ndarray
    repeats: np.ndarray | int

    @property
    def n(self) -> int:
        return int(np.shape(self.val)[-1])

    @cached_property
    def winners(self) -> np.ndarray:
        """Index of the winner among the first j + 1 trials, for every j (-1: none yet):
        the highest validation mean, ties to the lower std, then the earlier trial (computed
        once: every look reads it)."""
        val = np.asarray(self.val, dtype=float)
        std = np.nan_to_num(np.asarray(self.val_std, dtype=float), nan=np.inf)
        position = np.broadcast_to(np.arange(val.shape[-1]), val.shape)
        # one order for all: a winner is the lowest rank among its prefix (NaN validation last)
        order = np.lexsort((position, std, np.where(np.isnan(val), np.inf, -val)), axis=-1)
        ranks = np.argsort(order, axis=-1)
        best = np.minimum.accumulate(ranks, axis=-1)
        index = np.take_along_axis(order, best, axis=-1)
        seen = np.maximum.accumulate(~np.isnan(val), axis=-1)
        return np.where(seen, index, -1)


def _at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[..., index]`` per batch row; NaN where ``index`` is -1."""
    taken = np.take_along_axis(np.asarray(values, dtype=float), np.maximum(index, 0)[..., None], axis=-1)[..., 0]
    return np.where(index >= 0, taken, np.nan)


def flat_on_validation(arm: ArmTrials, k: int, errors: float = 1.0) -> np.ndarray:
    """Whether the arm's winner among its first k trials is at most ``errors`` of its own
    standard errors (validation std over the square root of the repeats) above the winner
    among its first k // 2: the last half of the budget did not move it beyond its noise."""
    winners = arm.winners
    now, half = winners[..., k - 1], winners[..., max(k // 2, 1) - 1]
    repeats = np.broadcast_to(np.asarray(arm.repeats, dtype=float), np.shape(arm.val))
    error = _at(arm.val_std, now) / np.sqrt(_at(repeats, now))
    moved = _at(arm.val, now) - _at(arm.val, half)
    with np.errstate(invalid="ignore"):
        return (moved <= errors * error) & (now >= 0)


def same_winner(arm: ArmTrials, k: int, back: int = LOOK_STEP) -> np.ndarray:
    """Whether the arm's winner among its first k trials is the winner among its first
    k - ``back``: its last trials changed nothing the verdict reads of this arm."""
    winners = arm.winners
    now = winners[..., k - 1]
    return (now == winners[..., max(k - back, 1) - 1]) & (now >= 0)


def flat_or_same(arm: ArmTrials, k: int) -> np.ndarray:
    """``flat`` or ``same_winner`` over the last :data:`LOOK_STEP` trials (the ``flat-or-same`` rule)."""
    return flat_on_validation(arm, k) | same_winner(arm, k)


def never(arm: ArmTrials, k: int) -> np.ndarray:
    """The fixed budget: no arm is ever settled before the maximum."""
    return np.zeros(np.shape(arm.val)[:-1], dtype=bool)


@dataclass(frozen=True)
class StoppingRule:
    """A rule by name: ``settled(arm, k)`` per arm (the same function for both arms), the rule
    in words (``text``) and why a pair stopped at k (``reason``)."""

    name: str
    text: str
    settled: Callable[[ArmTrials, int], np.ndarray]
    why: str  # formatted with k and half (k // 2 + 1)

    def reason(self, k: int) -> str:
        return self.why.format(k=k, half=k // 2 + 1)


STOPPING_RULES: Registry[StoppingRule] = Registry("stopping rule")
STOPPING_RULES.add("flat", StoppingRule(
    "flat",
    "a pair stops at a look k when neither arm's validation-selected winner among its first k trials is more "
    "than its own standard error (validation std over the square root of its repeats) above the winner among "
    "its first k // 2 trials; validation only, read the same way for both arms",
    flat_on_validation, "both arms flat on validation over k = {half}..{k}"))
STOPPING_RULES.add("flat-or-same", StoppingRule(
    "flat-or-same",
    f"an arm is settled at a look k when it is flat (the flat rule) or its validation-selected winner among its "
    f"first k trials is the winner among its first k - {LOOK_STEP} (its last {LOOK_STEP} trials changed nothing the "
    f"verdict reads); a pair stops when both arms are; validation only, read the same way for both arms; "
    f"it changes more of the fixed budget's verdicts than flat on held-out corpora (docs/adaptive.md#citeseer)",
    flat_or_same, f"both arms flat on validation over k = {{half}}..{{k}} or unchanged winners over the last "
    f"{LOOK_STEP} trials"))
STOPPING_RULES.add("never", StoppingRule(
    "never", "no pair stops before the maximum: the fixed budget", never, "the maximum reached"))


def stopping_k(rule: StoppingRule, looks: Looks, original: ArmTrials, ortho: ArmTrials) -> np.ndarray:
    """Trials per arm at which each pair stops: the first look where both arms are settled,
    else the maximum. Both arms need ``looks.maximum`` trials (the replay and the simulation
    hold whole searches; a search still running asks :func:`stop_of`)."""
    check(min(original.n, ortho.n) >= looks.maximum,
          f"stopping_k needs {looks.maximum} trials per arm; got {original.n} and {ortho.n}")
    shape = np.broadcast_shapes(np.shape(original.val)[:-1], np.shape(ortho.val)[:-1])
    out = np.full(shape, looks.maximum, dtype=np.int64)
    open_ = np.ones(shape, dtype=bool)
    for k in looks.at()[:-1]:
        done = open_ & rule.settled(original, k) & rule.settled(ortho, k)
        out[done] = k
        open_ &= ~done
    return out


@dataclass(frozen=True)
class Stop:
    """One pair's stop: ``k`` trials per arm (None: still open, next look at ``next_look``)
    and why, in words."""

    k: int | None
    reason: str
    next_look: int | None = None


def stop_of(rule: StoppingRule, looks: Looks, *arms: ArmTrials) -> Stop:
    """The stop of one pair (or group of arms: a space's named arms on one dataset) whose
    arms hold ``arm.n`` ended trials so far (1-d arrays): its first look where every arm is
    settled, the maximum, or still open."""
    check(len(arms) >= 2, f"stop_of compares two arms or more, got {len(arms)}")
    ended = min(arm.n for arm in arms)  # lockstep: a look at k waits for every arm's first k
    for k in looks.at():
        if k > ended:
            return Stop(None, f"open: next look at {k} trials per arm", k)
        if k == looks.maximum:
            return Stop(k, "the maximum reached")
        if all(bool(rule.settled(arm, k)) for arm in arms):
            return Stop(k, rule.reason(k))
    raise AssertionError("unreachable: the last look is the maximum")  # pragma: no cover


def stopping_rule(name: str) -> StoppingRule:
    """The rule called ``name``; an unknown name fails listing the valid ones."""
    return STOPPING_RULES.get(name)


def trial_fraction(stops: np.ndarray, maximum: int) -> float:
    """Trials trained under the stops as a share of the fixed budget's (both arms alike)."""
    stops = np.asarray(stops, dtype=float)
    return float(stops.sum() / (maximum * stops.size)) if stops.size else math.nan

