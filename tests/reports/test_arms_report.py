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
from orthotune.reports._arms import compare_arms
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


def test_each_comparison_has_its_tuning_curve_figure(store):
    report = build_report(store)
    titles = [figure.title for figure in report.figures]
    assert titles == [f"Tuning curve, {d} full (default): {a} against Ortho-GCNII"
                      for d in ("texas", "wisconsin") for a in ("GCN", "JKNet")]
    assert len({figure.name for figure in report.figures}) == 4
