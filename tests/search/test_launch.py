"""Real searches on a real local Ray, on real Cora, through the ``orthotune`` command."""

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
import yaml

from orthotune.store import Store

pytestmark = pytest.mark.slow  # each launches a real Ray and trains on Cora

SPACE = {
    "name": "test",
    "datasets": ["cora"],
    "repeats": [0],
    "backbones": ["gcn"],
    "depths": [2],
    "original": True,
    "ortho": {"T": [2, 6], "beta": 1.0, "lam": 5.0e-4},
    # a tiny learning rate trails at ASHA's rungs (measured: best validation 0.14 against 0.30 at
    # epoch 4), so ASHA has trials to stop; lr 1e30 makes the loss non-finite at once: those
    # trials must fail, the search must not. Each cell has more configs than samples.
    "train": {"lr": [0.1, 0.03, 0.01, 0.0002, 1.0e+30], "dropout": 0.0, "epochs": 24, "patience": 24,
              "hidden": 16},
    "asha": {"grace_period": 4, "reduction_factor": 2},
    "samples": 5,  # per cell: two cells (the original and the ortho arm)
}
TOTAL = 2 * SPACE["samples"]


def orthotune(*args, env=None, **kwargs):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "orthotune.cli", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs)


def finish(proc, timeout=420):
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return out


def printed_counts(out: str) -> Counter:
    line = next(line for line in out.splitlines() if line.startswith("search "))
    return Counter({status: int(n) for n, status in re.findall(r"(\d+) (completed|stopped|failed)", line)})


@pytest.fixture(scope="module")
def space_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("space") / "test.yaml"
    path.write_text(yaml.safe_dump(SPACE))
    return path


@pytest.fixture(scope="module")
def finished_search(tmp_path_factory, space_file):
    store = tmp_path_factory.mktemp("store") / "s"
    out = finish(orthotune("launch", "--space", str(space_file), "--store", str(store), "--name", "asha",
                           "--concurrency", "2", "--report-every", "2", "--seed", "0"))
    return store, out


def test_launch_prints_the_plans_total_before_the_first_trial(finished_search):
    """The plan's one line (measured on this machine) comes before any progress line."""
    _, out = finished_search
    lines = out.splitlines()
    total = next(i for i, line in enumerate(lines) if line.startswith(f"plan: {TOTAL} trials over 2 cells and arms"))
    first_progress = next(i for i, line in enumerate(lines) if "configs done" in line)
    assert total < first_progress and "core-hours" in lines[total] and "trials at once" in lines[total]
    assert all(line.startswith("plan: ") for line in lines[:total])  # only the plan's notes before it


def test_asha_and_optuna_search_completes_and_stores_every_trial(finished_search):
    store, out = finished_search
    trials = Store.open(str(store)).read("trials").to_pylist()
    counts = printed_counts(out)
    assert sum(counts.values()) == len(trials) == TOTAL
    assert Counter(t["ortho"] for t in trials) == {True: SPACE["samples"], False: SPACE["samples"]}  # per cell
    assert Counter(t["status"] for t in trials) == counts  # the store agrees with Ray Tune
    assert counts["stopped"] >= 1, out  # ASHA stopped some trial early
    stopped = [t for t in trials if t["status"] == "stopped"]
    assert all(t["epochs"] < SPACE["train"]["epochs"] for t in stopped)
    assert len({t["trial_id"] for t in trials}) == len(trials)
    assert "best val_acc cora/gcn/2/ortho" in out and f"/{TOTAL} configs done:" in out  # progress lines


def test_launch_ends_with_the_verdict_of_each_pair(finished_search):
    """The last lines: one verdict per pair (one pair here) with its tuning curve's word, and
    the warnings on it. One repeat gives no CI, so the curve is not judged; the few-trials
    warning stays unless an arm's winner came late, whose statement then replaces it."""
    _, out = finished_search
    lines = out.rstrip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("verdict per pair"))
    assert lines[start + 1].startswith("  cora full gcn depth 2 (default): ")
    assert "pts" in lines[start + 1]
    assert lines[start + 1].endswith("; tuning curve: not judged: no CI at the full budget")
    warnings = lines[start + 2:]
    assert warnings and all(line.startswith("warning: ") for line in warnings)
    late = [w for w in warnings if "improved in the last 25% of" in w]  # one arm or both
    few = [w for w in warnings if "cells chose their winner among fewer than 20 trials" in w]
    assert (late and not few) or (few and not late), warnings


