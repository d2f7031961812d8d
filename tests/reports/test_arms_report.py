"""The comparisons of a space's named arms in the reports (``reports._arms``): one Holm family
over every comparison of the search, a verdict line and a tuning curve each, the paper's
table (arms as rows, datasets as columns, best in bold, each cell marked against the target,
the reference row kept) in md, latex and html, ``best --json``; and old stores (rows with
``ortho`` and no ``arm`` column) read as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from report_stores import hand_row, hand_store

from orthotune.core import ARMS, Cell
from orthotune.reports import best_answer, build_report, write_report
from orthotune.reports._arms import arms_table, compare_arms
from orthotune.reports._load import NAMED_ARM_KEY, load
from orthotune.reports._stats import holm
from orthotune.spaces import parse_space

SPACE = {"name": "sota", "datasets": ["texas", "wisconsin"], "setting": "full", "repeats": [0, 1, 2, 3, 4],
         "train": {"lr": [0.01, 0.05]},
         "arms": {"GCN": {"backbone": "gcn", "depth": 2}, "JKNet": {"backbone": "jknet", "depth": 4},
                  "Ortho-GCNII": {"backbone": "gcnii", "depth": 8, "treatments": {"ortho": True}}},
         "compare": {"against": "Ortho-GCNII"}, "samples": 2, "reference": True}
BASE = [0.60, 0.62, 0.58, 0.61, 0.59]
JITTER = [0.004, -0.003, 0.001, -0.002, 0.0]
#: Each arm's test accuracy per repeat, as a shift from BASE (with jitter: the tests have a CI).
SHIFTS = {"GCN": -0.10, "JKNet": 0.001, "Ortho-GCNII": 0.0}
BACKBONES = {"GCN": ("gcn", 2, False), "JKNet": ("jknet", 4, False), "Ortho-GCNII": ("gcnii", 8, True)}


def _rows() -> list[dict]:
    rows = []
    for dataset in ("texas", "wisconsin"):
        for arm, shift in SHIFTS.items():
            backbone, depth, ortho = BACKBONES[arm]
            test = [b + shift + (j if arm != "Ortho-GCNII" else 0.0) for b, j in zip(BASE, JITTER)]
            for number, val in enumerate((0.7, 0.6, 0.5)):  # the later trials never win
                rows.append(hand_row(f"{dataset}-{arm}-{number}", val=[val] * 5, test=test, search="sota",
                                     minutes=number, dataset=dataset, backbone=backbone, depth=depth, ortho=ortho,
                                     arm=arm, variant="default", selection="val_acc"))
        rows.append(hand_row(f"{dataset}-ref", val=[0.7] * 5, test=[0.8] * 5, search="sota", dataset=dataset,
                             backbone="mlp", depth=2, variant="default", selection="val_acc"))
    return rows


@pytest.fixture()
def store(tmp_path):
    store = hand_store(tmp_path / "s", _rows())
    store.save_search_meta("sota", {"options": {"space": parse_space(SPACE).to_dict()}})
    return store


def test_every_comparison_of_the_search_is_one_holm_family(store):
    answer = best_answer(store)
    frame = answer.arms.comparisons
    assert answer.arms.arms == ("GCN", "JKNet", "Ortho-GCNII") and answer.arms.target == "Ortho-GCNII"
    assert list(zip(frame["dataset"], frame["arm"], frame["baseline"])) == [
        ("texas", "GCN", "Ortho-GCNII"), ("texas", "JKNet", "Ortho-GCNII"),
        ("wisconsin", "GCN", "Ortho-GCNII"), ("wisconsin", "JKNet", "Ortho-GCNII")]
    assert list(frame["p_holm"]) == pytest.approx(holm(list(frame["p"])))  # m = 4, not 2 per dataset
    assert list(frame["mark"]) == ["worse", "not different", "worse", "not different"]
    assert list(frame["diff_mean"]) == pytest.approx([-0.10, 0.001, -0.10, 0.001], abs=1e-9)
    assert answer.pairs.empty  # the named arms never enter the default pairs
    lines = answer.verdicts.comparisons
    assert len(lines) == 4 and lines[0].startswith("texas full (default): GCN against Ortho-GCNII: worse significant")
    assert "structure-agnostic baseline 80.00" in lines[0]
    assert "verdict per comparison" in answer.verdicts.text()


def test_best_json_carries_the_arms_and_each_comparison_with_its_curve(store, capsys):
    from orthotune.cli import main

    assert main(["best", "--store", store.uri, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["arms"] == ["GCN", "JKNet", "Ortho-GCNII"] and answer["target"] == "Ortho-GCNII"
    assert [c["arm"] for c in answer["comparisons"]] == ["GCN", "JKNet", "GCN", "JKNet"]
    first = answer["comparisons"][0]
    assert first["mark"] == "worse" and first["curve"]["trials_per_arm"] == {"Ortho-GCNII": 3, "GCN": 3}
    assert {c.get("arm") for c in answer["configs"]} >= {"GCN", "JKNet", "Ortho-GCNII"}  # configs rerun their arm


@pytest.mark.parametrize(("fmt", "bold", "worse"), [("md", "**60.00 ± 1.58**", "50.00 ± 1.44 ▼"),
                                                    ("latex", "\\textbf{60.00 $\\pm$ 1.58}", "$\\downarrow$"),
                                                    ("html", "<b>60.00 ± 1.58</b>", "50.00 ± 1.44 ▼")])
@pytest.mark.slow
def test_the_paper_table_in_each_format(store, fmt, bold, worse):
    text = write_report(build_report(store, plots=False), fmt)
    assert worse in text and "structure-agnostic (mlp)" in text and "Holm over all 4 comparisons" in text
    assert bold not in text  # the reference (80%) is the best of each column, not Ortho-GCNII
    best = {"md": "**80.00 ± 0.00**", "latex": "\\textbf{80.00 $\\pm$ 0.00}", "html": "<b>80.00 ± 0.00</b>"}[fmt]
    assert best in text


def test_an_old_store_reads_as_before_its_arm_from_ortho(tmp_path):
    fixture = Path(__file__).resolve().parents[1] / "store" / "fixtures" / "store-v3"
    shutil.copytree(fixture, tmp_path / "old")
    loaded = load(str(tmp_path / "old"))
    assert loaded.named.empty and (loaded.trials[NAMED_ARM_KEY] == "").all()
    arms = {arm.ortho: arm.name for arm in ARMS}
    arms_of = {arm.ortho: arm for arm in ARMS}
    assert list(loaded.trials["arm"]) == [arms[bool(o)] for o in loaded.trials["ortho"]]
    for row in loaded.store.read("trials").to_pylist():  # the stored rows: ``arm`` null, the arm from ``ortho``
        assert row["arm"] is None and Cell.of(row).arm is arms_of[bool(row["ortho"])]
    assert compare_arms(loaded, loaded.reference).empty  # no named arm: nothing to compare


@pytest.mark.slow
def test_each_comparison_has_its_tuning_curve_figure(store):
    report = build_report(store)
    titles = [figure.title for figure in report.figures]
    assert titles == [f"Tuning curve, {d} full (default): {a} against Ortho-GCNII"
                      for d in ("texas", "wisconsin") for a in ("GCN", "JKNet")]
    assert len({figure.name for figure in report.figures}) == 4


# -- one Holm family over the default pairs and the named comparisons (issue 50) -------------

#: Per-repeat gains of the default pairs (Ortho-GConv − original): depth 2's alone has p = 0.047
#: (significant in a family of one), depth 4's is large.
PAIR_GAINS = {2: [0.01, 0.03, 0.02, 0.04, 0.00], 4: [0.05 + j for j in JITTER]}


def _pair_rows() -> list[dict]:
    """Default original-vs-Ortho-GConv pairs (no named arm) of the same search: texas GCN at depths 2 and 4."""
    rows = []
    for depth, gains in PAIR_GAINS.items():
        for ortho, test in ((False, BASE), (True, [b + g for b, g in zip(BASE, gains)])):
            rows.append(hand_row(f"pair-{depth}-{ortho}", val=[0.7] * 5, test=test, search="sota", dataset="texas",
                                 backbone="gcn", depth=depth, ortho=ortho, variant="default", selection="val_acc"))
    return rows


def _holm_by_hand(pvalues: list[float]) -> list[float]:
    """Holm's step-down written out (NaN: no test, outside the family): the i-th smallest of m
    p-values times m - i + 1, capped at 1, then made non-decreasing."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p == p)
    out, floor = [float("nan")] * len(pvalues), 0.0
    for rank, (p, index) in enumerate(tested):
        floor = max(floor, min(1.0, (len(tested) - rank) * p))
        out[index] = floor
    return out


