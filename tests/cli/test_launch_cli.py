"""Bad launch/status input: one line, non-zero exit, nothing written."""

import pytest

from orthotune.cli import main


@pytest.mark.parametrize(
    "args, message",
    [
        (["--space", "quick", "--searcher", "bayes"], "unknown search algorithm 'bayes'; valid: optuna, random, grid"),
        (["--space", "quick", "--scheduler", "pbt"], "unknown scheduler 'pbt'; valid: asha, fifo"),
        (["--space", "quick", "--datasets", "mnist"], "unknown dataset 'mnist' in datasets"),
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
def test_bad_launch_input_is_one_line(tmp_path, capsys, args, message):
    store = tmp_path / "store"
    short = tmp_path / "short.yaml"  # trains fewer epochs than ASHA's grace period
    short.write_text("datasets: [cora]\nbackbones: [gcn]\ndepths: [2]\ntrain: {epochs: 5}\n")
    args = [str(short) if a == "SHORT" else a for a in args]
    assert main(["launch", "--store", str(store), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not store.exists()


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