def test_live_views_hold_each_trials_curves_and_each_cells_study(finished_search):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    store, _ = finished_search
    trials = Store.open(str(store)).read("trials").to_pylist()
    for trial in trials:
        arm = "ortho" if trial["ortho"] else "original"
        assert list((store / "tensorboard" / "asha" / f"cora-gcn-2-{arm}" / trial["trial_id"]).glob("events.*"))
    storage = JournalStorage(JournalFileBackend(str(store / "optuna" / "asha.journal")))
    assert sorted(optuna.get_all_study_names(storage)) == ["asha/cora/gcn/2/original", "asha/cora/gcn/2/ortho"]
    study = optuna.load_study(study_name="asha/cora/gcn/2/ortho", storage=storage)
    assert len([t for t in study.trials if t.state.is_finished()]) >= SPACE["samples"]


def test_a_diverging_config_fails_while_the_search_completes(finished_search):
    store, _ = finished_search
    trials = Store.open(str(store)).read("trials").to_pylist()
    failed = [t for t in trials if t["status"] == "failed"]
    assert failed and all(t["lr"] == 1.0e30 and "non-finite" in t["reason"] for t in failed)
    assert any(t["status"] == "completed" for t in trials)


def test_epochs_table_holds_each_trials_history(finished_search):
    store, _ = finished_search
    opened = Store.open(str(store))
    trials = {t["trial_id"]: t for t in opened.read("trials").to_pylist()}
    epochs = opened.read("epochs").to_pylist()
    per_trial = Counter(e["trial_id"] for e in epochs)
    for trial_id, trial in trials.items():
        if trial["status"] != "failed":
            assert per_trial[trial_id] == trial["epochs"], trial
    keys = [(e["trial_id"], e["repeat"], e["epoch"]) for e in epochs]
    assert len(keys) == len(set(keys))


def test_objective_is_mean_validation_never_test(finished_search):
    """Checked against the per-epoch history, not against the row's own lists: each repeat's
    result is its first epoch with the highest validation accuracy, its test accuracy is the
    one at that epoch, and the objective is their mean (test never picks anything)."""
    store, _ = finished_search
    opened = Store.open(str(store))
    history = {}
    for row in opened.read("epochs").to_pylist():
        history.setdefault((row["trial_id"], row["repeat"]), []).append(row)
    checked = 0
    for trial in opened.read("trials").to_pylist():
        if trial["status"] != "completed":
            continue
        selected = []
        for repeat in range(len(trial["repeat_val_acc"])):
            epochs = sorted(history[(trial["trial_id"], repeat)], key=lambda r: r["epoch"])
            best = max(r["val_acc"] for r in epochs)
            first = next(r for r in epochs if r["val_acc"] == best)
            assert trial["repeat_best_epoch"][repeat] == first["epoch"]
            assert trial["repeat_val_acc"][repeat] == pytest.approx(best)
            assert trial["repeat_test_acc"][repeat] == pytest.approx(first["test_acc"])
            selected.append(best)
        assert trial["val_acc"] == pytest.approx(sum(selected) / len(selected))
        checked += 1
    assert checked


def test_status_lists_searches_with_counts(finished_search):
    store, _ = finished_search
    out = subprocess.run([sys.executable, "-m", "orthotune.cli", "status", "--store", str(store)],
                         capture_output=True, text=True, check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("asha"))
    assert "finished" in row and f" {TOTAL} " in row


def test_a_finished_search_is_compacted_and_its_summary_holds_its_counts(finished_search):
    store, out = finished_search
    for table in ("trials", "epochs"):
        names = [p.name for p in (store / table / "search=asha").iterdir()]
        assert len(names) == 1 and names[0].startswith("compacted-"), names
    assert Store.open(str(store)).summary("asha") == dict(printed_counts(out))


def test_same_name_twice_and_resuming_a_finished_search_are_refused_and_keep_the_data(finished_search, space_file):
    store, _ = finished_search
    before = Store.open(str(store)).read("trials").num_rows
    proc = subprocess.run([sys.executable, "-m", "orthotune.cli", "launch", "--space", str(space_file),
                           "--store", str(store), "--name", "asha"], capture_output=True, text=True)
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert Store.open(str(store)).read("trials").num_rows == before
    resumed = subprocess.run([sys.executable, "-m", "orthotune.cli", "launch", "--resume", "asha",
                              "--store", str(store)], capture_output=True, text=True)
    assert resumed.returncode == 2 and "finished" in resumed.stderr and "nothing to resume" in resumed.stderr
    assert len(resumed.stderr.strip().splitlines()) == 1
    assert json.loads((store / "searches" / "asha.json").read_text())["state"] == "finished"


