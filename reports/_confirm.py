"""Confirmation on fresh repeats: each pair's two validation-selected winners retrained on
repeats the search never used, and tested on those alone with a group-sequential design.

A search's winner is a maximum over its trials (the winner's curse): its gain, read on the
repeats it was selected on, is optimistic. Retrained on fresh repeats (other seeds for the
seed settings, Geom-GCN splits the search did not use for ``full``, other random splits for
``random``), the winners' configs are fixed before any of those repeats is seen, so the paired
differences there are an honest sample of the gain of *these two configs*.

The repeats are trained look by look: after n_1 < ... < n_K of them (K planned looks, the
sizes evenly spread, at least 2 repeats a look) the paired t-test's p-value enters the
group-sequential design (``_sequential``: Pocock, O'Brien-Fleming or Bonferroni), whose
sequential p-value is valid wherever the looks stop. A pair stops early once that p is at
most alpha / (number of pairs tested): Holm rejects such a p whatever the other pairs', so
the stop changes no verdict and spares the remaining repeats. The pairs' sequential p-values
are one Holm family. The confidence interval is Student's t over the repeats trained, not
widened for the looks (at the planned last look it is the usual one).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from orthotune.core import SETTINGS, ConfigError, ConfigResult, TrainConfig
from orthotune.reports._pair import pair_label
from orthotune.reports._select import plain, row_to_config
from orthotune.reports._sequential import BOUNDARIES, sequential_p
from orthotune.reports._stats import ALPHA, Paired, confidence_interval, holm, no_spread, paired_t_test

#: Geom-GCN's fixed splits per graph: the full-supervised setting's repeats are drawn from them.
GEOM_GCN_SPLITS = 10
#: The planned looks a design may have.
LOOKS = (2, 3)
#: Trains one config on its repeats (the CLI's: ``training.run_configs`` on its device).
Trainer = Callable[[TrainConfig], ConfigResult]
#: Called with one line of progress per pair and look.
Progress = Callable[[str], None]


def check_design(design: str, looks: int) -> None:
    """Refuse an unknown design name (listing the valid ones) or a number of looks not in :data:`LOOKS`."""
    BOUNDARIES.get(design)
    if looks not in LOOKS:
        raise ConfigError(f"--looks {looks}: must be one of {', '.join(map(str, LOOKS))}")


def fresh_repeats(setting: str, used: Sequence[int], requested: Sequence[int] = ()) -> tuple[int, ...]:
    """The repeats a confirmation trains: ``requested`` (checked: none the search used, each a
    split the setting has), else every Geom-GCN split the search left unused (``full``), else
    as many new seeds or random splits as the search used, numbered after its largest."""
    info = SETTINGS.get(setting)
    used = sorted(set(int(u) for u in used))
    if info.split in ("folds", "own"):
        what = "folds" if info.split == "folds" else "splits (the dataset's own)"
        raise ConfigError(f"setting {setting!r} has no fresh {what}: the search used all there are "
                          f"({len(used)}), and a confirmation needs repeats the search never used")
    kind = info.repeat
    bounded = GEOM_GCN_SPLITS if info.split == "geom-gcn" else None
    if requested:
        again = sorted(set(requested) & set(used))
        if again:
            raise ConfigError(f"--repeats {' '.join(map(str, requested))}: {kind}(s) {again} were used by the "
                              f"search; a confirmation takes only {kind}s it never used")
        outside = [r for r in requested if r < 0 or (bounded is not None and r >= bounded)]
        if outside:
            limit = f"{kind}s 0-{bounded - 1}" if bounded is not None else f"{kind}s numbered from 0"
            raise ConfigError(f"--repeats: {kind}(s) {outside} do not exist; {setting} has {limit}")
        if len(set(requested)) != len(requested):
            raise ConfigError(f"--repeats {' '.join(map(str, requested))}: each {kind} once")
        return tuple(int(r) for r in requested)
    if bounded is not None:
        left = tuple(s for s in range(bounded) if s not in used)
        if not left:
            raise ConfigError(f"the search used all {bounded} Geom-GCN splits: none is fresh")
        return left
    start = (max(used) + 1) if used else 0
    return tuple(range(start, start + max(len(used), 2)))


def look_sizes(repeats: int, looks: int) -> list[int]:
    """The planned looks' cumulative repeats, evenly spread (n_j = ceil(repeats * j / looks))."""
    check_design("pocock", looks)
    sizes = [math.ceil(repeats * j / looks) for j in range(1, looks + 1)]
    if sizes[0] < 2 or len(set(sizes)) != looks:
        raise ConfigError(f"{repeats} fresh repeats cannot hold {looks} looks of at least 2 repeats each "
                          f"(a paired test needs 2): give at least {looks + 1} with --repeats, or fewer --looks")
    return sizes


