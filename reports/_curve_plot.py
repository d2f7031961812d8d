"""The tuning curve's figure, one per pair: the gain against trials per arm (its 95% CI as a
band, the zero line, the last half of the budget shaded), each arm's winner's test accuracy
against trials per arm, and the gain against the epochs each arm trained."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from orthotune.core import ARMS
from orthotune.reports._curve import MIN_TRIALS, PairCurve
from orthotune.reports._plots import STYLE, Figure, _legend, _panels, _png

BAND = dict(color="tab:purple", alpha=0.2, linewidth=0)
GAIN = dict(color="tab:purple", marker=".", markersize=4)


def curve_figures(curves: Sequence[PairCurve | None], stops: Sequence[object] = ()) -> list[Figure]:
    """One figure per pair whose curve is long enough to judge (``MIN_TRIALS`` trials per arm or
    more), in the summary's order; ``stops``: per curve, where an adaptive budget stopped it
    (None or NaN: no stop to mark)."""
    marks = list(stops) + [None] * (len(curves) - len(stops))
    return [_figure(curve, _stop(mark)) for curve, mark in zip(curves, marks)
            if curve is not None and len(curve.trials) >= MIN_TRIALS]


def _stop(mark: object) -> int | None:
    try:
        return int(mark) if mark is not None and mark == mark else None
    except (TypeError, ValueError):
        return None


def _figure(curve: PairCurve, stop: int | None = None) -> Figure:
    figure, (gain, accuracy, compute) = _panels(3, f"Tuning curve: {curve.label}", ncols=3)
    points = curve.trials
    n = int(points["k"].max())
    # the settled rule reads the points k > n/2
    gain.axvspan(n // 2 + 0.5, n + 0.5, color="grey", alpha=0.1, linewidth=0, label="last half")
    _gain(gain, points["k"], points)
    if stop is not None:  # where the adaptive budget stopped the pair
        gain.axvline(stop, color="tab:red", linewidth=1.0, linestyle="--", label=f"stopped at k = {stop}")
    # a pair's arms, or a comparison's baseline and arm (in the pair's two places, in that order)
    names = list(curve.trials_per_arm) if len(curve.trials_per_arm) == len(ARMS) else [a.name for a in ARMS]
    gain.set(xlabel="trials per arm (first k)", ylabel="gain (pts)", title=f"{names[1]} − {names[0]}")
    _legend(gain)
    for arm, name in zip(ARMS, names):
        values = 100 * pd.to_numeric(points[f"{arm.prefix}_test_acc"], errors="coerce")
        accuracy.step(points["k"], values, where="post", label=f"{name} winner", color=STYLE[arm.name]["color"])
    accuracy.set(xlabel="trials per arm (first k)", ylabel="test accuracy (%)", title="winners")
    accuracy.legend(fontsize="x-small", loc="best")  # inside: three panels leave no room beside
    _gain(compute, curve.epochs["epochs"], curve.epochs)
    compute.set(xlabel="epochs per arm (all repeats)", ylabel="gain (pts)", title="on a compute axis")
    for ax in (gain, accuracy):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    caption = (f"For k = 1..{n} trials per arm (in the order they started), each arm's validation-selected winner "
               f"among its first k trials (the report's tie rule) and the paired gain in test accuracy with its 95% "
               f"CI (band; dotted: zero); right: the same for a budget of epochs per arm (each arm's trials in "
               f"start order while their summed epochs fit). Shaded: the last half of the budget, which the "
               f"settled word reads. Tuning curve: {curve.settled.word}."
               + (f" Dashed: where the adaptive budget stopped the pair (k = {stop})." if stop is not None else ""))
    return Figure(_name(curve), f"Tuning curve, {curve.label}", caption, _png(figure))


def _gain(ax, x: pd.Series, points: pd.DataFrame) -> None:
    low, high, mean = (100 * pd.to_numeric(points[c], errors="coerce").to_numpy(dtype=float)
                       for c in ("ci_low", "ci_high", "diff_mean"))
    ax.fill_between(x, low, high, step=None, label="95% CI", **BAND)
    ax.plot(x, mean, label="gain", **GAIN)
    ax.axhline(0.0, color="black", linewidth=0.8, linestyle=":")
    if not np.isfinite(mean).any():
        ax.text(0.5, 0.5, "no paired test", transform=ax.transAxes, ha="center")


def _name(curve: PairCurve) -> str:
    """A file-name-safe slug of the pair (a user's dataset may hold ``/`` or ``:``)."""
    parts = [str(v) for k, v in curve.pair.items() if k != "switches"]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "curve-" + "-".join(parts))
