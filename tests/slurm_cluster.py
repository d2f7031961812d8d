"""A real Slurm on this machine for the tests: Debian's ``munged``, ``slurmctld`` and two
``slurmd`` (nodes ``n1`` and ``n2``, one CPU each, both on this host), configured under a
temporary folder with ports of their own, and stopped by pid at the end.

Debian's Slurm (22.05) runs two ``slurmd`` on one host when each is started with its node's
name (``slurmd -N n1``) and the nodes have ports of their own; its munge daemon runs on a
socket of its own (``AuthInfo=socket=...``). Slurm's clients (sbatch, squeue, scontrol) find
this cluster through ``$SLURM_CONF``.

Without the packages, or without root (slurmd starts jobs as their users), the tests skip
with one line; where ``$ORTHOTUNE_REQUIRE_SLURM`` is set (CI) they fail instead.
"""

from __future__ import annotations

import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from required import skip_or_fail

REQUIRE_ENV = "ORTHOTUNE_REQUIRE_SLURM"
COMMANDS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "scancel")
NODES = ("n1", "n2")
#: Seconds Slurm gives a job's processes between SIGTERM and SIGKILL (Slurm's default).
KILL_WAIT_S = 30
#: Lifetime of a job credential (Slurm's default 120 s). A requeued job waits this long before
#: it starts again: a slurmd refuses a job id whose credential it revoked and that has not yet
#: expired ("Job credential revoked"; the job then fails), so moving the requeued job's start
#: earlier (``scontrol update StartTime=now``) fails it whenever the requeue was quick.
CRED_EXPIRE_S = 20
#: Job ids of one test cluster start at a random number in this range: the batch script's Ray
#: folder (/tmp/ray-JOBID-RESTARTS) never meets one an earlier session left (a cancelled job
#: is killed before it removes its own).
FIRST_JOB_IDS = (100_000, 60_000_000)
JOBS_PER_CLUSTER = 10_000


def slurm_missing() -> str | None:
    """Why no Slurm can be started here, or None."""
    absent = [name for name in COMMANDS if shutil.which(name) is None]
    if absent:
        return (f"Slurm is not installed ({', '.join(absent)} not on PATH; Debian: apt-get install slurmctld slurmd "
                f"slurm-client munge)")
    if os.geteuid() != 0:
        return "a test Slurm needs root (slurmd starts jobs as their users)"
    return None


def require_slurm() -> None:
    skip_or_fail(slurm_missing(), REQUIRE_ENV)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def config(folder: Path, host: str, first_job_id: int) -> str:
    """slurm.conf of a two-node cluster on this host; every path under ``folder``."""
    nodes = "\n".join(f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={free_port()} CPUs=1 "
                      f"RealMemory=2000 State=UNKNOWN" for node in NODES)
    return f"""\
ClusterName=orthotune-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge/socket,cred_expire={CRED_EXPIRE_S}
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool/%n
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd-%n.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd-%n.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
ReturnToService=2
KillWait={KILL_WAIT_S}
JobRequeue=1
FirstJobId={first_job_id}
MaxJobId={first_job_id + JOBS_PER_CLUSTER}
MailProg=/bin/true
{nodes}
PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class Slurm:
    """A running test cluster: its folder and the environment its clients need."""

    folder: Path
    env: dict[str, str]

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(command, env=self.env, capture_output=True, text=True, check=check, timeout=60)

    def job_state(self, job: str) -> str | None:
        """The job's state (PENDING, RUNNING, COMPLETED, CANCELLED, ...), None once Slurm forgot it."""
        done = self.run("scontrol", "show", "job", job, "-o", check=False)
        fields = dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
        return fields.get("JobState")

    def job_field(self, job: str, name: str) -> str | None:
        done = self.run("scontrol", "show", "job", job, "-o", check=False)
        fields = dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
        return fields.get(name)

    def wait_for_state(self, job: str, states: set[str], deadline_s: float) -> str:
        start = time.monotonic()
        while (state := self.job_state(job)) not in states:
            assert time.monotonic() - start < deadline_s, f"job {job} still {state} after {deadline_s} s"
            time.sleep(1.0)
        return state

    def wait_until_ended(self, job: str, deadline_s: float) -> str:
        """The job's final state once Slurm has stopped every process of it (no longer listed
        by squeue: neither pending, running nor completing)."""
        start = time.monotonic()
        while self.run("squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip():
            assert time.monotonic() - start < deadline_s, f"job {job} has not ended after {deadline_s} s"
            time.sleep(1.0)
        return self.job_state(job) or "gone"

    def jobs(self) -> list[str]:
        return self.run("squeue", "-h", "-o", "%i").stdout.split()


def _start(command: list[str], env: dict[str, str]) -> None:
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=60)


def _stop(pid_file: Path) -> None:
    """SIGTERM to the daemon whose pid the file holds, SIGKILL if it has not gone in 15 s."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    for sent, wait_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sent)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def start_slurm(folder: Path) -> Iterator[Slurm]:
    """Start munged, slurmctld and the two slurmd; yield once both nodes are idle; at the end
    cancel what still runs and stop the daemons by pid."""
    for sub in ("munge", "state", "log", *(f"spool/{node}" for node in NODES)):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge" / "key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    conf = folder / "slurm.conf"
    first_job_id = random.randrange(*FIRST_JOB_IDS)
    conf.write_text(config(folder, socket.gethostname(), first_job_id))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    pids = [folder / "munge" / "pid", folder / "slurmctld.pid", *(folder / f"slurmd-{node}.pid" for node in NODES)]
    try:
        _start(["munged", f"--key-file={key}", f"--socket={folder}/munge/socket", f"--pid-file={pids[0]}",
                f"--log-file={folder}/log/munged.log", f"--seed-file={folder}/munge/seed", "--force"], env)
        _start(["slurmctld", "-f", str(conf)], env)
        for node in NODES:
            _start(["slurmd", "-f", str(conf), "-N", node], env)
        slurm = Slurm(folder, env)
        deadline = time.monotonic() + 60
        while True:
            states = slurm.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split()
            if states.count("idle") == len(NODES):
                break
            assert time.monotonic() < deadline, f"the test Slurm's nodes did not come up: {states}"
            time.sleep(0.5)
        yield slurm
    finally:
        stop_jobs(env)
        for pid_file in reversed(pids):
            _stop(pid_file)
        _remove_ray_folders(first_job_id)


def stop_jobs(env: dict[str, str]) -> None:
    """Cancel every job and wait (KillWait and a margin) until Slurm has ended them."""
    subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True, timeout=60)
    deadline = time.monotonic() + KILL_WAIT_S + 30
    while time.monotonic() < deadline:
        left = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=60)
        if left.returncode != 0 or not left.stdout.strip():
            return
        time.sleep(1.0)


def _remove_ray_folders(first_job_id: int) -> None:
    """The Ray folders (/tmp/ray-JOBID-RESTARTS) of this cluster's jobs that a cancel left."""
    for entry in Path("/tmp").iterdir():
        found = re.fullmatch(r"ray-(\d+)-\d+", entry.name)
        if found and first_job_id <= int(found[1]) <= first_job_id + JOBS_PER_CLUSTER:
            shutil.rmtree(entry, ignore_errors=True)
