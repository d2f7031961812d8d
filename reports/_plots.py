"""The report's figures, drawn with matplotlib's Agg canvas into PNG bytes.

One figure of each kind per (dataset, setting): test accuracy against depth (original
against Ortho-GConv, one panel per backbone), M_sig against depth, per-layer gradient norms
of each winner, and Ortho-GConv's accuracy and seconds per epoch against T.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from orthotune.core import ARMS, OBJECTIVE
from orthotune.reports._load import ORIGINAL, ORTHO
from orthotune.store import Store

#: The epochs-table column of per-layer gradient norms (recorded every k epochs), if the
#: store has it; the paper's Figure 1(b, c) is drawn from it.
EPOCH_GRAD_NORMS = "grad_norms"
STYLE = {ORIGINAL: dict(color="tab:blue", marker="o"), ORTHO: dict(color="tab:red", marker="s")}
LINESTYLES = ("-", "--", ":", "-.")
PANEL = (3.6, 2.8)  # inches per panel
MIN_WIDTH = 5.6


@dataclass(frozen=True)
class Figure:
    """A rendered plot: ``name`` is a file-name-safe slug, ``png`` the image."""

    name: str
    title: str
    caption: str
    png: bytes


def figures(summary: pd.DataFrame, winners: pd.DataFrame, t_table: pd.DataFrame,
            trials: pd.DataFrame | None = None, epoch_grads: pd.DataFrame | None = None) -> list[Figure]:
    """Per (dataset, setting): accuracy and M_sig against depth, the winners' gradient norms,
    the search history, the effect of T (Ortho-GConv cells) and, where the store recorded
    per-epoch gradient norms, the paper's Figure 1(b, c)."""
    out: list[Figure] = []
    trials = trials if trials is not None else winners.iloc[:0]
    for (dataset, setting), rows in summary.groupby(["dataset", "setting"], sort=True):
        cell = winners[(winners["dataset"] == dataset) & (winners["setting"] == setting)]
        label = f"{dataset} ({setting})"
        out += [
            _accuracy_vs_depth(_name("accuracy-depth", dataset, setting), label, rows),
            _msig_vs_depth(_name("msig-depth", dataset, setting), label, cell),
            _grad_norms(_name("grad-norms", dataset, setting), label, cell),
        ]
        ts = t_table[(t_table["dataset"] == dataset) & (t_table["setting"] == setting)]
        if not ts.empty:
            mine = trials[(trials["dataset"] == dataset) & (trials["setting"] == setting)]
            out.append(_effect_of_t(_name("effect-of-T", dataset, setting), label, ts, mine))
        if "feature_transform" in cell and cell["feature_transform"].nunique() > 1:
            out.append(_smoothness_vs_depth(_name("smoothness-depth", dataset, setting), label, cell))
        history = trials[(trials["dataset"] == dataset) & (trials["setting"] == setting)]
        if not history.empty:
            out.append(_history(_name("history", dataset, setting), label, history))
        if epoch_grads is not None:
            grads = _epoch_grads_of(cell, epoch_grads)
            if not grads.empty:
                out.append(_grad_norms_over_epochs(_name("grad-epochs", dataset, setting), label, grads))
    return out


def epoch_grad_norms(store: Store, winners: pd.DataFrame) -> pd.DataFrame | None:
    """The winners' per-epoch per-layer gradient norms (their epochs rows alone), or None where
    the store has none: what :func:`figures` draws Figure 1(b, c) from."""
    if winners.empty:
        return None
    columns = ["search", "trial_id", "repeat", "epoch", EPOCH_GRAD_NORMS]
    frame = store.read("epochs", columns=columns, trials=zip(winners["search"], winners["trial_id"])).to_pandas()
    return frame[frame[EPOCH_GRAD_NORMS].notna()]


