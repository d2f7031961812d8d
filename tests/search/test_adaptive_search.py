"""An adaptive budget end to end (issue 47): a real search on a real local Ray, through the
``orthotune`` command; its pairs stop in lockstep at a look, its stops are the replay's of
its stored rows, ``--resume`` of the finished search recomputes them, and bad input gets
one line and exit 2 before any work."""

import json
import re
import subprocess
import sys

import pytest
import yaml

from orthotune.reports import Filters, adaptive_replay, build_report, write_report
from orthotune.search import LaunchOptions
from orthotune.search._replay import stored_trials
from orthotune.search._strategy import adaptive_budget
from orthotune.store import Store

SPACE = {
    "name": "adaptive", "datasets": ["texas"], "setting": "full", "repeats": [0, 1, 2], "backbones": ["gcn"],
    "depths": [2], "original": True, "ortho": {"T": {"low": 1, "high": 6}, "beta": 1.0, "lam": 5.0e-4},
    "train": {"lr": {"low": 0.001, "high": 0.05, "log": True}, "dropout": 0.0, "epochs": 8, "patience": 8,
              "hidden": 16},
    "samples": 30,
}


def orthotune(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orthotune.cli", *args], text=True, capture_output=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def space_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("space") / "adaptive.yaml"
    path.write_text(yaml.safe_dump(SPACE))
    return path


@pytest.mark.slow
def test_an_adaptive_search_stops_its_pair_in_lockstep_where_its_stored_rows_say(space_file, tmp_path):
    store = str(tmp_path / "store")
    run = orthotune("launch", "--space", str(space_file), "--store", store, "--name", "a", "--budget", "adaptive",
                    "--scheduler", "fifo", "--progress", "plain", "--no-tensorboard")
    assert run.returncode == 0, run.stdout + run.stderr
    rows = Store.open(store).read("trials", search="a").to_pandas()
    per_arm = rows.groupby("ortho").size().to_dict()
    assert per_arm[False] == per_arm[True] and per_arm[False] in (20, 25, 30)  # lockstep, at a look
    replay = adaptive_replay(store, Filters(searches=("a",)), maximum=30)
    (stop,) = replay.table["stop"].tolist()
    assert stop == per_arm[False]  # the live stop is the replay's of the stored rows
    shown = re.findall(r"stopped texas/gcn/2: (\d+) of 30 trials per arm; (.+)", run.stdout)
    assert shown and int(shown[0][0]) == stop
    # the verdict says the budget and why it stopped; best --json carries the stop and the rule
    assert f"{stop} of 30 trials per arm; stopped: {shown[0][1]}" in run.stdout
    assert f"adaptive budget: its 1 pair(s) trained {2 * stop} of 60 trials ({100 * stop / 30:.0f}%)" in run.stdout
    best = orthotune("best", "--search", "a", "--store", store, "--json")
    (pair,) = json.loads(best.stdout)["pairs"]
    assert (pair["budget"], pair["stop"], pair["maximum"], pair["rule"]) == ("adaptive", stop, 30, "flat")
    # the report's tuning-curve figure marks the stop
    (figure,) = [f for f in build_report(store).figures if f.name.startswith("curve-")]
    assert f"stopped the pair (k = {stop})" in figure.caption
    assert f"| {stop} of 30 |" in write_report(build_report(store, plots=False), "md")  # trials per arm
    # the record keeps the budget, and what --resume rebuilds from the stored rows stops there too
    options = LaunchOptions.from_meta(Store.open(store).search_meta("a")["options"])
    assert (options.budget, options.stopping_rule, options.looks().at()) == ("adaptive", "flat", (20, 25, 30))
    cells = [cell.key for cell in options.space.cells()]
    budget = adaptive_budget(options, cells, stored_trials(Store.open(store), "a"))
    assert {pair: s.k for pair, s in budget.stops().items()} == {"texas/gcn/2": stop}


@pytest.mark.parametrize("args, line", [
    (["--budget", "adaptive", "--first-look", "40"], "first look 40: beyond the maximum of 30 trials per arm"),
    (["--budget", "adaptive", "--samples", "1"], "the space gives 1 trial(s) per cell and arm"),
    (["--budget", "adaptive", "--stopping-rule", "race"],
     "unknown stopping rule 'race'; valid: flat, flat-or-same, never"),
    (["--budget", "adaptive", "--searcher", "grid"], "budget adaptive: the grid searcher trains a fixed set"),
])
@pytest.mark.slow
def test_bad_adaptive_input_gets_one_line_and_exit_2(space_file, tmp_path, args, line):
    run = orthotune("launch", "--space", str(space_file), "--store", str(tmp_path / "store"), "--name", "b", *args,
                    timeout=120)
    assert run.returncode == 2 and line in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not (tmp_path / "store").exists()  # refused before any work