def with_repeats(config: TrainConfig, values: Sequence[int]) -> TrainConfig:
    """``config`` on the repeats ``values`` of its setting's repeats field; the other field
    stays as it was when it is one value (broadcast), else follows the new repeats (split i
    with seed i)."""
    field = SETTINGS.get(config.setting).repeats_field
    other = "seeds" if field == "splits" else "splits"
    keep = getattr(config, other)
    return dataclasses.replace(config, **{field: tuple(values), other: keep if len(keep) == 1 else tuple(values)})


@dataclass(frozen=True)
class PairPlan:
    """One pair to confirm: its summary row, its two winners' configs and the fresh repeats."""

    row: dict[str, Any]
    original: TrainConfig
    ortho: TrainConfig
    repeats: tuple[int, ...]

    @property
    def label(self) -> str:
        return pair_label(self.row)


def plan_pairs(pairs: pd.DataFrame, winners: pd.DataFrame, requested: Sequence[int] = ()) -> list[PairPlan]:
    """A plan per pair with both winners (the search's pairs, ``best``'s rows), every bad
    input refused before any training: a setting without fresh repeats, a repeat used."""
    by_trial = {(row["search"], row["trial_id"]): row for _, row in winners.iterrows()}
    plans = []
    for _, pair in pairs.iterrows():
        original = by_trial.get((pair["orig_search"], pair["orig_trial_id"]))
        ortho = by_trial.get((pair["ortho_search"], pair["ortho_trial_id"]))
        still_open = pair.get("budget") == "adaptive" and not _plain(pair.get("stop"))
        if original is None or ortho is None or still_open:  # no winners yet, or an adaptive pair not stopped
            continue
        used = [*original["repeat_split"], *ortho["repeat_split"]]
        if SETTINGS.get(pair["setting"]).repeats_field == "seeds":
            used = [*original["repeat_seed"], *ortho["repeat_seed"]]
        repeats = fresh_repeats(pair["setting"], used, requested)
        plans.append(PairPlan(pair.to_dict(), row_to_config(original), row_to_config(ortho), repeats))
    return plans


def confirm_pair(plan: PairPlan, design: str, looks: int, train: Trainer, stop_p: float,
                 progress: Progress = lambda line: None) -> dict[str, Any]:
    """Train ``plan``'s winners look by look and test the fresh repeats (see the module doc)."""
    sizes = look_sizes(len(plan.repeats), looks)
    tests: dict[str, dict[int, float]] = {"orig": {}, "ortho": {}}
    vals: dict[str, dict[int, float]] = {"orig": {}, "ortho": {}}
    pvalues: list[float] = []
    seconds, done, p_seq = 0.0, 0, math.nan
    for size in sizes:
        batch = plan.repeats[done:size]
        for arm, config in (("orig", plan.original), ("ortho", plan.ortho)):
            result = train(with_repeats(config, batch))
            seconds += result.seconds
            for value, run in zip(batch, result.runs):
                if run.status != "failed" and math.isfinite(run.test_acc):
                    tests[arm][value], vals[arm][value] = float(run.test_acc), float(run.val_acc)
        done = size
        diffs = _diffs(tests)
        pvalues.append(_p(diffs))
        p_seq = sequential_p(design, sizes, pvalues)
        progress(f"{plan.label}: look {len(pvalues)} of {looks} ({done} fresh repeats): gain "
                 f"{100 * float(np.mean(diffs)) if len(diffs) else math.nan:+.2f} pts, sequential p = {p_seq:.3g}")
        if math.isfinite(p_seq) and p_seq <= stop_p:
            break
    diffs = _diffs(tests)
    low, high = confidence_interval(diffs) if len(diffs) >= 2 and np.ptp(diffs) > 0 else (math.nan, math.nan)
    keys = sorted(set(tests["orig"]) & set(tests["ortho"]))
    return {
        **{name: plain(plan.row[name]) for name in ("setting", "dataset", "backbone", "depth", "variant",
                                                   "orig_search", "orig_trial_id", "ortho_search",
                                                   "ortho_trial_id", "repeat_kind")},
        "pair": plan.label,
        "search_gain": _plain(plan.row.get("diff_mean")), "search_p_holm": _plain(plan.row.get("p_holm")),
        "repeats_planned": list(plan.repeats), "looks_planned": sizes, "looks_taken": len(pvalues),
        "repeats": keys, "orig_test_acc": [tests["orig"][k] for k in keys],
        "ortho_test_acc": [tests["ortho"][k] for k in keys], "orig_val_acc": [vals["orig"][k] for k in keys],
        "ortho_val_acc": [vals["ortho"][k] for k in keys], "look_p": [_plain(p) for p in pvalues],
        "gain": _plain(float(np.mean(diffs)) if len(diffs) else math.nan), "ci_low": _plain(low),
        "ci_high": _plain(high), "p": _plain(p_seq), "seconds": seconds,
    }


