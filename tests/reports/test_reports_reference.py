"""Every verdict beside the structure-agnostic reference (issue 36): its test accuracy (mean
+- std over its repeats) and, in words, where the arms fall against its 95% confidence
interval; the pair table's columns; filters keep it; a search's record says whose reference
rows it reuses. Hand-made stores with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from report_stores import hand_row, hand_store
from scipy import stats

from orthotune.core import REFERENCE, Cell
from orthotune.reports import Filters, build_report, pair_verdicts, write_report

ARM = [0.50, 0.52, 0.51, 0.53, 0.49]  # mean 51.0
REF = [0.80, 0.84, 0.82, 0.86, 0.78]  # mean 82.0, sample std 3.16


def _row(trial_id: str, test: list[float], **columns) -> dict:
    labels = {"variant": "default", "selection": "val_acc", "dataset": "wisconsin"}
    return hand_row(trial_id, val=[0.8] * len(test), test=test, **{**labels, **columns})


def _store(root, original, ortho, reference=REF, **reference_columns):
    rows = [_row("o", original), _row("x", ortho, ortho=True)]
    if reference is not None:
        rows.append(_row("r", reference, backbone="mlp", **reference_columns))
    return hand_store(root, rows)


def _shift(values, by):
    return [v + by for v in values]


def _ci(values):
    half = stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / math.sqrt(len(values))
    return np.mean(values) - half, np.mean(values) + half


def test_a_reference_row_is_the_reference_cell():
    row = {"dataset": "wisconsin", "backbone": "mlp", "depth": 2, "ortho": False}
    assert Cell.of(row).arm is REFERENCE and Cell.of(row).key == "wisconsin/mlp/2/reference"
    assert Cell.reference("wisconsin").key == "wisconsin/mlp/2/reference"
    assert Cell.reference("proteins").key == "proteins/sum-mlp/2/reference"


def test_both_arms_below_is_said_with_the_gap(tmp_path):
    store = _store(tmp_path / "s", ARM, _shift(ARM, 0.02))
    (line,) = pair_verdicts(store).lines
    # the better arm (53.0) is 29.0 pts under the reference's 82.0
    assert "structure-agnostic baseline 82.00 +- 3.16" in line
    assert ("both arms below the structure-agnostic baseline by 29.0 pts: the graph hurts here; the Ortho-GConv "
            "gain does not make this backbone useful on this dataset") in line


def test_only_one_arm_below(tmp_path):
    low, _ = _ci(REF)
    inside = [v + (low + 0.005 - np.mean(ARM)) for v in ARM]  # just inside the CI
    (line,) = pair_verdicts(_store(tmp_path / "s", ARM, inside)).lines
    assert "only the original arm below the structure-agnostic baseline (by 31.0 pts)" in line
    assert "the Ortho-GConv arm within its 95% CI" in line


def test_both_arms_above(tmp_path):
    store = _store(tmp_path / "s", _shift(ARM, 0.40), _shift(ARM, 0.41))
    (line,) = pair_verdicts(store).lines
    assert "both arms above the structure-agnostic baseline (by 9.0 pts or more): the graph helps here" in line


def test_both_within_the_interval(tmp_path):
    store = _store(tmp_path / "s", _shift(REF, 0.001), _shift(REF, -0.001))
    (line,) = pair_verdicts(store).lines
    assert "both arms within the 95% CI of the structure-agnostic baseline" in line


def test_no_reference_is_said(tmp_path):
    (line,) = pair_verdicts(_store(tmp_path / "s", ARM, ARM, reference=None)).lines
    assert "no structure-agnostic baseline for wisconsin in the store" in line


def test_the_reference_of_another_dataset_or_split_rule_is_not_used(tmp_path):
    rows = [_row("o", ARM), _row("x", ARM, ortho=True), _row("r", REF, backbone="mlp", dataset="texas")]
    (line,) = pair_verdicts(hand_store(tmp_path / "s", rows)).lines
    assert "no structure-agnostic baseline for wisconsin" in line


def test_the_report_table_and_every_format_carry_it(tmp_path):
    store = _store(tmp_path / "s", ARM, _shift(ARM, 0.02))
    report = build_report(store, plots=False)
    row = report.summary.iloc[0]
    low, high = _ci(REF)
    assert row["ref_test_acc"] == pytest.approx(0.82) and row["ref_test_acc_std"] == pytest.approx(np.std(REF, ddof=1))
    assert (row["ref_ci_low"], row["ref_ci_high"]) == pytest.approx((low, high))
    assert row["ref_trial_id"] == "r" and row["ref_repeats"] == 5
    assert len(report.summary) == 1  # the reference is no pair
    for name in ("md", "html", "latex"):
        text = write_report(report, name)
        assert "both arms below the structure-agnostic baseline by 29.0 pts" in text, name
    assert "structure-agnostic (test %)" in write_report(report, "md")
    assert "ref_test_acc" in write_report(report, "csv").splitlines()[0]


@pytest.mark.slow
def test_the_arms_filters_keep_the_reference(tmp_path):
    store = _store(tmp_path / "s", ARM, _shift(ARM, 0.02))
    for filters in (Filters(backbones=("gcn",)), Filters(depths=(2,)), Filters(variants=("default",))):
        (line,) = pair_verdicts(store, filters).lines
        assert "structure-agnostic baseline 82.00" in line
    assert "structure-agnostic baseline 82.00" in pair_verdicts(store, Filters(ortho=True)).lines[0]


def test_a_search_sees_the_reference_rows_it_reuses(tmp_path):
    rows = [_row("o", ARM, search="second"), _row("x", _shift(ARM, 0.02), ortho=True, search="second"),
            _row("r", REF, backbone="mlp", search="first")]
    store = hand_store(tmp_path / "s", rows)
    (alone,) = pair_verdicts(store, Filters(searches=("second",))).lines
    assert "no structure-agnostic baseline" in alone
    store.save_search_meta("second", {"references": {"wisconsin/mlp/2/reference": "first"}})
    store.save_search_meta("first", {})
    (line,) = pair_verdicts(store, Filters(searches=("second",))).lines
    assert "both arms below the structure-agnostic baseline by 29.0 pts" in line


@pytest.mark.slow
def test_best_prints_the_reference_and_its_json_fields(tmp_path, capsys):
    import json

    from orthotune.cli import main

    store = _store(tmp_path / "s", ARM, _shift(ARM, 0.02))
    assert main(["best", "--store", store.uri]) == 0
    out = capsys.readouterr().out
    assert "structure-agnostic" in out.split("verdict per pair")[0]  # its winner in the table
    assert "both arms below the structure-agnostic baseline by 29.0 pts" in out
    assert main(["best", "--store", store.uri, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    (pair,) = answer["pairs"]
    assert pair["ref_test_acc"] == pytest.approx(0.82) and pair["ref_trial_id"] == "r" and pair["ref_repeats"] == 5
    assert pair["ref_ci_low"] == pytest.approx(_ci(REF)[0]) and pair["ref_backbone"] == "mlp"
    assert pair["reference"].startswith("structure-agnostic baseline 82.00 +- 3.16: both arms below")
    configs = answer["configs"]  # the reference's winner reruns with `train --config` too
    assert [c["backbone"] for c in configs] == ["gcn", "gcn", "mlp"] and configs[-1]["ortho"] is False


@pytest.mark.slow
def test_best_answers_winners_are_every_cells_selected_once_with_the_reference(tmp_path):
    """`best` shows the arms' winners and the reference's, taken from the selections the pairs
    made (not selected again over the whole frame): the same rows and columns as one
    selection over every trial, the reference's cell among them, in cell order."""
    import pandas as pd

    from orthotune.reports import best_answer
    from orthotune.reports._load import load_trials, open_store
    from orthotune.reports._report import CURVE_COLUMNS
    from orthotune.reports._select import complete_rows, select_best

    rows = [_row("o", ARM), _row("x", _shift(ARM, 0.02), ortho=True), _row("o4", ARM, depth=4),
            _row("r", REF, backbone="mlp"), _row("r2", _shift(REF, -0.1), backbone="mlp")]
    store = open_store(hand_store(tmp_path / "s", rows))
    answer = best_answer(store)
    once = complete_rows(store, select_best(load_trials(store, Filters(), CURVE_COLUMNS)))
    pd.testing.assert_frame_equal(answer.winners, once)
    assert sorted(answer.winners["trial_id"]) == ["o", "o4", "r", "x"]
