"""``orthotune slurm``: the batch script it writes, the inputs it refuses, and, against a real
Slurm on this machine (``slurm_cluster``: two nodes on one host), a search run by ``sbatch``,
a search that a time-limit warning and a cancel interrupt and a requeue and a resubmission
finish, and the bad input Slurm itself refuses.

The fast tests need no Slurm; the real-Slurm ones are slow and skip with one line where
Slurm's packages (or root) are absent (``$ORTHOTUNE_REQUIRE_SLURM``: fail instead, as CI)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import yaml
from resumed import stored
from slurm_cluster import require_slurm, start_slurm, stop_jobs

from orthotune.cli import main
from orthotune.cli._slurm_job import BatchJob
from orthotune.cli.slurm import node_local_reason, slurm_seconds

DATA = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
#: Eight configs of a few seconds each (two cells of four): long enough to interrupt mid-search.
SPACE = {"name": "requeue", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2],
         "original": True, "ortho": {"T": [2, 3, 4, 5], "beta": 1.0, "lam": 5.0e-4},
         "train": {"lr": [0.005, 0.01, 0.02, 0.05], "dropout": 0.0, "epochs": 200, "patience": 200, "hidden": 16},
         "samples": 4}
TOTAL = 2 * SPACE["samples"]


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("orthotune slurm: error: "), lines[0]
    return lines[0]


# -- the script and the inputs, without Slurm -------------------------------------------------

def test_the_script_asks_slurm_for_the_allocation_and_runs_start_or_resume(tmp_path, capsys):
    script = tmp_path / "jobs" / "big.sbatch"
    store = tmp_path / "shared" / "store"
    argv = ["slurm", "--space", "quick", "--name", "big", "--store", str(store), "--nodes", "4", "--cpus-per-node",
            "8", "--gpus-per-node", "2", "--gpus-per-trial", "0.5", "--time", "1-02:00:00", "--partition", "gpu",
            "--account", "lab", "--stop-before", "600", "--samples", "9", "--no-tensorboard", "--sbatch=--qos=high",
            "--script", str(script)]
    # a path under /tmp is node-local; --single-host says this machine is every node
    assert exit_code([*argv, "--single-host"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(script) and f"sbatch {script}" in err
    text = script.read_text()
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=8",
                 "#SBATCH --gpus-per-node=2", "#SBATCH --time=1-02:00:00", "#SBATCH --partition=gpu",
                 "#SBATCH --account=lab", "#SBATCH --requeue", "#SBATCH --signal=B:USR2@600",
                 "#SBATCH --open-mode=append", f"#SBATCH --output={script.parent}/big-%j.out", "#SBATCH --qos=high",
                 f"python={sys.executable}", "gpus_per_node=2"):
        assert f"\n{line}\n" in text, line
    assert "--exclusive" not in text
    launch = re.search(r"^launch=\((.*)\)$", text, re.M)[1]
    assert launch == (f"launch --start-or-resume --space quick --name big --store {store} --data-root {DATA} "
                      f"--progress plain --samples 9 --gpus-per-trial 0.5 --no-tensorboard")
    check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_without_cpus_per_node_the_job_takes_whole_nodes_and_quotes_its_words(tmp_path):
    job = BatchJob(name="a", nodes=1, launch=["launch", "--space", "my space.yaml"], python="/opt/p y/python",
                   ray="/opt/p y/ray", output="/o/a-%j.out", stop_before_s=300)
    text = job.script()
    assert "#SBATCH --exclusive\n" in text and "--gpus-per-node" not in text.split("\n\n")[0]
    assert "python='/opt/p y/python'\n" in text and "launch=(launch --space 'my space.yaml')\n" in text


@pytest.mark.parametrize(("text", "seconds"), [("90", 5400), ("10:30", 630), ("02:00:00", 7200),
                                               ("1-00", 86400), ("1-02:03", 93780), ("2-00:00:05", 172805)])
def test_slurm_time_formats(text, seconds):
    assert slurm_seconds(text) == seconds


def test_node_local_paths_are_the_temporary_and_memory_folders(monkeypatch):
    monkeypatch.delenv("TMPDIR", raising=False)
    assert "under /tmp" in node_local_reason(Path("/tmp/store"))
    assert "under /dev/shm" in node_local_reason(Path("/dev/shm/x/store"))
    here = Path(__file__).parent
    assert node_local_reason(here / "store") is None  # whether it is shared cannot be told
    monkeypatch.setenv("TMPDIR", str(here / "scratch"))  # a job's own temporary folder
    assert f"under {here / 'scratch'}" in node_local_reason(here / "scratch" / "store")


BAD = [  # (words after `slurm --space quick`, a part of the expected line)
    (["--store", "/tmp/orthotune-slurm-test/store"], "--store '/tmp/orthotune-slurm-test/store' is under /tmp"),
    (["--store", "/dev/shm/orthotune-slurm-test"], "is under /dev/shm, which each node has of its own"),
    (["--data-root", "/dev/shm"], "--data-root '/dev/shm' is under /dev/shm"),
    (["--time", "2h"], "--time '2h' must be a Slurm time limit"),
    (["--time", "10:00", "--stop-before", "300"], "--time 10:00 leaves the search 240 s before Slurm's warning"),
    (["--stop-before", "70000"], "--stop-before 70000 must be <= 65535"),
    (["--partition", "a b"], "--partition 'a b' must be one word"),
    (["--sbatch", "qos=high"], "--sbatch 'qos=high' must be one sbatch option"),
    (["--cpus-per-node", "2", "--cpus-per-trial", "4"], "--cpus-per-trial 4 is more than a node has"),
    (["--gpus-per-trial", "1"], "trials reserve GPUs (--gpus-per-trial) but the job asks for none"),
    (["--gpus-per-trial", "2", "--gpus-per-node", "1"], "--gpus-per-trial 2 is more than a node has"),
    (["--name", "a/b"], "search name 'a/b' must start with a letter or digit"),
    (["--samples", "0"], "samples=0 must be >= 1"),
    (["--datasets", "mnist"], "unknown dataset 'mnist'"),
    (["--nodes", "0"], "argument --nodes: '0' must be a whole number >= 1"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("words", "expected"), BAD, ids=[" ".join(w) for w, _ in BAD])
def test_bad_slurm_input_is_one_line_and_nothing_is_written(tmp_path, monkeypatch, capsys, words, expected):
    monkeypatch.chdir(tmp_path)
    store = ["--store", str(Path(__file__).parent / "never-written")] if "--store" not in words else []
    assert exit_code(["slurm", "--space", "quick", *store, *words, "--submit"]) == 2
    assert expected in one_error_line(capsys)
    assert not list(tmp_path.iterdir())  # no script
    assert not (Path(__file__).parent / "never-written").exists()


def test_submit_without_sbatch_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch there
    script = tmp_path / "s.sbatch"
    assert exit_code(["slurm", "--space", "quick", "--store", str(tmp_path / "store"), "--single-host", "--script",
                      str(script), "--submit"]) == 2
    assert f"--submit needs Slurm's sbatch on PATH; the script is written: {script}" in one_error_line(capsys)


def test_help_imports_no_heavy_library():
    code = ("import sys\nfrom orthotune.cli import main\ntry:\n    main(['slurm', '--help'])\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in ('torch', 'ray', 'pandas', 'optuna') if m in sys.modules), "
            "file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "--stop-before" in proc.stdout and proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


# -- against a real Slurm ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_slurm()
    yield from start_slurm(tmp_path_factory.mktemp("slurm"))


@pytest.fixture
def slurm(cluster):
    """The test Slurm; a job a test leaves (it failed) is cancelled before the next test."""
    yield cluster
    stop_jobs(cluster.env)


def orthotune(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**env, "ORTHOTUNE_DATA_ROOT": str(DATA), "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "orthotune.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def write_and_submit(slurm, tmp_path: Path, name: str, space: str, *extra: str) -> tuple[str, Path]:
    script = tmp_path / f"{name}.sbatch"
    done = orthotune(slurm.env, "slurm", "--space", space, "--name", name, "--store", str(tmp_path / "store"),
                     "--nodes", "2", "--single-host", "--script", str(script), "--submit", *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), script


def log_of(tmp_path: Path, name: str, job: str) -> str:
    return (tmp_path / f"{name}-{job}.out").read_text()


def ray_processes_of(job: str) -> list[str]:
    """Processes of the job's Ray (its temporary folder is in their command lines)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if f"/tmp/ray-{job}-" in line:
            found.append(line[:200])
    return found