def test_packed_search_decides_per_config_and_stores_each(tmp_path, space_file):
    store = tmp_path / "store"
    out = finish(orthotune("launch", "--space", str(space_file), "--store", str(store), "--name", "packed",
                           "--configs-per-trial", "4", "--concurrency", "2", "--report-every", "2", "--seed", "0"))
    trials = Store.open(str(store)).read("trials").to_pylist()
    counts = printed_counts(out)
    assert sum(counts.values()) == len(trials) == TOTAL
    assert Counter(t["status"] for t in trials) == counts
    packs = Counter(t["tune_trial_id"] for t in trials)
    assert max(packs.values()) > 1 and len(packs) < len(trials)  # several configs per Ray trial
    assert counts["stopped"] >= 1, out  # ASHA's per-config verdicts reach configs inside packs
    for trial in trials:
        if trial["status"] == "stopped":
            assert trial["epochs"] < SPACE["train"]["epochs"] and "ASHA" in trial["reason"]
        if trial["status"] == "failed":
            assert trial["lr"] == 1.0e30
    mates = {}
    for trial in trials:  # members of one pack differ in lr/T but share the pack key
        mates.setdefault(trial["tune_trial_id"], set()).add((trial["depth"], trial["ortho"], trial["hidden"]))
    assert all(len(keys) == 1 for keys in mates.values())


def test_grid_search_packed_trains_every_point_once(tmp_path):
    space = {**SPACE, "ortho": {"T": [2, 3], "beta": 0.5, "lam": 5.0e-4},
             "train": {"lr": 0.05, "epochs": 4, "patience": 4, "hidden": 16}}
    space_file = tmp_path / "grid.yaml"
    space_file.write_text(yaml.safe_dump(space))
    store = tmp_path / "store"
    out = finish(orthotune("launch", "--space", str(space_file), "--store", str(store), "--name", "grid",
                           "--searcher", "grid", "--scheduler", "fifo", "--configs-per-trial", "2"))
    trials = Store.open(str(store)).read("trials").to_pylist()
    assert sorted((t["ortho"], t["T"]) for t in trials) == [(False, None), (True, 2), (True, 3)], out
    assert len({t["tune_trial_id"] for t in trials}) == 2  # the two ortho points share a pack
    assert all(t["status"] == "completed" for t in trials)


def test_report_and_best_read_a_real_search(finished_search, tmp_path):
    store, _ = finished_search
    cli = [sys.executable, "-m", "orthotune.cli"]
    report = subprocess.run([*cli, "report", "--store", str(store), "--search", "asha", "--format", "md",
                             "-o", str(tmp_path / "report.md")], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report.md").read_text()
    assert "| cora | gcn |" in text and "Paired comparison" in text
    best = subprocess.run([*cli, "best", "--store", str(store), "--json"], capture_output=True, text=True)
    assert best.returncode == 0, best.stderr
    winners = json.loads(best.stdout)["configs"]
    trials = Store.open(str(store)).read("trials").to_pylist()
    for arm in (True, False):  # each arm's winner is its best validation objective, not test
        candidates = [t for t in trials if t["ortho"] is arm and t["status"] != "failed"]
        chosen = next(w for w in winners if w["ortho"] is arm)
        top = max(t["val_acc"] for t in candidates)
        assert any(t["val_acc"] == top and t["lr"] == chosen["lr"] for t in candidates)


def test_graph_classification_searches_like_node_classification(tmp_path):
    space = {"name": "proteins", "datasets": ["proteins"], "repeats": [0, 1], "backbones": ["gunet"],
             "depths": [2], "original": True, "ortho": {"T": 4, "beta": 0.4, "lam": 5.0e-4},
             "train": {"epochs": 2, "patience": 2, "hidden": 16}, "samples": 2}
    space_file = tmp_path / "proteins.yaml"
    space_file.write_text(yaml.safe_dump(space))
    store = tmp_path / "store"
    out = finish(orthotune("launch", "--space", str(space_file), "--store", str(store), "--name", "g",
                           "--searcher", "grid", "--scheduler", "fifo"))
    trials = Store.open(str(store)).read("trials").to_pylist()
    assert sorted(t["ortho"] for t in trials) == [False, True], out
    assert all(t["setting"] == "cv10" and t["repeat_split"] == [0, 1] for t in trials)  # folds
    assert all(t["status"] == "completed" and 0 <= t["test_acc"] <= 1 for t in trials)