def _name(kind: str, dataset: str, setting: str) -> str:
    """A figure's name, also a file name beside a written report: a user's dataset names its
    file or PyG class (``file:/data/g.npz``, ``pyg:Amazon/Computers``), whose ``/`` and ``:``
    a file name cannot hold."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{kind}-{dataset}-{setting}")


def _variants(frame: pd.DataFrame, column: str = "variant_name") -> dict[str, str]:
    """Line style per variant; one variant keeps solid lines and plain labels."""
    names = sorted(frame[column].dropna().unique()) if column in frame else []
    return {n: LINESTYLES[i % len(LINESTYLES)] for i, n in enumerate(names)}


def _line_label(arm: str, variant: str, styles: dict[str, str]) -> str:
    return arm if len(styles) <= 1 else f"{arm} [{variant}]"


def _missing_steadiness(cell: pd.DataFrame, column: str) -> str:
    """Why a winner has no point: a stopped winner was cut before steadiness was measured."""
    gaps = []
    for row in cell.itertuples():
        value = getattr(row, column)
        empty = value is None or (np.size(value) == 0 if not isinstance(value, float) else math.isnan(value))
        if empty:
            why = (f"stopped by ASHA at epoch {row.epochs}, before the steadiness metrics were measured"
                   if row.status == "stopped" else "no value recorded")
            gaps.append(f"{row.backbone} depth {row.depth} {row.arm} [{row.variant_name}]: {why}")
    return (" Missing points: " + "; ".join(gaps) + ".") if gaps else ""


def _panels(count: int, title: str, ncols: int | None = None) -> tuple[Any, list]:
    ncols = ncols or min(count, 3)
    nrows = math.ceil(count / ncols)
    from matplotlib.figure import Figure as MplFigure  # matplotlib loads only when drawing

    # at least MIN_WIDTH wide so a one-panel figure still fits its title
    figure = MplFigure(figsize=(max(PANEL[0] * ncols, MIN_WIDTH), PANEL[1] * nrows + 0.5), layout="constrained")
    axes = figure.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for unused in axes[count:]:
        unused.set_visible(False)
    figure.suptitle(title, fontsize="medium")
    return figure, axes[:count]


def _legend(ax: Any) -> None:
    """The axes' legend beside it, right of the data, never over it (constrained layout makes
    room for it)."""
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()


def _by_backbone(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    yield from frame.groupby("backbone", sort=True)


def _accuracy_vs_depth(name: str, label: str, rows: pd.DataFrame) -> Figure:
    groups = list(_by_backbone(rows))
    figure, axes = _panels(len(groups), f"Test accuracy against depth: {label}")
    styles = _variants(rows, "variant")
    for ax, (backbone, group) in zip(axes, groups):
        group = group.sort_values("depth")
        for (variant, arm, prefix) in [(v, a.name, a.prefix) for v in styles for a in ARMS]:
            have = group[(group["variant"] == variant) & group[f"{prefix}_test_acc"].notna()]
            have = have.drop_duplicates(subset=["depth", f"{prefix}_trial_id"])  # one original, many Ortho
            if have.empty:
                continue
            ax.errorbar(have["depth"], 100 * have[f"{prefix}_test_acc"].astype(float),
                        yerr=100 * have[f"{prefix}_test_acc_std"].astype(float), linestyle=styles[variant],
                        label=_line_label(arm, variant, styles), capsize=3, **STYLE[arm])
        ax.set(title=backbone, xlabel="depth", ylabel="test accuracy (%)", xticks=sorted(group["depth"]))
        _legend(ax)
    caption = ("Validation-selected winner of each cell; mean and std of test accuracy over the "
               "repeats. Missing points are cells without a winner.")
    return Figure(name, f"Accuracy against depth, {label}", caption, _png(figure))


def _msig_vs_depth(name: str, label: str, cell: pd.DataFrame) -> Figure:
    groups = list(_by_backbone(cell))
    figure, axes = _panels(max(len(groups), 1), f"Signal magnification M_sig against depth: {label}")
    styles = _variants(cell)
    for ax, (backbone, group) in zip(axes, groups):
        for variant, arm in [(v, a.name) for v in styles for a in ARMS]:
            arm_rows = group[(group["arm"] == arm) & (group["variant_name"] == variant)].sort_values("depth")
            if len(arm_rows):
                ax.plot(arm_rows["depth"], arm_rows["m_sig"].astype(float), linestyle=styles[variant],
                        label=_line_label(arm, variant, styles), **STYLE[arm])
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        if (group["m_sig"].astype(float) > 0).all():
            ax.set_yscale("log")
        ax.set(title=backbone, xlabel="depth", ylabel="M_sig", xticks=sorted(group["depth"].unique()))
        _legend(ax)
    caption = ("M_sig = mean ||h_i(L)|| / ||h_i(0)|| of each cell's winner (ideal: about 1, dotted)."
               + _missing_steadiness(cell, "m_sig"))
    return Figure(name, f"M_sig against depth, {label}", caption, _png(figure))


def _grad_norms(name: str, label: str, cell: pd.DataFrame) -> Figure:
    groups = list(_by_backbone(cell))
    figure, axes = _panels(max(len(groups), 1), f"Per-layer gradient norms ||dL/dW(l)||_F: {label}")
    styles = _variants(cell)
    for ax, (backbone, group) in zip(axes, groups):
        depths = sorted(group["depth"].unique())
        shades = dict(zip(depths, np.linspace(0.45, 1.0, len(depths))))
        for row in group.sort_values(["depth", "ortho"]).itertuples():
            norms = np.asarray(row.grad_norms, dtype=float)
            if norms.size == 0:
                continue
            color = STYLE[row.arm]["color"]
            ax.plot(np.arange(1, norms.size + 1), norms, color=color, alpha=shades[row.depth],
                    marker=STYLE[row.arm]["marker"], markersize=3, linestyle=styles[row.variant_name],
                    label=f"{_line_label(row.arm, row.variant_name, styles)}, depth {row.depth}")
            if (norms > 0).all():
                ax.set_yscale("log")
        layers = max((len(n) for n in group["grad_norms"] if n is not None), default=0)
        ax.set(title=backbone, xlabel="layer l", ylabel="||dL/dW(l)||_F", xticks=range(1, layers + 1))
        _legend(ax)
    caption = ("Mean over the repeats of each winner's gradient norm per hidden layer (layer 1 is nearest the "
               "input), at the end of training." + _missing_steadiness(cell, "grad_norms"))
    return Figure(name, f"Gradient norms per layer, {label}", caption, _png(figure))


def _effect_of_t(name: str, label: str, ts: pd.DataFrame, trials: pd.DataFrame) -> Figure:
    figure, (acc, speed) = _panels(2, f"Ortho-GConv against Newton iterations T: {label}", ncols=2)
    for (backbone, depth, variant), group in ts.groupby(["backbone", "depth", "variant"], sort=True):
        group = group.sort_values("T")
        line = f"{backbone}, depth {depth}" + ("" if ts["variant"].nunique() == 1 else f" [{variant}]")
        # the line joins the Ts whose best trial trained; a stuck or stopped one is a point apart
        # (joined, the line zig-zags between trained and plateaued accuracies)
        apart = group["stuck"].astype(bool) | (group["status"] == "stopped")
        trained = group[~apart]
        drawn = acc.errorbar(trained["T"], 100 * trained["test_acc"].astype(float),
                             yerr=100 * trained["test_acc_std"].astype(float), marker="o", capsize=3, label=line)
        colour = drawn[0].get_color()
        others = group[apart]
        acc.errorbar(others["T"], 100 * others["test_acc"].astype(float),
                     yerr=100 * others["test_acc_std"].astype(float), linestyle="none", marker="o", capsize=3,
                     color=colour, alpha=0.6)
        _mark(acc, group, colour)
        speed.plot(group["T"], group["seconds_per_epoch"].astype(float), marker="o", color=colour, label=line)
    _all_trials(acc, trials)
    ticks = sorted(int(t) for t in ts["T"].unique())
    acc.set(xlabel="T", ylabel="test accuracy (%)", xticks=ticks, title="accuracy")
    speed.set(xlabel="T", ylabel="seconds per epoch", xticks=ticks, title="time")
    _legend(acc)
    counts = _status_counts(ts)
    caption = ("For each T, the validation-best Ortho-GConv trial with that T (same tie rule); its test "
               "accuracy (mean, std over repeats) and seconds per epoch; the accuracy line joins the Ts whose "
               "best trial trained, stuck or stopped ones are points apart. Grey dots: every Ortho-GConv trial. "
               "Marked: stuck trials (x: no repeat improved after epoch 1, the majority-class plateau) and "
               f"trials stopped by ASHA (hollow). Lines: {counts}.")
    return Figure(name, f"Effect of T, {label}", caption, _png(figure))


def _mark(ax, group: pd.DataFrame, colour: str) -> None:
    stopped = group[group["status"] == "stopped"]
    ax.scatter(stopped["T"], 100 * stopped["test_acc"].astype(float), s=70, facecolors="white",
               edgecolors=colour, zorder=3, linewidths=1.5)
    stuck = group[group["stuck"].astype(bool)]
    ax.scatter(stuck["T"], 100 * stuck["test_acc"].astype(float), marker="x", s=80, color="black", zorder=4)


def _all_trials(ax, trials: pd.DataFrame) -> None:
    from orthotune.reports._hyperparameters import stuck

    ortho = trials[(trials["ortho"] == True) & trials["T"].notna() & trials["test_acc"].notna()]  # noqa: E712
    if ortho.empty:
        return
    x = ortho["T"].astype(float) + np.linspace(-0.15, 0.15, len(ortho))  # spread, not hide, equal T
    y = 100 * ortho["test_acc"].astype(float)
    stopped, stuck_ = (ortho["status"] == "stopped").to_numpy(), stuck(ortho).to_numpy()
    plain = ~stopped & ~stuck_
    ax.scatter(x[plain], y[plain], s=8, color="grey", alpha=0.5, zorder=1)
    ax.scatter(x[stopped & ~stuck_], y[stopped & ~stuck_], s=12, facecolors="none", edgecolors="grey", zorder=1)
    ax.scatter(x[stuck_], y[stuck_], s=14, marker="x", color="grey", zorder=1)


def _status_counts(ts: pd.DataFrame) -> str:
    stopped, stuck_ = int((ts["status"] == "stopped").sum()), int(ts["stuck"].astype(bool).sum())
    return f"{len(ts)} points, {stopped} stopped, {stuck_} stuck"


def _history(name: str, label: str, trials: pd.DataFrame) -> Figure:
    """The objective of each trial in the order the trials finished, per cell, with the best so far."""
    groups = list(trials.groupby(["backbone", "depth"], sort=True))
    figure, axes = _panels(len(groups), f"Search history (validation accuracy per trial): {label}")
    styles = _variants(trials)
    for ax, ((backbone, depth), group) in zip(axes, groups):
        for (arm, variant), cell in group.groupby(["arm", "variant_name"], sort=True):
            cell = cell.sort_values(["finished_at", "trial_id"], kind="stable")
            values = 100 * cell[OBJECTIVE].astype(float).to_numpy()
            number = np.arange(1, len(values) + 1)
            colour = STYLE[arm]["color"]
            ax.scatter(number, values, s=10, color=colour, alpha=0.6)
            best = np.fmax.accumulate(np.where(np.isfinite(values), values, -np.inf))
            ax.step(number, np.where(np.isfinite(best), best, np.nan), where="post", color=colour,
                    linestyle=styles[variant], label=_line_label(arm, variant, styles))
        ax.set(title=f"{backbone}, depth {depth}", xlabel="trial (in finishing order)",
               ylabel="validation accuracy (%)")
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _legend(ax)
    caption = ("Each cell's trials in the order they finished: dots are their objective (mean validation "
               "accuracy over the repeats; failed trials have none), the line the best so far.")
    return Figure(name, f"Search history, {label}", caption, _png(figure))


def _smoothness_vs_depth(name: str, label: str, cell: pd.DataFrame) -> Figure:
    """The paper's Figure 1(d): smoothness D and test accuracy against depth, with and without
    the hidden feature transformations (``feature_transform``), per arm."""
    figure, (smooth, acc) = _panels(2, f"Smoothness and accuracy against depth: {label}", ncols=2)
    for (arm, backbone, transform), group in cell.groupby(["arm", "backbone", "feature_transform"], sort=True):
        group = group.sort_values("depth")
        line = f"{arm}, {backbone}, {'with' if transform else 'without'} W(l)"
        style = dict(color=STYLE[arm]["color"], marker=STYLE[arm]["marker"], linestyle="-" if transform else "--")
        smooth.plot(group["depth"], group["smoothness"].astype(float), label=line, **style)
        acc.plot(group["depth"], 100 * group["test_acc"].astype(float), label=line, **style)
    depths = sorted(int(d) for d in cell["depth"].unique())
    smooth.set(xlabel="depth", ylabel="smoothness D", xscale="log", xticks=depths, xticklabels=depths,
               title="smoothness")
    acc.set(xlabel="depth", ylabel="test accuracy (%)", xscale="log", xticks=depths, xticklabels=depths,
            title="accuracy")
    _legend(smooth)
    caption = ("As the paper's Figure 1(d): the smoothness D (mean pairwise distance of the last layer's "
               "node representations) and the test accuracy of each cell's winner against depth; dashed: "
               "propagation only (feature_transform false)." + _missing_steadiness(cell, "smoothness"))
    return Figure(name, f"Smoothness against depth, {label}", caption, _png(figure))


def _epoch_grads_of(cell: pd.DataFrame, epoch_grads: pd.DataFrame) -> pd.DataFrame:
    """Per-epoch gradient norms of the deepest winners of one backbone (GCN first), one per arm."""
    if cell.empty:
        return epoch_grads.iloc[:0]
    backbone = "gcn" if (cell["backbone"] == "gcn").any() else sorted(cell["backbone"])[0]
    mine = cell[cell["backbone"] == backbone]
    deepest = mine[mine["depth"] == mine["depth"].max()]
    keys = deepest[["search", "trial_id", "arm", "variant_name", "depth", "backbone"]]
    return epoch_grads.merge(keys, on=["search", "trial_id"])


def _grad_norms_over_epochs(name: str, label: str, grads: pd.DataFrame) -> Figure:
    """The paper's Figure 1(b, c): per-layer gradient norms at the recorded epochs, one panel per
    winner (original, then Ortho-GConv), mean over the repeats."""
    panels = list(grads.groupby(["arm", "variant_name"], sort=True))
    panels.sort(key=lambda item: item[0][0] != ORIGINAL)
    figure, axes = _panels(len(panels), f"Gradient norms per layer during training: {label}")
    cmap = matplotlib_colormap("viridis")
    for ax, ((arm, variant), group) in zip(axes, panels):
        epochs = sorted(group["epoch"].unique())
        for i, epoch in enumerate(epochs):
            norms = np.mean([np.asarray(n, dtype=float) for n in group[group["epoch"] == epoch]["grad_norms"]],
                            axis=0)
            ax.plot(np.arange(1, norms.size + 1), norms, color=cmap(i / max(len(epochs) - 1, 1)),
                    marker=".", label=f"epoch {epoch}" if i in (0, len(epochs) - 1) else None)
            if (norms > 0).all():
                ax.set_yscale("log")
        first = group.iloc[0]
        ax.set(title=f"{arm} [{variant}], {first['backbone']}-{first['depth']}", xlabel="layer l",
               ylabel="||dL/dW(l)||_F")
        _legend(ax)
    caption = ("As the paper's Figure 1(b, c): the gradient norm of each layer's weight at the epochs the "
               "trainer recorded (dark: early, light: late), mean over the repeats, for the deepest "
               "winners of one backbone.")
    return Figure(name, f"Gradient norms during training, {label}", caption, _png(figure))


def matplotlib_colormap(name: str):
    from matplotlib import colormaps

    return colormaps[name]
