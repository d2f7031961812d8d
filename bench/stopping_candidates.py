"""Candidate stopping rules replayed on stored fixed-budget searches (issue 47, the replay
target): each candidate reads validation only, the same way for both arms, never test
accuracy nor which arm leads. Prints per candidate the pairs that kept their fixed-budget
verdict and the trials and training seconds the stops spend. Nothing trains.

    python bench/stopping_candidates.py --store runs/store --search replay-webkb
    python bench/stopping_candidates.py --store runs/store --search replay-semi     # held out

The candidates (``flat`` and ``flat-or-same`` are registered rules; the others are added to
this process's registry only):

- ``flat``: the winner moved by at most its own standard error over the last half;
- ``flat-2se``: the same with two standard errors;
- ``flat-path``: the same against sqrt(SE^2 + path^2), path the standard deviation of the
  maximum of k trials drawn with replacement from the first k (the exact bootstrap of the
  maximum: P(max <= v_(i)) = (i / k)^k), the spread the searcher's path puts on a winner;
- ``same-winner``: the winner among the first k is the winner among the first k - 5;
- ``same-winner-half``: ... the winner among the first k // 2;
- ``flat-or-same``: ``flat`` or ``same-winner`` (registered, opt-in).

Measured figures and which corpus each rule was designed on: docs/adaptive.md.
"""

from __future__ import annotations

import argparse

import numpy as np

from orthotune.cli import default_store, run_script
from orthotune.reports import Filters, adaptive_replay
from orthotune.search import LOOK_STEP, STOPPING_RULES, ArmTrials, StoppingRule


def _at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    taken = np.take_along_axis(np.asarray(values, dtype=float), np.maximum(index, 0)[..., None], axis=-1)[..., 0]
    return np.where(index >= 0, taken, np.nan)


def _moved_within(arm: ArmTrials, k: int, scale: np.ndarray) -> np.ndarray:
    now, half = arm.winners[..., k - 1], arm.winners[..., max(k // 2, 1) - 1]
    with np.errstate(invalid="ignore"):
        return (_at(arm.val, now) - _at(arm.val, half) <= scale) & (now >= 0)


def _own_error(arm: ArmTrials, k: int) -> np.ndarray:
    now = arm.winners[..., k - 1]
    repeats = np.broadcast_to(np.asarray(arm.repeats, dtype=float), np.shape(arm.val))
    return _at(arm.val_std, now) / np.sqrt(_at(repeats, now))


def path_spread(arm: ArmTrials, k: int) -> np.ndarray:
    """The standard deviation of the maximum of k trials resampled from the first k (exact)."""
    values = np.sort(np.asarray(arm.val, dtype=float)[..., :k], axis=-1)  # NaN (failed) sort last
    finite = np.isfinite(values)
    count = finite.sum(-1, keepdims=True)
    rank = np.cumsum(finite, axis=-1)
    cdf = np.where(finite, (rank / np.maximum(count, 1)) ** np.maximum(count, 1), 0.0)
    mass = np.diff(np.concatenate([np.zeros_like(cdf[..., :1]), cdf], axis=-1), axis=-1) * finite
    filled = np.where(finite, values, 0.0)
    mean = (mass * filled).sum(-1, keepdims=True)
    return np.sqrt(np.maximum((mass * (filled - mean) ** 2).sum(-1), 0.0))


def same_winner(arm: ArmTrials, k: int, back: int) -> np.ndarray:
    now = arm.winners[..., k - 1]
    return (now == arm.winners[..., max(back, 1) - 1]) & (now >= 0)


CANDIDATES = {
    "flat-2se": lambda arm, k: _moved_within(arm, k, 2 * _own_error(arm, k)),
    "flat-path": lambda arm, k: _moved_within(arm, k, np.hypot(_own_error(arm, k), path_spread(arm, k))),
    "same-winner": lambda arm, k: same_winner(arm, k, k - LOOK_STEP),
    "same-winner-half": lambda arm, k: same_winner(arm, k, k // 2),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=default_store(),
                        help="the results store (default: $ORTHOTUNE_STORE, else runs/store)")
    parser.add_argument("--search", nargs="+", required=True, help="the fixed-budget searches to replay")
    args = parser.parse_args(argv)
    for name, settled in CANDIDATES.items():
        if name not in STOPPING_RULES:
            STOPPING_RULES.add(name, StoppingRule(name, name, settled, name))
    for name in ("flat", *CANDIDATES, "flat-or-same"):
        replay = adaptive_replay(args.store, Filters(searches=tuple(args.search)), rule=name)
        table = replay.table
        stops = " ".join(str(int(s)) if s == s and s is not None else "-" for s in table["stop"])
        print(f"{name:<18} kept {int(table['kept'].sum())} of {len(table)}; trials {replay.trial_fraction:.1%}; "
              f"training seconds {replay.seconds_fraction:.1%}; stops {stops}")
    return 0


if __name__ == "__main__":
    run_script(main)  # a store or search that is not there: one line and exit 2, as the CLI's
