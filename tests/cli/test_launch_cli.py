"""Bad launch/status input: one line, non-zero exit, nothing written."""

import json
import subprocess
import sys

import pytest

from orthotune.cli import main


@pytest.mark.parametrize(
    "args, message",
    [
        (["--space", "quick", "--searcher", "bayes"], "unknown search algorithm 'bayes'; valid: optuna, random, grid"),
        (["--space", "quick", "--scheduler", "pbt"], "unknown scheduler 'pbt'; valid: asha, fifo"),
        (["--space", "quick", "--datasets", "mnist"], "unknown dataset 'mnist' in datasets"),
        (["--space", "paper-sota", "--arms", "GCN", "GIN"],
         "unknown arm 'GIN'; valid: GCN, GAT, APPNP, SGC, DAGNN, JKNet, JKNet+DropEdge, IncepGCN+DropEdge, GCNII, "
         "Ortho-GCNII"),
        (["--space", "paper-sota", "--arms", "GCN", "GAT"], "--arms GCN GAT: space: compare.against 'Ortho-GCNII' "
                                                          "is no arm; arms: GCN, GAT"),
        (["--space", "quick", "--arms", "original"], "--arms needs a space with named arms"),
        (["--space", "paper-sota", "--skip-arms", "Ortho-GCNII"], "--skip-arms Ortho-GCNII: space: compare.against "
                                                                "'Ortho-GCNII' is no arm"),
        (["--space", "paper-sota", "--skip-arms", "Incep"], "unknown arm 'Incep'; valid: GCN, GAT"),
        (["--space", "quick", "--samples", "0"], "samples=0 must be >= 1"),
        (["--space", "quick", "--gpus-per-trial", "1.5"], "gpus_per_trial=1.5 must be a fraction <= 1"),
        (["--space", "quick", "--name", "a/b"], "search name 'a/b' must start with a letter or digit"),
        (["--space", "quick", "--configs-per-trial", "0"], "configs_per_trial=0 must be an integer >= 1"),
        (["--space", "nonexistent.yaml"], "space file 'nonexistent.yaml' does not exist"),
        (["--resume", "nothing"], "no orthotune store"),
        (["--space", "quick", "--data-root", "no-such-data-root"], "data root 'no-such-data-root' is not a directory"),
        (["--space", "SHORT"], "asha.grace_period=10 must be <= the fewest epochs a cell trains (5)"),
    ],
)
@pytest.mark.slow
def test_bad_launch_input_is_one_line(tmp_path, capsys, args, message):
    store = tmp_path / "store"
    short = tmp_path / "short.yaml"  # trains fewer epochs than ASHA's grace period
    short.write_text("datasets: [cora]\nbackbones: [gcn]\ndepths: [2]\ntrain: {epochs: 5}\n")
    args = [str(short) if a == "SHORT" else a for a in args]
    assert main(["launch", "--store", str(store), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not store.exists()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["launch", "plan", "slurm"])
def test_arms_given_reach_the_search_and_a_slurm_job_s_driver(tmp_path, command):
    import argparse

    from orthotune.cli import build_parser
    from orthotune.cli.launch import search_options

    words = [command, "--space", "paper-sota", "--datasets", "texas", "--arms", "Ortho-GCNII", "GCN"]
    args = build_parser(command).parse_args(words + (["--store", str(tmp_path / "s")] if command != "plan" else []))
    options = search_options(argparse.Namespace(**{"store": str(tmp_path / "s"), "name": None, **vars(args)}))
    assert [arm.name for arm in options.space.arms] == ["GCN", "Ortho-GCNII"]
    assert [c.key for c in options.space.cells()] == ["texas/gcn/2/GCN", "texas/gcnii/32/Ortho-GCNII",
                                                     "texas/mlp/2/reference"]
    if command == "slurm":
        from orthotune.cli.slurm import driver_arguments

        driver = driver_arguments(args, options, str(tmp_path / "s"), str(tmp_path))
        assert driver[driver.index("--arms"):driver.index("--arms") + 3] == ["--arms", "Ortho-GCNII", "GCN"]
    skipped = [command, "--space", "paper-sota-semi", "--skip-arms", "IncepGCN+DropEdge", "SGC"]
    args = build_parser(command).parse_args(skipped + (["--store", str(tmp_path / "s")] if command != "plan" else []))
    options = search_options(argparse.Namespace(**{"store": str(tmp_path / "s"), "name": None, **vars(args)}))
    assert [arm.name for arm in options.space.arms] == ["GCN", "GAT", "APPNP", "DAGNN", "JKNet", "JKNet+DropEdge",
                                                        "GCNII", "Ortho-GCNII"]
    if command == "slurm":
        driver = driver_arguments(args, options, str(tmp_path / "s"), str(tmp_path))
        assert driver[driver.index("--skip-arms"):][:3] == ["--skip-arms", "IncepGCN+DropEdge", "SGC"]


def test_launch_names_each_cell_its_plan_finds_too_large_before_the_first_trial(monkeypatch, capsys):
    """The plan's one line says how many cells do not fit; the lines after it say which, and why,
    then which cells' trials will ask Ray for their memory and so run alone."""
    from types import SimpleNamespace

    import orthotune.plan
    import orthotune.search
    from orthotune.cli.launch import _plan_total

    misfit = ("cora/incepgcn/64/IncepGCN+DropEdge: not measured: one repeat needs about 25.6 GiB (estimated), more "
              "than the 22.4 GiB available here")
    alone = ("cora/incepgcn/32/IncepGCN+DropEdge: one trial needs about 12.0 GiB (estimated), so it asks Ray for its "
             "memory and no two run on a node at once")
    planned = SimpleNamespace(total_line=lambda: "plan: 654 trials ...; 1 cell(s) do not fit",
                              does_not_fit=lambda: [misfit], runs_alone=lambda: [alone], wall_s=lambda: None,
                              start_s=0.0)
    monkeypatch.setattr(orthotune.search, "check_inputs", lambda options: None)
    monkeypatch.setattr(orthotune.search, "check_store", lambda options: None)
    monkeypatch.setattr(orthotune.plan, "plan_search", lambda options, note: planned)
    assert _plan_total(None) is None
    assert capsys.readouterr().out.splitlines() == ["plan: 654 trials ...; 1 cell(s) do not fit",
                                                    f"plan: does not fit: {misfit}", f"plan: runs alone: {alone}"]


#: Run in a fresh interpreter: each case's exit code and the heavy libraries loaded after it.
VALIDATION_IMPORTS = r"""
import json, sys
from orthotune.cli import main

heavy = ("torch", "torch_geometric", "ray", "pyarrow")  # pyarrow: the store loads after validation
seen = []
for words in json.loads(sys.argv[1]):
    code = main(["launch", *words])
    seen.append([code, sorted(m for m in heavy if m in sys.modules)])
print(json.dumps(seen))
"""


@pytest.mark.slow
def test_launch_refuses_a_bad_space_or_option_before_torch_pyg_ray_or_pyarrow_load(tmp_path):
    """The space file and the options are validated before the heavy libraries load, so a bad
    one is refused at once (``launch`` and ``--start-or-resume``). (The data root's check is
    training's and comes after them.)"""
    (tmp_path / "malformed.yaml").write_text("datasets: [cora\n")
    (tmp_path / "unknown-key.yaml").write_text("datasets: [cora]\nbackbones: [gcn]\ndepths: [2]\nbudget: 3\n")
    (tmp_path / "good.yaml").write_text("datasets: [cora]\nbackbones: [gcn]\ndepths: [2]\n")
    store = ["--store", str(tmp_path / "store")]
    bad = [[str(tmp_path / "malformed.yaml")], [str(tmp_path / "unknown-key.yaml")],
           ["quick", "--datasets", "mnist"], [str(tmp_path / "good.yaml"), "--samples", "0"],
           [str(tmp_path / "good.yaml"), "--searcher", "bayes"]]
    cases = [["--space", *words, *store] for words in bad]
    cases.append(["--space", *bad[3], *store, "--name", "n", "--start-or-resume"])
    out = subprocess.run([sys.executable, "-c", VALIDATION_IMPORTS, json.dumps(cases)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout)
    assert seen == [[2, []]] * len(cases), list(zip(cases, seen))
    assert not (tmp_path / "store").exists()


def test_status_of_a_folder_that_is_not_a_store(tmp_path, capsys):
    (tmp_path / "data.csv").write_text("a,b\n")
    assert main(["status", "--store", str(tmp_path)]) == 2
    assert "is not an orthotune store" in capsys.readouterr().err
    assert (tmp_path / "data.csv").read_text() == "a,b\n"


def test_resume_of_an_unknown_search_lists_the_known_ones(tmp_path, capsys):
    from orthotune.store import Store

    Store.open(str(tmp_path / "s"), create=True).save_search_meta("known", {"options": {}})
    assert main(["launch", "--resume", "other", "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "no search 'other'" in err and "searches: known" in err
