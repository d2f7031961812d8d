"""`orthotune confirm` end to end on a tiny real store (Texas, 40 epochs), and its bad input:
one line, exit 2, before any training and without writing a confirmation."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))  # the shared store builders
from report_stores import REAL_SEARCH, build_real_store, hand_row, hand_store  # noqa: E402

from orthotune.cli import main  # noqa: E402
from orthotune.core import TrainConfig  # noqa: E402
from orthotune.reports import Filters, best_answer, row_to_config  # noqa: E402
from orthotune.store import read_confirmation  # noqa: E402
from orthotune.training import run_configs  # noqa: E402

FRESH = ("3", "4", "5")  # the tiny search trained Geom-GCN splits 0-2


@pytest.fixture(scope="module")
def confirmed(tmp_path_factory, data_root):
    """The real store, confirmed once on splits 3-5 with Pocock over 2 looks (2 and 3 repeats)."""
    store = build_real_store(tmp_path_factory.getbasetemp() / "real-store-confirm")
    code = main(["confirm", "--store", store.uri, "--search", REAL_SEARCH, "--repeats", *FRESH, "--json"])
    assert code == 0
    return store


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_confirm_retrains_both_winners_on_the_fresh_splits_only(confirmed):
    document = read_confirmation(confirmed, REAL_SEARCH)
    assert document["design"] == "pocock" and document["looks"] == 2
    answer = best_answer(confirmed, Filters(searches=(REAL_SEARCH,)))
    assert [p["pair"] for p in document["pairs"]] == ["texas full gcn depth 2 (default)",
                                                       "texas full gcn depth 4 (default)"]
    winners = {(row["search"], row["trial_id"]): row for _, row in answer.winners.iterrows()}
    for pair in document["pairs"]:
        assert pair["looks_planned"] == [2, 3] and pair["repeats_planned"] == [3, 4, 5]
        taken = pair["looks_planned"][pair["looks_taken"] - 1]
        assert pair["repeats"] == [3, 4, 5][:taken]  # never a split the search used
        # the stored accuracies are the winner's config trained on those splits, as `train` trains it
        row = winners[(pair["ortho_search"], pair["ortho_trial_id"])]
        config = row_to_config(row)
        batches = [pair["repeats"][:2], pair["repeats"][2:]]  # trained look by look
        rerun = [run.test_acc for batch in batches if batch
                 for run in run_configs([TrainConfig.from_dict({**config.to_dict(), "splits": batch})],
                                        torch.device("cpu"))[0].runs]
        assert rerun == pair["ortho_test_acc"]
        diffs = np.subtract(pair["ortho_test_acc"], pair["orig_test_acc"])
        assert pair["gain"] == pytest.approx(float(diffs.mean()))
        # the search's own gain is kept beside it
        searched = answer.pairs[answer.pairs["ortho_trial_id"] == pair["ortho_trial_id"]].iloc[0]
        assert pair["search_gain"] == pytest.approx(float(searched["diff_mean"]))


@pytest.mark.slow
def test_best_json_and_the_verdicts_show_the_confirmed_gain(confirmed, capsys):
    document = read_confirmation(confirmed, REAL_SEARCH)
    code, out, _ = run_cli(capsys, "best", "--store", confirmed.uri, "--json")
    assert code == 0
    pairs = json.loads(out)["pairs"]
    by_id = {p["ortho_trial_id"]: p for p in document["pairs"]}
    assert len(pairs) == 2
    for pair in pairs:
        stored = by_id[pair["ortho_trial_id"]]
        assert pair["confirm_gain"] == pytest.approx(stored["gain"]) and pair["confirm_design"] == "pocock"
        assert pair["confirm_repeats"] == stored["repeats"] and pair["diff_mean"] is not None
        assert pair["confirm_p_holm"] is None or pair["confirm_p_holm"] >= (pair["confirm_p"] or 0)
    code, out, _ = run_cli(capsys, "best", "--store", confirmed.uri)
    lines = [line for line in out.splitlines() if line.startswith("  texas full gcn")]
    assert len(lines) == 2 and all("; confirmed on fresh splits 3" in line and "(Pocock, " in line for line in lines)
    code, out, _ = run_cli(capsys, "report", "--store", confirmed.uri, "--format", "md")
    assert code == 0 and out.count("confirmed on fresh splits") == 2


def _refused(capsys, *args: str) -> str:
    code, out, err = run_cli(capsys, "confirm", *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.slow
def test_an_unknown_search_is_one_line(confirmed, capsys):
    err = _refused(capsys, "--store", confirmed.uri, "--search", "nope")
    assert "no search 'nope'" in err and REAL_SEARCH in err


def test_an_unknown_design_is_one_line_listing_the_valid_ones(tmp_path, capsys):
    err = _refused(capsys, "--store", str(tmp_path / "none"), "--search", "x", "--design", "obf")
    assert "'obf'" in err and "pocock, obrien-fleming, bonferroni" in err
    err = _refused(capsys, "--store", str(tmp_path / "none"), "--search", "x", "--looks", "4")
    assert "--looks 4" in err


def test_cv10_has_no_fresh_folds(tmp_path, capsys):
    rows = [hand_row(f"t{i}", [0.8] * 10, [0.7 + 0.01 * j for j in range(10)], search="folds", setting="cv10",
                     ortho=bool(i), T=2 if i else None, splits=list(range(10))) for i in (0, 1)]
    store = hand_store(tmp_path / "store", rows)
    err = _refused(capsys, "--store", store.uri, "--search", "folds")
    assert "no fresh folds" in err
    assert read_confirmation(store, "folds") is None


@pytest.mark.slow
def test_repeats_the_search_used_or_too_few_for_the_looks_are_refused(confirmed, capsys):
    before = read_confirmation(confirmed, REAL_SEARCH)
    err = _refused(capsys, "--store", confirmed.uri, "--search", REAL_SEARCH, "--repeats", "2", "3", "4")
    assert "[2] were used by the search" in err
    err = _refused(capsys, "--store", confirmed.uri, "--search", REAL_SEARCH, "--repeats", "3", "4", "--looks", "2")
    assert "cannot hold 2 looks" in err
    err = _refused(capsys, "--store", confirmed.uri, "--search", REAL_SEARCH, "--repeats", "10", "11", "12")
    assert "do not exist" in err and "splits 0-9" in err
    assert read_confirmation(confirmed, REAL_SEARCH) == before  # nothing trained, nothing written
    assert not math.isnan(before["pairs"][0]["gain"])


def test_store_check_reads_the_confirmations_and_flags_a_damaged_one(tmp_path, capsys):
    store = hand_store(tmp_path / "store", [hand_row("t0")])
    code, out, _ = run_cli(capsys, "store", "check", "--store", store.uri)
    assert code == 0
    (tmp_path / "store" / "confirmations").mkdir()
    (tmp_path / "store" / "confirmations" / "hand.json").write_text("{not json")
    code, out, err = run_cli(capsys, "store", "check", "--store", store.uri)
    assert code != 0 and "confirmations/hand.json: unreadable json" in out + err
    assert read_confirmation(store, "hand") is None  # a reader warns and goes on without it
