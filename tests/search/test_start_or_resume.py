"""``launch --start-or-resume``: the one idempotent entry a requeued or resubmitted batch job
runs. It starts a search the store does not hold, continues one that was interrupted, reads a
finished one without starting Ray, and refuses one recorded with other options."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from resumed import stored

from orthotune.cli import build_parser, main
from orthotune.cli.launch import search_options
from orthotune.store import Store

DATA = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
SPACE = {"name": "again", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2],
         "original": True, "ortho": {"T": [2, 6], "beta": 1.0, "lam": 5.0e-4},
         "train": {"lr": [0.1, 0.03, 0.01], "dropout": 0.0, "epochs": 150, "patience": 150, "hidden": 16},
         "samples": 3}
TOTAL = 2 * SPACE["samples"]


def words(store: Path, *extra: str) -> list[str]:
    return ["launch", "--start-or-resume", "--space", "quick", "--name", "q", "--store", str(store), *extra]


def recorded(store: Path, state: str, *extra: str) -> None:
    """A record of search ``q`` as launch writes it, in ``state``, with no trials."""
    options = search_options(build_parser("launch").parse_args(words(store, *extra)))
    Store.open(str(store), create=True).save_search_meta("q", {"options": options.to_meta(), "state": state})


@pytest.fixture
def no_ray(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: pytest.fail("Ray started"))


def test_a_finished_search_is_read_not_run(tmp_path, capsys, no_ray):
    recorded(tmp_path / "s", "finished")
    assert main(words(tmp_path / "s")) == 1  # its outcome: no trial succeeded (it holds none)
    assert capsys.readouterr().out.startswith("search q: 0 trials")


def test_other_options_are_refused_in_one_line(tmp_path, capsys, no_ray):
    recorded(tmp_path / "s", "interrupted", "--samples", "6")
    assert main(words(tmp_path / "s", "--samples", "7", "--seed", "3")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "search 'q' in store" in err[0], err
    assert "(samples: stored 6, given 7, seed: stored 0, given 3)" in err[0], err


def test_another_space_is_refused(tmp_path, capsys, no_ray):
    recorded(tmp_path / "s", "interrupted")
    argv = words(tmp_path / "s", "--datasets", "citeseer")
    assert main(argv) == 2
    assert "was started with other options (space (its contents))" in capsys.readouterr().err


def test_bad_input_creates_no_store(tmp_path, capsys, no_ray):
    argv = words(tmp_path / "s", "--data-root", str(tmp_path / "absent"))
    assert main(argv) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_it_needs_a_space_and_a_name(tmp_path, capsys):
    assert main(["launch", "--start-or-resume", "--space", "quick", "--store", str(tmp_path / "s")]) == 2
    assert "--start-or-resume needs --space and --name" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def start_or_resume(space: Path, store: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ORTHOTUNE_DATA_ROOT": str(DATA)}
    return subprocess.Popen([sys.executable, "-m", "orthotune.cli", "launch", "--start-or-resume", "--space",
                             str(space), "--name", "again", "--store", str(store), "--scheduler", "fifo",
                             "--concurrency", "2", "--progress", "plain"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


@pytest.mark.slow  # real searches on a local Ray
def test_the_same_command_starts_continues_and_then_reads_the_search(tmp_path):
    space, store = tmp_path / "space.yaml", tmp_path / "store"
    space.write_text(yaml.safe_dump(SPACE))
    first = start_or_resume(space, store)
    start = time.monotonic()
    while len(stored(store, "again")) < 1:
        assert first.poll() is None, first.communicate()
        assert time.monotonic() - start < 300, "no trial stored in time"
        time.sleep(0.3)
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 143, err
    kept = {t["trial_id"]: t["finished_at"] for t in stored(store, "again")}
    assert 1 <= len(kept) < TOTAL
    second = start_or_resume(space, store)
    out, err = second.communicate(timeout=600)
    assert second.returncode == 0, err
    trials = stored(store, "again")
    ids = [t["trial_id"] for t in trials]
    assert len(ids) == len(set(ids)) == TOTAL, Counter(ids)
    assert len({(t["ortho"], t["T"], t["lr"]) for t in trials}) == TOTAL
    assert all(t["finished_at"] == kept[t["trial_id"]] for t in trials if t["trial_id"] in kept)
    assert json.loads((store / "searches" / "again.json").read_text())["state"] == "finished"
    third = start_or_resume(space, store)
    out, err = third.communicate(timeout=300)
    assert third.returncode == 0 and out.startswith(f"search again: {TOTAL} trials ({TOTAL} completed)"), err
    assert {t["trial_id"]: t["finished_at"] for t in stored(store, "again")} == \
        {t["trial_id"]: t["finished_at"] for t in trials}


def test_a_record_written_before_an_option_existed_is_continued_at_its_default():
    """A search started by an earlier version holds no ``budget`` (nor its looks) in its record:
    continuing it with the default budget is the same search; another value is refused."""
    from orthotune.core import OrthotuneError
    from orthotune.search import LaunchOptions
    from orthotune.search._start_or_resume import _refuse_other_options
    from orthotune.spaces import resolve_space

    options = LaunchOptions(store="s", name="old", space=resolve_space("quick"))
    stored = json.loads(json.dumps(options.to_meta()))
    for added in ("budget", "first_look", "look_step", "stopping_rule"):
        stored.pop(added, None)
    _refuse_other_options(stored, options)  # no error: the record's missing options are at their defaults
    stored["seed"] = 7
    with pytest.raises(OrthotuneError, match="seed: stored 7"):
        _refuse_other_options(stored, options)


def test_a_search_another_driver_finished_while_this_one_waited_is_read_not_resumed(tmp_path, capsys, no_ray,
                                                                                    monkeypatch):
    """Issue 51's nemesis: a driver paused before it took the lease found the search finished
    by its successor when it continued, and said ``nothing to resume`` (exit 2)."""
    from orthotune.search import _launch, _start_or_resume

    recorded(tmp_path / "s", "interrupted")

    def finished_meanwhile(store, name):
        Store.open(str(tmp_path / "s")).save_search_meta("q", {**store.search_meta("q"), "state": "finished"})

    monkeypatch.setattr(_start_or_resume, "_wait_for_lease", finished_meanwhile)
    assert main(words(tmp_path / "s")) == 1  # its outcome: no trial succeeded (it holds none)
    out, err = capsys.readouterr()
    assert out.startswith("search q: 0 trials") and "nothing to resume" not in err, (out, err)

    recorded(tmp_path / "s", "interrupted")  # and finished just before this driver took the lease
    taking = _launch.Lease.acquire

    def acquire(store, name, *args, **kwargs):
        finished_meanwhile(store, name)
        return taking(store, name, *args, **kwargs)

    monkeypatch.setattr(_start_or_resume, "_wait_for_lease", lambda store, name: None)
    monkeypatch.setattr(_launch.Lease, "acquire", acquire)
    assert main(words(tmp_path / "s")) == 1
    out, err = capsys.readouterr()
    assert out.startswith("search q: 0 trials") and "nothing to resume" not in err, (out, err)
    assert Store.open(str(tmp_path / "s")).search_meta("q")["state"] == "finished"  # not rewritten
    assert not (tmp_path / "s" / "leases" / "q.json").exists()


@pytest.mark.slow
def test_a_finished_search_whose_driver_died_before_its_end_is_tidied(tmp_path, capsys, no_ray, monkeypatch):
    """Issue 51's nemesis (seeds 16, 23, 37, 46 and 47 of its long run): a driver SIGKILLed
    after it recorded the search finished left its lease held, its trial files uncompacted and
    Ray Tune's scratch folder behind (or, killed after it gave the lease back, the folder
    alone); the next ``--start-or-resume`` gave the outcome and left them."""
    import socket
    import tempfile

    from orthotune.core import ConfigResult, RunResult, TrainConfig
    from orthotune.store import Lease, trial_row

    recorded(tmp_path / "s", "finished")
    store = Store.open(str(tmp_path / "s"))
    config = TrainConfig(dataset="cora", depth=2, ortho=False, splits=(0,))
    result = ConfigResult(config, [RunResult(split, seed, val_acc=0.5, test_acc=0.5) for split, seed in config.runs()])
    store.write_trial(trial_row("q", "t1", result, "completed"), [])
    dead = subprocess.Popen(["true"])
    dead.wait()
    Lease.acquire(store, "q")  # never released: its driver died holding it
    lease = tmp_path / "s" / "leases" / "q.json"
    lease.write_text(json.dumps({**json.loads(lease.read_text()), "pid": dead.pid}))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    scratch = tmp_path / f"orthotune-tune-{dead.pid}-{socket.gethostname()}-x"
    scratch.mkdir()
    assert main(words(tmp_path / "s")) == 0
    assert capsys.readouterr().out.startswith("search q: 1 trials (1 completed)")
    assert not lease.exists() and not scratch.exists()
    names = [p.name for p in (tmp_path / "s" / "trials" / "search=q").iterdir()]
    assert len(names) == 1 and names[0].startswith("compacted-"), names
    scratch.mkdir()  # killed after it gave the lease back, before its exit deleted the folder
    assert main(words(tmp_path / "s")) == 0 and not scratch.exists()
