"""The verdict where people look (issue 25, item 2): one line per pair and the warnings that
say when the verdicts mean little, derived once from the report's data and shown by the
report, `best` and `launch` alike."""

from __future__ import annotations

import pytest
from report_stores import hand_row, hand_store

from orthotune.reports import FEW_TRIALS, build_report, pair_verdicts, write_report
from orthotune.spaces import resolve_space

BASE = [0.70, 0.72, 0.71, 0.73, 0.69]
GAIN = [0.01, 0.03, 0.02, 0.04, 0.00]


def _row(trial_id: str, test: list[float], **columns) -> dict:
    labels = {"variant": "default", "selection": "val_acc"}  # a current row (a null selection reads as v1)
    return hand_row(trial_id, val=[0.8] * len(test), test=test, **{**labels, **columns})


def _pair_store(root, *, best_epoch: int = 5, ortho_best_epoch: int = 5, depth4: bool = False, search="hand"):
    rows = [_row("o2", BASE, best_epoch=best_epoch, search=search),
            _row("x2", [b + d for b, d in zip(BASE, GAIN)], ortho=True, best_epoch=ortho_best_epoch, search=search)]
    if depth4:  # an original cell at depth 4 whose Ortho-GConv partner never ran
        rows.append(_row("o4", BASE, depth=4, search=search))
    return hand_store(root, rows)


def test_one_line_per_pair_with_gain_ci_and_adjusted_p(tmp_path):
    store = _pair_store(tmp_path / "s")
    verdicts = pair_verdicts(store)
    assert len(verdicts.lines) == 1
    line = verdicts.lines[0]
    assert line.startswith("cora full gcn depth 2 (default): gain ")
    # +2.00 pts, the CI of the hand-computed case in test_reports_statistics, one pair: Holm p = p
    assert "+2.00 pts" in line and "95% CI [+0.04, +3.96]" in line and "Holm p = 0.0474" in line
    assert "significant" in line and "not significant" not in line


def test_the_report_opens_with_the_same_lines(tmp_path):
    store = _pair_store(tmp_path / "s")
    report = build_report(store, plots=False)
    assert report.verdicts == pair_verdicts(store)
    html = write_report(report, "html")
    summary_at = html.index("<h2>Summary</h2>")
    assert summary_at < html.index("<h2>Paired comparison")
    assert summary_at < html.index("<h2>Test accuracy")  # before the first table
    assert report.verdicts.lines[0] in html
    md = write_report(report, "md")
    assert md.index("## Summary") < md.index("## Test accuracy")
    assert f"- {report.verdicts.lines[0]}" in md


@pytest.mark.slow
def test_few_trials_are_flagged_below_the_stated_number(tmp_path):
    store = _pair_store(tmp_path / "s")  # one trial per cell
    warnings = pair_verdicts(store).warnings
    assert any(f"2 of 2 cells chose their winner among fewer than {FEW_TRIALS} trials (fewest: 1)" in w
               for w in warnings)
    many = [_row(f"o{i}", BASE, lr=0.001 * (i + 1)) for i in range(FEW_TRIALS)]
    many += [_row(f"x{i}", BASE, lr=0.001 * (i + 1), ortho=True) for i in range(FEW_TRIALS)]
    assert not [w for w in pair_verdicts(hand_store(tmp_path / "many", many)).warnings if "fewer than" in w]


@pytest.mark.slow
def test_winners_at_their_epoch_cap_are_flagged(tmp_path):
    """max_epochs is 100 in the hand rows: a winner selected at epoch 100 was still improving."""
    warnings = pair_verdicts(_pair_store(tmp_path / "cap", ortho_best_epoch=100)).warnings
    capped = [w for w in warnings if "epoch cap" in w]
    assert len(capped) == 1
    assert capped[0].startswith("1 of 2 winners were still improving")
    assert "cora full gcn depth 2 (default) Ortho-GConv" in capped[0]
    below = pair_verdicts(_pair_store(tmp_path / "below", ortho_best_epoch=99)).warnings
    assert not [w for w in below if "epoch cap" in w]


@pytest.mark.slow
def test_cells_without_a_winner_are_flagged(tmp_path):
    verdicts = pair_verdicts(_pair_store(tmp_path / "s", depth4=True))
    assert any(line.startswith("cora full gcn depth 4 (default): no test") for line in verdicts.lines)
    missing = [w for w in verdicts.warnings if "no winner" in w]
    assert missing == ["1 cells have no winner, so their pairs have no test: "
                       "cora full gcn depth 4 (default) Ortho-GConv (no trials)"]


@pytest.mark.slow
@pytest.mark.parametrize(("preset", "smoke"), [("quick", True), ("paper", False)])
def test_a_smoke_test_space_is_flagged_from_the_search_record(tmp_path, preset, smoke):
    store = _pair_store(tmp_path / "s", search="demo")
    store.save_search_meta("demo", {"options": {"space": resolve_space(preset).to_dict()}})
    flagged = [w for w in pair_verdicts(store).warnings if "smoke-test" in w]
    assert bool(flagged) is smoke
    if smoke:
        assert flagged[0].startswith("demo: a smoke-test space")


@pytest.mark.slow
def test_importance_is_the_same_for_the_same_trials_in_any_order_and_labelled_when_few(tmp_path):
    """Six trials of one cell (lr and dropout searched) stored in two orders under two search
    names: the same shares; fewer than FEW_TRIALS trials: marked few, and the report says so."""
    from orthotune.reports._hyperparameters import importance
    from orthotune.reports._load import load_trials

    points = [(0.01, 0.1, 0.61), (0.05, 0.5, 0.72), (0.02, 0.3, 0.55), (0.1, 0.0, 0.80), (0.03, 0.2, 0.66),
              (0.07, 0.4, 0.59)]
    def rows(order, search):
        return [_row(f"{search}{i}", BASE, lr=lr, dropout=dropout, val_acc=val, search=search)
                for i, (lr, dropout, val) in enumerate(order)]
    one = importance(load_trials(hand_store(tmp_path / "a", rows(points, "first"))))
    other = importance(load_trials(hand_store(tmp_path / "b", rows(points[::-1][3:] + points[::-1][:3], "second"))))
    assert len(one) == 1 and one["importance"].tolist() == other["importance"].tolist()
    assert bool(one["few"].iloc[0]) and FEW_TRIALS > 6
    html = write_report(build_report(hand_store(tmp_path / "a2", rows(points, "first")), plots=False), "html")
    assert "few trials, indicative only: " in html
