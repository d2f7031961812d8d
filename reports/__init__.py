"""Reports: validation-best settings per cell, best configs, paper-style tables and plots.

A cell is (dataset, setting, backbone, depth, original or Ortho-GConv, variant switches: the
``variant`` label of a profile or ablation, bound, transform, selection, ...), so
variants never compete. Its winner is the
trial with the best validation objective under the tie rule (``_select.TIE_RULE_TEXT``); its
test accuracy is only reported, never used to choose.

The data walks one pipeline, each stage a module it enters once, strung together in
``_report``: load (``_load``), select (``_select``), pair and test (``_pair``), curve
(``_curve``), verdict (``_verdict``), lay out (``_formats``: one module per format); beside
the pairs, the comparisons of a space's named arms (``_arms``: the paper's table), the pairs
and the comparisons one Holm family (``_family``).

    >>> from orthotune.reports import Filters, best_configs, build_report, write_report, row_to_config
    >>> winners = best_configs("runs/store", Filters(datasets=("cora",)))   # one row per cell
    >>> config = row_to_config(winners.iloc[0])                              # a TrainConfig
    >>> print(pair_verdicts("runs/store").text())   # one line per pair, then warnings
    >>> curves = tuning_curves("runs/store")          # per pair: the gain against trials per arm
    >>> write_report(build_report("runs/store"), "html", "report.html")
"""

from orthotune.reports._confirm import check_design, confirm, confirmation_text, look_sizes, plan_pairs
from orthotune.reports._curve import PairCurve
from orthotune.reports._formats import FORMATS, format_of, write_report
from orthotune.reports._load import Filters
from orthotune.reports._replay import Replay, adaptive_replay
from orthotune.reports._report import (
    BestAnswer,
    best_answer,
    best_configs,
    build_report,
    pair_verdicts,
    tuning_curves,
)
from orthotune.reports._select import config_dict, row_to_config, tidy
from orthotune.reports._stats import ALPHA, holm
from orthotune.reports._stops import verdict_word
from orthotune.reports._verdict import FEW_TRIALS, Verdicts

__all__ = [
    "ALPHA",
    "BestAnswer",
    "FEW_TRIALS",
    "FORMATS",
    "Filters",
    "PairCurve",
    "Replay",
    "Verdicts",
    "adaptive_replay",
    "best_answer",
    "best_configs",
    "build_report",
    "check_design",
    "config_dict",
    "confirm",
    "confirmation_text",
    "format_of",
    "holm",
    "look_sizes",
    "pair_verdicts",
    "plan_pairs",
    "row_to_config",
    "tidy",
    "tuning_curves",
    "verdict_word",
    "write_report",
]
