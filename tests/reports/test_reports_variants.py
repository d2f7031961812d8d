"""Variants (profiles, ablations, schema-v1 rows) never mix; ablation and winners tables,
verdicts in words, hyperparameter importance and numbers printed as their decimal values."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from report_stores import hand_row, hand_store

from orthotune.core import PROFILES, TrainConfig
from orthotune.reports import Filters, best_configs, build_report, config_dict, write_report
from orthotune.reports._load import SWITCHES
from orthotune.reports._plots import figures
from orthotune.reports._stats import Paired


def v2_row(trial_id: str, **columns) -> dict:
    """A schema-v2 row: every switch at TrainConfig's default unless given (v1 rows lack them)."""
    defaults = TrainConfig(dataset="cora").to_dict()
    return hand_row(trial_id, **{**{k: defaults[k] for k in SWITCHES}, **columns})


@pytest.mark.slow
def test_reports_keep_variants_apart(tmp_path):
    official = {**PROFILES["official"], "variant": "official"}
    store = hand_store(tmp_path / "s", [
        v2_row("orig", val=[0.80, 0.80], test=[0.60, 0.62]),
        v2_row("x-default", val=[0.70, 0.70], test=[0.70, 0.74], ortho=True),
        # a better objective under another profile must not take the default cell
        v2_row("x-official", val=[0.95, 0.95], test=[0.50, 0.50], ortho=True, **official),
        # schema-v1 rows (no switch columns) are the "v1" variant, literal Frobenius bounding
        hand_row("x-v1", val=[0.99, 0.99], test=[0.10, 0.10], ortho=True),
    ])
    winners = best_configs(store)
    by_variant = {(r.variant, bool(r.ortho)): r.trial_id for r in winners.itertuples()}
    assert by_variant == {("default", False): "orig", ("default", True): "x-default",
                          ("official", True): "x-official", ("v1", True): "x-v1"}
    assert winners.set_index("trial_id").loc["x-v1", "bound"] == "frobenius"
    summary = build_report(store, plots=False).summary.set_index("variant")
    # the original default arm pairs with the default Ortho-GConv cell only
    assert summary.loc["default", ["orig_trial_id", "ortho_trial_id"]].tolist() == ["orig", "x-default"]
    assert summary.loc["official", "note"] == "no original winner"
    assert pd.isna(summary.loc["v1", "orig_trial_id"])
    only = best_configs(store, Filters(variants=("official",)))
    assert only["trial_id"].tolist() == ["x-official"]


def test_ortho_only_switches_split_ortho_cells_but_share_the_original(tmp_path):
    store = hand_store(tmp_path / "s", [
        v2_row("orig-a", val=[0.80, 0.80], test=[0.60, 0.62]),
        # the original arm ignores the Ortho-only switches: same cell, so one winner
        v2_row("orig-b", val=[0.70, 0.70], test=[0.90, 0.90], bound="frobenius"),
        v2_row("x-cov", val=[0.70, 0.70], test=[0.70, 0.74], ortho=True),
        v2_row("x-frob", val=[0.60, 0.60], test=[0.65, 0.66], ortho=True, bound="frobenius"),
    ])
    winners = best_configs(store)
    assert sorted(winners["trial_id"]) == ["orig-a", "x-cov", "x-frob"]
    summary = build_report(store, plots=False).summary
    assert sorted(summary["variant"]) == ["default (bound=covariance)", "default (bound=frobenius)"]
    assert summary["orig_trial_id"].tolist() == ["orig-a", "orig-a"]