def assert_every_config_once(trials: list[dict], total: int) -> None:
    ids = [t["trial_id"] for t in trials]
    assert len(ids) == len(set(ids)) == total, Counter(ids)
    keys = ("backbone", "depth", "ortho", "T", "beta", "lam", "lr", "weight_decay")
    assert len({tuple(t[key] for key in keys) for t in trials}) == total  # no config trained twice
    assert all(t["status"] != "failed" for t in trials), [t["reason"] for t in trials]


def record(store: Path, name: str) -> dict:
    return json.loads((store / "searches" / f"{name}.json").read_text())


@pytest.mark.slow
def test_the_quick_search_runs_as_a_batch_job_on_two_nodes_and_best_reads_it(slurm, tmp_path):
    job, _ = write_and_submit(slurm, tmp_path, "quick-slurm", "quick")
    assert slurm.wait_until_ended(job, 900) == "COMPLETED", log_of(tmp_path, "quick-slurm", job)
    assert slurm.job_field(job, "ExitCode") == "0:0"
    log = log_of(tmp_path, "quick-slurm", job)
    assert "orthotune slurm: all 2 Ray nodes joined" in log and "search quick-slurm: 30 trials" in log, log
    store = tmp_path / "store"
    assert_every_config_once(stored(store, "quick-slurm"), 30)
    assert record(store, "quick-slurm")["state"] == "finished"
    best = orthotune(slurm.env, "best", "--store", str(store), "--search", "quick-slurm", "--json")
    assert best.returncode == 0, best.stderr
    # one winner per cell: depths 2 and 4, each original and Ortho, and the graph-free reference
    assert len(json.loads(best.stdout)["configs"]) == 5
    assert not ray_processes_of(job)