@pytest.fixture()
def mixed(tmp_path):
    store = hand_store(tmp_path / "mixed", [*_rows(), *_pair_rows()])
    store.save_search_meta("sota", {"options": {"space": parse_space(SPACE).to_dict()}})
    return store


@pytest.mark.slow
def test_the_default_pairs_and_the_named_comparisons_of_a_search_are_one_holm_family(mixed, capsys):
    from orthotune.cli import main

    answer = best_answer(mixed)
    pairs, comparisons = answer.pairs, answer.arms.comparisons
    assert list(pairs["depth"]) == [2, 4] and len(comparisons) == 4  # both kinds read, each apart
    raw = [*pairs["p"], *comparisons["p"]]
    expected = _holm_by_hand(raw)  # m = 6, not 2 and 4
    assert [*pairs["p_holm"], *comparisons["p_holm"]] == pytest.approx(expected, rel=1e-12)
    assert answer.arms.pairs == 2 and answer.arms.family == 6
    # depth 2 alone: p = 0.047 < 0.05; in the family of 6 its Holm p is no longer below 0.05
    assert pairs["p"].iloc[0] == pytest.approx(0.0474207, abs=1e-6) and expected[0] > 0.05
    assert pairs["verdict"].iloc[0].startswith("gain not significant")
    assert f"Holm p = {expected[0]:.3g}" in pairs["verdict"].iloc[0]
    assert f"Holm p = {expected[0]:.3g}" in answer.verdicts.lines[0]
    assert list(comparisons["mark"]) == ["worse" if p < 0.05 else "not different" for p in expected[2:]]
    assert "Holm over every comparison, the pairs above included" in answer.verdicts.text()
    assert main(["best", "--store", mixed.uri, "--json"]) == 0  # best --json reads the same adjusted p
    document = json.loads(capsys.readouterr().out)
    assert [p["p_holm"] for p in document["pairs"]] == pytest.approx(expected[:2], rel=1e-12)
    assert [c["p_holm"] for c in document["comparisons"]] == pytest.approx(expected[2:], rel=1e-12)