def _diffs(tests: dict[str, dict[int, float]]) -> np.ndarray:
    keys = sorted(set(tests["orig"]) & set(tests["ortho"]))
    return np.array([tests["ortho"][k] - tests["orig"][k] for k in keys], dtype=float)


def _p(diffs: np.ndarray) -> float:
    """The paired t-test's p-value; NaN below two repeats or for identical differences."""
    if len(diffs) < 2 or no_spread(diffs):
        return math.nan
    return paired_t_test(diffs)[1]


def _plain(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def confirm(search: str, plans: Sequence[PairPlan], design: str, looks: int, train: Trainer,
            progress: Progress = lambda line: None) -> dict[str, Any]:
    """Confirm every plan; the pairs' sequential p-values one Holm family. The document
    ``store.save_confirmation`` keeps (plain JSON values)."""
    check_design(design, looks)
    stop_p = ALPHA / max(len(plans), 1)
    pairs = [confirm_pair(plan, design, looks, train, stop_p, progress) for plan in plans]
    adjusted = holm([p["p"] if p["p"] is not None else math.nan for p in pairs])
    for pair, p_holm in zip(pairs, adjusted):
        pair["p_holm"] = _plain(p_holm)
        pair["verdict"] = verdict_of(pair)
    return {"search": search, "design": design, "looks": looks, "alpha": ALPHA,
            "test": "paired t-test per look, group-sequential p-value, Holm over the pairs",
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "pairs": pairs}


def verdict_of(pair: dict[str, Any]) -> str:
    """A confirmed pair's result in the verdicts' words (``Paired.verdict``)."""
    nan = math.nan
    gain, p, low, high, p_holm = (nan if pair.get(k) is None else float(pair[k])
                                  for k in ("gain", "p", "ci_low", "ci_high", "p_holm"))
    note = "identical differences on every repeat" if pair.get("p") is None else ""
    test = Paired(len(pair["repeats"]), gain, nan, nan, p, note, low, high, p_holm)
    # the p is the design's sequential p-value over the looks taken, not one look's t-test
    return test.verdict().replace(", p = ", ", sequential p = ")


def confirmation_text(document: dict[str, Any]) -> str:
    """One line per confirmed pair: the search's gain beside the fresh repeats' verdict."""
    lines = [f"confirmation of {document['search']} on fresh repeats ({document['design']}, "
             f"{document['looks']} planned looks; Holm over {len(document['pairs'])} pairs):"]
    for pair in document["pairs"]:
        gain = pair.get("search_gain")
        searched = f"{100 * gain:+.2f} pts in the search" if gain is not None else "no gain in the search"
        lines.append(f"  {pair['pair']}: {searched}; on fresh {pair['repeat_kind']}s "
                     f"{repeat_span(pair['repeats'])} (look {pair['looks_taken']} of "
                     f"{len(pair['looks_planned'])}): {pair['verdict']}")
    return "\n".join(lines)


def repeat_span(values: Sequence[int]) -> str:
    """``5-9`` for a run of three or more consecutive values, else ``5, 7``."""
    values = list(values)
    if len(values) > 2 and values == list(range(values[0], values[0] + len(values))):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(map(str, values))