@pytest.mark.slow
def test_a_time_limit_warning_and_a_cancel_interrupt_the_search_and_requeue_and_resubmission_finish_it(
        slurm, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    store, name = tmp_path / "store", "requeued"
    job, script = write_and_submit(slurm, tmp_path, name, str(space), "--scheduler", "fifo")
    # 1. Slurm's time-limit warning (--signal=B:USR2@SECONDS sends it to the batch shell, as this does)
    wait_for_trials(slurm, job, store, name, 2, tmp_path)
    slurm.run("scancel", "--batch", "--signal=USR2", job)
    slurm.wait_for_state(job, {"PENDING"}, 180)  # the job requeued itself
    assert slurm.job_field(job, "Restarts") == "1"
    assert record(store, name)["state"] == "interrupted"
    first = {t["trial_id"]: t["finished_at"] for t in stored(store, name)}
    assert 2 <= len(first) < TOTAL
    # Slurm starts the requeued job once its revoked credential expired (CRED_EXPIRE_S)
    # 2. a cancel (preemption signals the same way): SIGTERM to every process of the job
    wait_for_trials(slurm, job, store, name, len(first) + 1, tmp_path)
    slurm.run("scancel", job)
    assert slurm.wait_until_ended(job, 180) == "CANCELLED"
    second = {t["trial_id"]: t["finished_at"] for t in stored(store, name)}
    # Ray goes down on every node with the driver, which cannot record the interruption (Ray
    # ends a driver whose cluster is gone): the record says running and its lease is dead
    cancelled = record(store, name)["state"]
    assert len(second) < TOTAL and cancelled in ("running", "interrupted")
    # the driver's pid may outlive Slurm's CANCELLED by a moment (exiting, or not yet reaped):
    # its lease reads dead once the pid is gone
    deadline = time.monotonic() + 60
    while True:
        status = orthotune(slurm.env, "status", "--store", str(store))
        if re.search(rf"^{name}\s+(dead|interrupted)", status.stdout, re.M) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert re.search(rf"^{name}\s+(dead|interrupted)", status.stdout, re.M), status.stdout
    assert not ray_processes_of(job)
    # 3. the same script, submitted again: continues the search and finishes it
    again = slurm.run("sbatch", "--parsable", str(script)).stdout.strip().split(";")[0]
    assert slurm.wait_until_ended(again, 900) == "COMPLETED", log_of(tmp_path, name, again)
    trials = stored(store, name)
    assert_every_config_once(trials, TOTAL)
    assert all(t["finished_at"] == second[t["trial_id"]] for t in trials if t["trial_id"] in second)  # kept
    status = orthotune(slurm.env, "status", "--store", str(store))
    assert re.search(rf"^{name}\s+finished", status.stdout, re.M), status.stdout
    log = log_of(tmp_path, name, job)
    assert "the job's time limit is near" in log and f"requeueing job {job}" in log, log
    assert log.count(f"search '{name}' interrupted by SIGTERM") >= 1, log
    print(f"requeue test: {len(first)} trials after the time-limit warning, {len(second)} after the cancel "
          f"(the record then said {cancelled}), "
          f"{len(trials)} of {TOTAL} at the end: {TOTAL - len(trials)} lost, "
          f"{len(trials) - len({t['trial_id'] for t in trials})} duplicated")
    # 4. once more: the finished search is read, not run again
    third = slurm.run("sbatch", "--parsable", str(script)).stdout.strip().split(";")[0]
    assert slurm.wait_until_ended(third, 600) == "COMPLETED"
    assert f"search {name}: {TOTAL} trials ({TOTAL} completed)" in log_of(tmp_path, name, third)
    assert {t["trial_id"]: t["finished_at"] for t in stored(store, name)} == \
        {t["trial_id"]: t["finished_at"] for t in trials}


def wait_for_trials(slurm, job: str, store: Path, name: str, count: int, logs: Path,
                    deadline_s: float = 600) -> None:
    start = time.monotonic()
    while len(stored(store, name)) < count:
        state = slurm.job_state(job)
        assert state in ("PENDING", "RUNNING", "CONFIGURING"), \
            f"job {job} is {state} (exit code {slurm.job_field(job, 'ExitCode')}); its log:\n{log_of(logs, name, job)}"
        assert time.monotonic() - start < deadline_s, f"fewer than {count} trials stored in {deadline_s} s"
        time.sleep(1.0)


@pytest.mark.slow
@pytest.mark.parametrize(("words", "expected"), [
    (["--partition", "nowhere"], "sbatch refused the job: invalid partition specified: nowhere"),
    (["--nodes", "3"], "sbatch refused the job: allocation failure: Requested node configuration is not available"),
])
def test_what_slurm_refuses_is_relayed_in_one_line(slurm, tmp_path, words, expected):
    done = orthotune(slurm.env, "slurm", "--space", "quick", "--store", str(tmp_path / "store"), "--single-host",
                     "--script", str(tmp_path / "s.sbatch"), "--submit", *words)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and expected in lines[0], done.stderr
    assert not slurm.jobs() and not (tmp_path / "store").exists()