@pytest.mark.slow
def test_the_report_states_the_family_of_every_comparison(mixed):
    report = build_report(mixed, plots=False)
    assert list(report.summary["p_holm"]) == list(best_answer(mixed).pairs["p_holm"])
    for fmt in ("md", "latex", "html"):
        text = write_report(report, fmt)
        assert "Holm over all 6 comparisons, 2 default pair(s) among them," in text  # the paper table's note
        assert "one family of 6" in text and "all the report's pairs (Holm" not in text
    (_, datasets, rows), = arms_table(report.arms)  # the paper table's marks: the family's
    marks = {name: [cell[2] for cell in cells] for name, cells in rows}
    assert datasets == ["texas", "wisconsin"]
    assert marks["GCN"] == list(report.arms.comparisons.query("arm == 'GCN'")["mark"])


@pytest.mark.slow
def test_a_search_of_one_kind_keeps_its_own_family(tmp_path, store):
    """Only default pairs: Holm over the pairs alone (depth 2 stays significant); only named
    arms: over the four comparisons, as before."""
    pairs_only = best_answer(hand_store(tmp_path / "pairs", _pair_rows()))
    assert pairs_only.arms.empty
    assert list(pairs_only.pairs["p_holm"]) == pytest.approx(_holm_by_hand(list(pairs_only.pairs["p"])), rel=1e-12)
    assert pairs_only.pairs["verdict"].iloc[0].startswith("gain significant")
    named_only = best_answer(store).arms
    assert named_only.pairs == 0 and named_only.family == 4
    assert list(named_only.comparisons["p_holm"]) == holm(list(named_only.comparisons["p"]))
    text = write_report(build_report(tmp_path.joinpath("pairs").as_posix(), plots=False), "md")
    assert "adjusted over all the report's pairs (Holm's step-down, one family)" in text
