"""The report's figures, drawn with matplotlib's Agg canvas into PNG bytes.

One figure of each kind per (dataset, setting): test accuracy against depth (original
against Ortho-GConv, one panel per backbone), M_sig against depth, per-layer gradient norms
of each winner, and Ortho-GConv's accuracy and seconds per epoch against T.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from orthotune.reports._load import ORIGINAL, ORTHO

STYLE = {ORIGINAL: dict(color="tab:blue", marker="o"), ORTHO: dict(color="tab:red", marker="s")}
PANEL = (3.6, 2.8)  # inches per panel
MIN_WIDTH = 5.6


@dataclass(frozen=True)
class Figure:
    """A rendered plot: ``name`` is a file-name-safe slug, ``png`` the image."""

    name: str
    title: str
    caption: str
    png: bytes


def figures(summary: pd.DataFrame, winners: pd.DataFrame, t_table: pd.DataFrame) -> list[Figure]:
    out: list[Figure] = []
    for (dataset, setting), rows in summary.groupby(["dataset", "setting"], sort=True):
        cell = winners[(winners["dataset"] == dataset) & (winners["setting"] == setting)]
        label = f"{dataset} ({setting})"
        out += [
            _accuracy_vs_depth(f"accuracy-depth-{dataset}-{setting}", label, rows),
            _msig_vs_depth(f"msig-depth-{dataset}-{setting}", label, cell),
            _grad_norms(f"grad-norms-{dataset}-{setting}", label, cell),
        ]
        ts = t_table[(t_table["dataset"] == dataset) & (t_table["setting"] == setting)]
        if not ts.empty:
            out.append(_effect_of_t(f"effect-of-T-{dataset}-{setting}", label, ts))
    return out


def _panels(count: int, title: str, ncols: int | None = None) -> tuple[MplFigure, list]:
    ncols = ncols or min(count, 3)
    nrows = math.ceil(count / ncols)
    # at least MIN_WIDTH wide so a one-panel figure still fits its title
    figure = MplFigure(figsize=(max(PANEL[0] * ncols, MIN_WIDTH), PANEL[1] * nrows + 0.5), layout="constrained")
    axes = figure.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for unused in axes[count:]:
        unused.set_visible(False)
    figure.suptitle(title, fontsize="medium")
    return figure, axes[:count]


def _png(figure: MplFigure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()


def _by_backbone(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    yield from frame.groupby("backbone", sort=True)


def _accuracy_vs_depth(name: str, label: str, rows: pd.DataFrame) -> Figure:
    groups = list(_by_backbone(rows))
    figure, axes = _panels(len(groups), f"Test accuracy against depth: {label}")
    for ax, (backbone, group) in zip(axes, groups):
        group = group.sort_values("depth")
        for arm, prefix in ((ORIGINAL, "orig"), (ORTHO, "ortho")):
            have = group[group[f"{prefix}_test_acc"].notna()]
            ax.errorbar(have["depth"], 100 * have[f"{prefix}_test_acc"].astype(float),
                        yerr=100 * have[f"{prefix}_test_acc_std"].astype(float),
                        label=arm, capsize=3, **STYLE[arm])
        ax.set(title=backbone, xlabel="depth", ylabel="test accuracy (%)", xticks=sorted(group["depth"]))
        ax.legend(fontsize="small")
    caption = ("Validation-selected winner of each cell; mean and std of test accuracy over the "
               "repeats. Missing points are cells without a winner.")
    return Figure(name, f"Accuracy against depth, {label}", caption, _png(figure))


def _msig_vs_depth(name: str, label: str, cell: pd.DataFrame) -> Figure:
    groups = list(_by_backbone(cell))
    figure, axes = _panels(max(len(groups), 1), f"Signal magnification M_sig against depth: {label}")
    for ax, (backbone, group) in zip(axes, groups):
        for arm in (ORIGINAL, ORTHO):
            arm_rows = group[group["arm"] == arm].sort_values("depth")
            if len(arm_rows):
                ax.plot(arm_rows["depth"], arm_rows["m_sig"].astype(float), label=arm, **STYLE[arm])
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        if (group["m_sig"].astype(float) > 0).all():
            ax.set_yscale("log")
        ax.set(title=backbone, xlabel="depth", ylabel="M_sig", xticks=sorted(group["depth"].unique()))
        ax.legend(fontsize="small")
    caption = "M_sig = mean ||h_i(L)|| / ||h_i(0)|| of each cell's winner (ideal: about 1, dotted)."
    return Figure(name, f"M_sig against depth, {label}", caption, _png(figure))


def _grad_norms(name: str, label: str, cell: pd.DataFrame) -> Figure:
    groups = list(_by_backbone(cell))
    figure, axes = _panels(max(len(groups), 1), f"Per-layer gradient norms ||dL/dW(l)||_F: {label}")
    for ax, (backbone, group) in zip(axes, groups):
        depths = sorted(group["depth"].unique())
        shades = dict(zip(depths, np.linspace(0.45, 1.0, len(depths))))
        for row in group.sort_values(["depth", "ortho"]).itertuples():
            norms = np.asarray(row.grad_norms, dtype=float)
            if norms.size == 0:
                continue
            color = STYLE[row.arm]["color"]
            ax.plot(np.arange(1, norms.size + 1), norms, color=color, alpha=shades[row.depth],
                    marker=STYLE[row.arm]["marker"], markersize=3, label=f"{row.arm}, depth {row.depth}")
            if (norms > 0).all():
                ax.set_yscale("log")
        layers = max((len(n) for n in group["grad_norms"] if n is not None), default=0)
        ax.set(title=backbone, xlabel="layer l", ylabel="||dL/dW(l)||_F", xticks=range(1, layers + 1))
        ax.legend(fontsize="x-small")
    caption = "Mean over the repeats of each winner's gradient norm per hidden layer (layer 1 is nearest the input)."
    return Figure(name, f"Gradient norms per layer, {label}", caption, _png(figure))


def _effect_of_t(name: str, label: str, ts: pd.DataFrame) -> Figure:
    figure, (acc, speed) = _panels(2, f"Ortho-GConv against Newton iterations T: {label}", ncols=2)
    for (backbone, depth), group in ts.groupby(["backbone", "depth"], sort=True):
        group = group.sort_values("T")
        line = f"{backbone}, depth {depth}"
        acc.errorbar(group["T"], 100 * group["test_acc"], yerr=100 * group["test_acc_std"].astype(float),
                     marker="o", capsize=3, label=line)
        speed.plot(group["T"], group["seconds_per_epoch"], marker="o", label=line)
    ticks = sorted(int(t) for t in ts["T"].unique())
    acc.set(xlabel="T", ylabel="test accuracy (%)", xticks=ticks, title="accuracy")
    speed.set(xlabel="T", ylabel="seconds per epoch", xticks=ticks, title="time")
    acc.legend(fontsize="x-small")
    caption = ("For each T, the validation-best Ortho-GConv trial with that T (same tie rule); its "
               "test accuracy (mean, std over repeats) and seconds per epoch.")
    return Figure(name, f"Effect of T, {label}", caption, _png(figure))