def test_ablation_table_compares_each_variant_with_the_full_model(tmp_path):
    rows = [v2_row("orig", variant="full", test=[0.70, 0.70, 0.70])]
    ablations = {"full": [0.80, 0.82, 0.81], "no-hybrid": [0.75, 0.78, 0.76], "no-transform": [0.30, 0.29, 0.31],
                 "no-reg": [0.81, 0.82, 0.80]}
    fixed = {"no-hybrid": dict(beta=1.0), "no-transform": dict(transform="none"), "no-reg": dict(lam=0.0)}
    for name, test in ablations.items():
        rows.append(v2_row(f"x-{name}", val=[0.8] * 3, test=test, ortho=True, variant=name, **fixed.get(name, {})))
    report = build_report(hand_store(tmp_path / "s", rows), plots=False)
    table = report.ablation.set_index("variant")
    assert set(table["reference"]) == {"full"}
    assert table.loc["full", "verdict"] == "reference"
    assert table.loc["no-transform", "diff_mean"] == pytest.approx(0.30 - 0.81)
    assert table.loc["no-transform", "verdict"].startswith("worse significant (-51.00 pts, 95% CI [")
    assert table.loc["no-reg", "verdict"].startswith("no difference") or "not significant" in table.loc[
        "no-reg", "verdict"]
    text = write_report(report, "md")
    assert "## Ablations" in text and "| full | cora | gcn | 2 | no-transform | full | 30.00 ± 1.00 |" in text
    assert table.loc["no-hybrid", "verdict"].startswith("worse significant")


@pytest.mark.parametrize(
    "paired_result, words",
    [
        (Paired(5, 0.04, 0.01, 8.9, 0.001, ""), "gain significant (+4.00 pts, p = 0.001)"),
        (Paired(5, 0.01, 0.02, 1.1, 0.33, ""), "gain not significant (+1.00 pts, p = 0.33)"),
        (Paired(5, -0.03, 0.01, -6.7, 0.0026, ""), "reversed significant (-3.00 pts, p = 0.0026)"),
        (Paired(5, -0.003, 0.02, -0.3, 0.78, ""), "reversed not significant (-0.30 pts, p = 0.78)"),
        (Paired(0, float("nan"), float("nan"), float("nan"), float("nan"), "no original winner"),
         "no test (no original winner)"),
        # with its CI and the Holm-adjusted p, which decides the verdict
        (Paired(5, 0.04, 0.01, 8.9, 0.001, "", 0.03, 0.05, 0.06),
         "gain not significant (+4.00 pts, 95% CI [+3.00, +5.00], p = 0.001, Holm p = 0.06)"),
    ],
)
def test_verdict_in_words_whatever_the_sign(paired_result, words):
    assert paired_result.verdict() == words


