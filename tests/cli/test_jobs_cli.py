"""Remote searches through Ray's Jobs API, on a real Ray head started on the loopback address.

The head is ``ray start --head --block`` in its own process group, stopped by its process id
(never ``ray stop``, which would stop every Ray on the machine). It runs with this test's
Python first on PATH, as a head node runs from the environment that has orthotune's
dependencies; the package itself travels with the job (see cli/jobs.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

SPACE = """\
name: jobtest
datasets: [cora]
setting: full
repeats: [0]
backbones: [gcn]
depths: [2]
original: false
ortho:
  T: [2, 3]
  beta: [0.4]
  lam: [5.0e-4]
train:
  epochs: 5
  patience: 5
samples: 2
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orthotune.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def ray_head(tmp_path_factory):
    """The dashboard address of a fresh single-node Ray cluster on 127.0.0.1."""
    from orthotune.cli.jobs import connect

    temp = Path(f"/tmp/ot-ray-{os.getpid()}")  # short: Ray's socket paths must fit 107 bytes
    # every port of its own: another Ray on the machine (a search running beside the test)
    # holds Ray's default dashboard-agent port, and the job agent would never come up
    gcs, dashboard, agent = free_port(), free_port(), free_port()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    log = open(tmp_path_factory.mktemp("ray") / "ray-start.log", "w")
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
         "--port", str(gcs), "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard),
         "--dashboard-agent-listen-port", str(agent), "--include-dashboard", "true", "--num-cpus", "2",
         "--temp-dir", str(temp), "--disable-usage-stats"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    address = f"http://127.0.0.1:{dashboard}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                connect(address).list_jobs()
                break
            except Exception:
                if head.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"the Ray head did not start: {Path(log.name).read_text()[-2000:]}")
                time.sleep(2)
        yield address
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` drains, then stops what it started
        try:
            head.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_submitted_search_runs_on_the_head_after_the_client_left(ray_head, tmp_path):
    from orthotune.store import Store

    space = tmp_path / "jobtest.yaml"
    space.write_text(SPACE)
    store = tmp_path / "store"
    env = {**os.environ, "RAY_ADDRESS": ""}

    started = time.monotonic()
    submitted = cli("launch", "--submit", "--address", ray_head, "--space", str(space), "--store", str(store),
                    "--name", "remote", "--searcher", "grid", "--scheduler", "fifo", "--concurrency", "1", env=env)
    client_seconds = time.monotonic() - started
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    assert job and "\n" not in job, submitted.stdout
    print(f"launch --submit returned job {job} in {client_seconds:.1f} s; stderr: {submitted.stderr.strip()}")

    # the client has exited while the job still runs: it goes on without it
    early = cli("status", job, "--address", ray_head, env=env)
    print(early.stdout)
    assert early.returncode == 0 and ("PENDING" in early.stdout or "RUNNING" in early.stdout), early.stdout
    followed = cli("logs", job, "--address", ray_head, env=env, timeout=600)
    print(followed.stdout[-3000:])
    assert followed.returncode == 0, followed.stdout[-3000:] + followed.stderr
    assert "search remote: 2 trials (2 completed)" in followed.stdout

    state = cli("status", job, "--address", ray_head, env=env)
    print(state.stdout)
    assert state.returncode == 0 and "SUCCEEDED" in state.stdout and "remote" in state.stdout, state.stdout

    listed = cli("status", "--address", ray_head, env=env)
    assert listed.returncode == 0 and job in listed.stdout, listed.stdout
    again = cli("logs", job, "--no-follow", "--address", ray_head, env=env)
    assert again.returncode == 0 and "search remote: 2 trials" in again.stdout, again.stderr

    opened = Store.open(str(store))
    trials = opened.read("trials", search="remote").to_pylist()
    assert sorted(t["T"] for t in trials) == [2, 3]
    assert {t["status"] for t in trials} == {"completed"}
    assert opened.search_meta("remote")["state"] != "running"


def test_submit_refuses_a_relative_store(monkeypatch, capsys):
    from orthotune.cli import main

    assert main(["launch", "--submit", "--address", "http://127.0.0.1:1", "--space", "quick",
                 "--store", "runs/store"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--store 'runs/store' is relative" in err[0], err


@pytest.mark.parametrize("command", [["status", "some-job"], ["logs", "some-job"]])
def test_job_commands_need_the_dashboard_address(monkeypatch, capsys, command):
    from orthotune.cli import main

    for key in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):
        monkeypatch.delenv(key, raising=False)
    assert main(command) == 2
    assert "pass --address http://HEAD:8265" in capsys.readouterr().err
    assert main([*command, "--address", "ray://127.0.0.1:10001"]) == 2
    assert "must be the Ray dashboard's HTTP address" in capsys.readouterr().err


def test_unreachable_cluster_is_one_line(capsys):
    from orthotune.cli import main

    assert main(["status", "--address", f"http://127.0.0.1:{free_port()}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach the Ray Jobs API" in err[0], err