def test_winners_table_numbers_and_json_have_no_float_noise(tmp_path):
    store = hand_store(tmp_path / "s", [
        v2_row("orig", test=[0.6, 0.6, 0.6, 0.6, 0.6], val=[0.8] * 5),
        v2_row("x", ortho=True, beta=0.7000000000000001, lr=0.1 + 0.2, T=4, status="stopped", epochs=30,
               val=[0.8] * 5, test=[0.7] * 5),
    ])
    report = build_report(store, plots=False)
    text = write_report(report, "md")
    header = next(line for line in text.splitlines() if line.startswith("| setting | dataset | backbone | depth | arm"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in text.splitlines() if "| Ortho-GConv | default |" in line and "stopped" in line)
    values = dict(zip(columns, [c.strip() for c in row.strip("|").split("|")], strict=True))
    assert (values["T"], values["beta"], values["lr"], values["epochs"]) == ("4", "0.7", "0.3", "30")
    assert values["status"] == "stopped"
    assert "0.7000000000000001" not in text and "0.30000000000000004" not in text
    configs = [config_dict(r) for _, r in best_configs(store).iterrows()]
    printed = json.dumps(configs)
    assert '"beta": 0.7,' in printed and "0.30000000000000004" not in printed
    frame = pd.read_csv(io.StringIO(write_report(report, "csv")), dtype=str)
    assert frame["orig_repeats"].tolist() == ["5"] and frame["n_pairs"].tolist() == ["5"]


def test_csv_counts_stay_integers_when_an_arm_is_missing(tmp_path):
    store = hand_store(tmp_path / "s", [v2_row("o2"), v2_row("x2", ortho=True), v2_row("o4", depth=4)])
    frame = pd.read_csv(io.StringIO(write_report(build_report(store, plots=False), "csv")), dtype=str,
                        keep_default_na=False)
    assert frame["ortho_repeats"].tolist() == ["2", ""] and frame["depth"].tolist() == ["2", "4"]


@pytest.mark.slow
def test_importance_ranks_the_hyperparameter_that_decides(tmp_path):
    # val accuracy follows T exactly; beta is noise: fANOVA must rank T first
    rows = [v2_row(f"x{i}", ortho=True, T=t, beta=b, val=[0.5 + 0.05 * t] * 2)
            for i, (t, b) in enumerate([(1, 0.3), (2, 0.9), (3, 0.1), (4, 0.5), (5, 0.7), (6, 0.2), (2, 0.4),
                                         (5, 0.8)])]
    report = build_report(hand_store(tmp_path / "s", rows), plots=False)
    (text,) = report.importance["importance"].tolist()
    shares = dict(item.split("=") for item in text.split(", "))
    assert list(shares) == ["T", "beta"] and float(shares["T"]) > 0.8
    assert report.importance["trials"].tolist() == [8]
    # a constant objective has no variance to share out: the cell is left out, not an error
    flat = [v2_row(f"f{t}", ortho=True, T=t, val=[0.8, 0.8]) for t in (1, 2, 3, 4)]
    assert build_report(hand_store(tmp_path / "flat", flat), plots=False).importance.empty


@pytest.mark.slow
def test_importance_of_a_cell_beyond_the_cap_is_fitted_on_a_seeded_sample_and_says_so(tmp_path, monkeypatch):
    """A cell of more trials than ``IMPORTANCE_TRIALS`` (6 here, 500 in a report) has its forest
    fitted on that many, drawn at random with a fixed seed: the table says "6 of 10" and the
    note how they were drawn; the same trials in another order give the same shares; a cell
    within the cap keeps its plain count and the plain note."""
    from orthotune.reports import _hyperparameters, _text

    monkeypatch.setattr(_hyperparameters, "IMPORTANCE_TRIALS", 6)
    monkeypatch.setattr(_text, "IMPORTANCE_TRIALS", 6)
    settings = [(1, 0.3), (2, 0.9), (3, 0.1), (4, 0.5), (5, 0.7), (6, 0.2), (2, 0.4), (5, 0.8), (1, 0.6), (6, 0.35)]
    rows = [v2_row(f"x{i}", ortho=True, T=t, beta=b, val=[0.5 + 0.05 * t] * 2) for i, (t, b) in enumerate(settings)]
    report = build_report(hand_store(tmp_path / "s", rows), plots=False)
    assert report.importance[["trials", "fitted"]].values.tolist() == [[10, 6]]
    shares = dict(item.split("=") for item in report.importance["importance"].iloc[0].split(", "))
    assert list(shares) == ["T", "beta"] and float(shares["T"]) > 0.8
    text = write_report(report, "md")
    assert "| 6 of 10 |" in text and "fitted on 6 of them drawn at random (seed 0)" in text
    again = build_report(hand_store(tmp_path / "again", rows[::-1]), plots=False)
    assert again.importance["importance"].tolist() == report.importance["importance"].tolist()
    # the sample: that many distinct positions, ascending, the same each time; all within the cap
    sample = _hyperparameters.importance_sample(10)
    assert len(set(sample.tolist())) == 6 and sample.tolist() == sorted(sample.tolist())
    assert sample.tolist() == _hyperparameters.importance_sample(10).tolist()
    assert _hyperparameters.importance_sample(4).tolist() == [0, 1, 2, 3]
    small = build_report(hand_store(tmp_path / "small", rows[:5]), plots=False)
    assert small.importance[["trials", "fitted"]].values.tolist() == [[5, 5]]
    assert "drawn at random" not in write_report(small, "md")


@pytest.mark.slow
def test_importance_fitted_in_worker_processes_or_without_them_is_the_same(tmp_path, monkeypatch):
    """The report fits the importance's forests in forked worker processes while it draws its
    figures; where processes cannot be forked it fits them itself: the same table either way,
    and the same as fitted one cell after the other in this process."""
    from concurrent.futures import ProcessPoolExecutor

    from orthotune.reports import _report
    from orthotune.reports._hyperparameters import importance, start_importance
    from orthotune.reports._load import Filters, load_trials, open_store

    rows = [v2_row(f"x{depth}-{i}", ortho=True, T=t, beta=b, val=[0.5 + 0.05 * t] * 2, depth=depth)
            for depth in (2, 4) for i, (t, b) in enumerate([(1, 0.3), (2, 0.9), (3, 0.1), (4, 0.5), (5, 0.7)])]
    store = hand_store(tmp_path / "s", rows)
    forked = build_report(store, plots=False).importance
    assert len(forked) == 2
    with _report._workers() as pool:
        assert isinstance(pool, ProcessPoolExecutor)
    monkeypatch.setattr(_report.multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    with _report._workers() as pool:
        assert pool is None
    pd.testing.assert_frame_equal(build_report(store, plots=False).importance, forked)
    trials = load_trials(open_store(store), Filters(), _report.REPORT_COLUMNS)
    with ProcessPoolExecutor(2) as pool:
        pd.testing.assert_frame_equal(start_importance(trials, pool)(), importance(trials))


@pytest.mark.slow
def test_t_plot_marks_stuck_and_stopped_trials_and_captions_missing_steadiness(tmp_path):
    store = hand_store(tmp_path / "s", [
        v2_row("orig", val=[0.5, 0.5]),
        v2_row("x1", ortho=True, T=1, val=[0.28, 0.28], repeat_best_epoch=[1, 1]),
        v2_row("x4", ortho=True, T=4, val=[0.8, 0.8], status="stopped", epochs=12, m_sig=None, grad_norms=None),
    ])
    report = build_report(store)
    ts = report.t_effect.set_index("T")
    assert ts.loc[1, "stuck"] and not ts.loc[4, "stuck"] and ts.loc[4, "status"] == "stopped"
    figures = {f.name.split("-cora")[0]: f for f in report.figures}
    assert "1 stopped, 1 stuck" in figures["effect-of-T"].caption
    assert "stopped by ASHA at epoch 12" in figures["msig-depth"].caption
    assert "stopped by ASHA at epoch 12" in figures["grad-norms"].caption
    assert figures["history"].png.startswith(b"\x89PNG")


@pytest.mark.slow
def test_gradient_norms_over_epochs_are_drawn_per_arm_as_figure_1bc(tmp_path):
    # the epochs table's per-layer gradient norms (recorded every k epochs), as the store
    # will hand them over: one row per (trial, repeat, epoch)
    store = hand_store(tmp_path / "s", [v2_row("o", depth=8), v2_row("x", depth=8, ortho=True)])
    report = build_report(store, plots=False)
    grads = pd.DataFrame([
        {"search": "hand", "trial_id": trial, "repeat": repeat, "epoch": epoch,
         "grad_norms": [scale * 10.0 ** (layer - 8) for layer in range(8)]}
        for trial, scale in (("o", 1.0), ("x", 0.5)) for repeat in (0, 1) for epoch in (1, 50, 100)
    ])
    drawn = {f.name: f for f in figures(report.summary, report.winners, report.t_effect, None, grads)}
    figure = drawn["grad-epochs-cora-full"]
    assert figure.png.startswith(b"\x89PNG") and "Figure 1(b, c)" in figure.caption
    without = figures(report.summary, report.winners, report.t_effect, None, None)
    assert "grad-epochs-cora-full" not in {f.name for f in without}


@pytest.mark.slow
def test_smoothness_figure_appears_with_and_without_feature_transformations(tmp_path):
    rows = [v2_row(f"{t}{d}", depth=d, feature_transform=t == "w", smoothness=1.0 / d if t == "w" else 0.1 / d)
            for t in ("w", "p") for d in (2, 8, 32)]
    report = build_report(hand_store(tmp_path / "s", rows))
    names = [f.name for f in report.figures]
    assert "smoothness-depth-cora-full" in names
    assert report.summary["variant"].nunique() == 2  # with and without W(l) are different cells
