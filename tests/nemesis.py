"""The nemesis (issue 51): seeded schedules of combined faults against one tiny real search on a
real multi-node Ray (``nemesis_world.World``), its store local (on a small disk of its own) or on
a real S3 API, each fault followed by ``launch --start-or-resume`` as an operator or a Slurm
requeue runs it; then the invariants over the store (``checker.anomalies``) and the machine
(``checker.leftovers``, ``World.settled``).

Faults (:data:`KINDS`): the driver SIGKILLed (``driver_kill``) or sent SIGTERM
(``driver_term``); the driver paused past its lease's staleness, taken over, then continued
(``pause``: it must stop saying it lost the search); a trial's Ray worker SIGKILLed
(``worker_kill``); a worker node removed and a fresh one added (``node_cycle``); on S3, bursts
of errors, throttling or latency (``s3_error``, ``s3_throttle``, ``s3_latency``); on the local
store, its disk filled then freed (``disk_full``); a trial file torn or rotted while its driver
is down (``truncate``, ``flip``: the driver SIGKILLed first, as a crash tears a file).

:func:`schedule` draws everything from the seed: the store, the faults, when each strikes
(after how many stored trials, then how many seconds) and how long it lasts, so a failing
schedule replays from its seed (the machine's timing aside). Every driver's exit is checked
too: 0, or an error in one line, never a traceback.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import drivers
import yaml
from checker import anomalies, leftovers
from nemesis_world import SmallDisk, World, corrupt, stop_group

from orthotune.core import OrthotuneError
from orthotune.store import Store, check_store, lease_info, quarantine

DATA = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
#: The tiny search: the fault tests' (Cora, GCN-2, both arms), two configs each, 150 epochs a
#: trial (long enough that a fault lands inside the search on an idle machine too).
SPACE = {**drivers.SPACE, "name": "nemesis", "samples": 2,
         "train": {**drivers.SPACE["train"], "epochs": 150, "patience": 150}}
BUDGET = 2 * SPACE["samples"]
GRID = {"lr": SPACE["train"]["lr"], "T": [None, *SPACE["ortho"]["T"]]}
NAME = "n"
STALE_S = 5
COMMON = ("driver_kill", "driver_term", "pause", "worker_kill", "node_cycle", "truncate", "flip")
ONLY = {"local": ("disk_full",), "s3": ("s3_error", "s3_throttle", "s3_latency")}
KINDS = (*COMMON, *ONLY["local"], *ONLY["s3"])
#: Resumes an operator tries at the end before calling the schedule stuck.
LAST_RESUMES = 4


@dataclass(frozen=True)
class Fault:
    kind: str
    after_trials: int  # strikes once this many trials are stored
    delay_s: float  # and this long after
    seconds: float  # how long a burst, a full disk or a node's absence lasts
    rate: float  # share of S3 requests refused in a burst


@dataclass(frozen=True)
class Schedule:
    seed: int
    store: str  # "local" or "s3"
    faults: tuple[Fault, ...]


def schedule(seed: int, stores: tuple[str, ...] = ("local", "s3"), faults: tuple[int, int] = (2, 3)) -> Schedule:
    """Schedule ``seed``: its store and ``faults`` (fewest, most) faults of the kinds it allows."""
    rng = random.Random(seed)
    store = rng.choice(stores)
    kinds = (*COMMON, *ONLY[store])
    drawn = [Fault(rng.choice(kinds), rng.randint(0, BUDGET - 2), round(rng.uniform(0, 3), 2),
                   round(rng.uniform(1, 6), 2), round(rng.uniform(0.3, 1.0), 2)) for _ in range(rng.randint(*faults))]
    return Schedule(seed, store, tuple(sorted(drawn, key=lambda f: f.after_trials)))


@dataclass
class Outcome:
    """What one schedule did and found."""

    schedule: Schedule
    injected: Counter = field(default_factory=Counter)  # faults that struck, by kind
    trials: int = 0  # trial rows checked
    drivers: int = 0  # driver sessions started
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


class Run:
    """One schedule against ``world``, in ``work`` (a fresh folder)."""

    def __init__(self, world: World, plan: Schedule, work: Path) -> None:
        self.world, self.plan, self.work = world, plan, work
        self.rng = random.Random(plan.seed + 1)
        self.outcome = Outcome(plan)
        self.sessions: list[int] = []
        self.killed: set[int] = set()  # drivers SIGKILLed: their output ends anywhere
        self.procs: list[subprocess.Popen] = []
        work.mkdir(parents=True)
        (work / "tmp").mkdir()
        self.disk = None
        if plan.store == "local":
            self.disk = SmallDisk(work / "disk") if world.disk_reason is None else None
            self.uri = str((work / "disk" / "store") if self.disk else work / "store")
        else:
            self.uri = world.s3.create_bucket(f"nemesis-{plan.seed}-{os.getpid()}-{int(time.time() * 1e3) % 10**8}")
        (work / "space.yaml").write_text(yaml.safe_dump(SPACE))
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", "ORTHOTUNE_DATA_ROOT": str(DATA),
                    "ORTHOTUNE_LEASE_STALE_S": str(STALE_S), "TMPDIR": str(work / "tmp"),
                    **(world.s3.environment() if world.s3 else {})}

    # -- drivers ------------------------------------------------------------------------

    def driver(self) -> subprocess.Popen:
        """``launch --start-or-resume`` of the search, as an operator (or a requeue) runs it."""
        n = len(self.procs)
        proc = subprocess.Popen(
            [sys.executable, "-m", "orthotune.cli", "launch", "--space", str(self.work / "space.yaml"), "--name", NAME,
             "--store", self.uri, "--address", self.world.address, "--concurrency", "2", "--scheduler", "fifo",
             "--report-every", "5", "--progress", "plain", "--retries", "4", "--start-or-resume"],
            env=self.env, text=True, stdout=open(self.work / f"driver-{n}.out", "w"),
            stderr=open(self.work / f"driver-{n}.err", "w"), start_new_session=True)
        self.procs.append(proc)
        self.sessions.append(proc.pid)
        self.outcome.drivers += 1
        return proc

    def err(self, proc: subprocess.Popen) -> str:
        return (self.work / f"driver-{self.procs.index(proc)}.err").read_text()

    def ended(self, proc: subprocess.Popen, timeout: float) -> int | None:
        """Wait for ``proc``; its exit code, checked (None: still running after ``timeout``)."""
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        text = self.err(proc)
        lines = text.strip().splitlines()
        with open(self.work / "exits.txt", "a") as log:
            last = lines[-1] if lines else ""
            print(f"driver-{self.procs.index(proc)} pid {proc.pid}: exit {code}: {last}", file=log)
        if proc.pid not in self.killed:
            if "Traceback" in text or (code not in (0, 143) and len([x for x in lines if "error" in x]) > 1):
                self.outcome.problems.append(f"driver {proc.pid} (exit {code}) did not end in one line: "
                                             f"{' | '.join(lines[-3:])}")
        return code

    def stored(self) -> int:
        try:
            return Store.open(self.uri).read("trials", search=NAME).num_rows
        except Exception:  # noqa: BLE001  (no store yet, or S3 in a burst)
            return 0

    def holder(self) -> int | None:
        try:
            lease = lease_info(Store.open(self.uri), NAME, STALE_S)
        except Exception:  # noqa: BLE001
            return None
        return None if lease is None else lease.pid

    # -- the schedule -------------------------------------------------------------------

    def play(self) -> Outcome:
        start = time.monotonic()
        running = self.driver()
        try:
            for fault in self.plan.faults:
                if not self._wait(lambda f=fault: self.stored() >= f.after_trials, running, 300):
                    break  # the search ended before this fault's moment
                time.sleep(fault.delay_s)
                if running.poll() is not None:
                    break
                running = self.inject(fault, running)
            self._finish(running)
            self.check()
        finally:
            for proc in self.procs:
                if proc.poll() is None:
                    stop_group(proc)
                    proc.wait()
            if self.world.s3:
                self.world.s3.switch.calm()
            if self.disk:
                self.disk.unmount()
        self.outcome.seconds = time.monotonic() - start
        return self.outcome

    def _wait(self, condition, proc: subprocess.Popen, deadline_s: float) -> bool:
        deadline = time.monotonic() + deadline_s
        while not condition():
            if proc.poll() is not None:
                return False
            if time.monotonic() > deadline:
                self.outcome.problems.append(f"timed out after {deadline_s:g} s")
                return False
            time.sleep(0.3)
        return True

    def _finish(self, running: subprocess.Popen) -> None:
        """Let the search end; resume it (the operator) until it ends well, a few times at most."""
        for attempt in range(LAST_RESUMES + 1):
            code = self.ended(running, 600)
            if code is None:
                self.outcome.problems.append("the last driver did not end within 600 s")
                return
            if code == 0:
                return
            if attempt < LAST_RESUMES:
                running = self.driver()
        self.outcome.problems.append(f"the search did not end well after {LAST_RESUMES} resumes")

    def inject(self, fault: Fault, running: subprocess.Popen) -> subprocess.Popen:
        """Strike with ``fault``; the driver that continues the search (the operator resumes it
        once it is down)."""
        kind = fault.kind
        if kind in ("driver_kill", "truncate", "flip"):
            self.killed.add(running.pid)
            stop_group(running)
            running.wait()
            if kind != "driver_kill" and not self._rot(kind):
                kind = "driver_kill"  # no trial file yet to rot: it was a kill
        elif kind == "driver_term":
            os.kill(running.pid, signal.SIGTERM)
            if self.ended(running, 120) is None:
                self.outcome.problems.append(f"driver {running.pid} did not stop within 120 s of SIGTERM")
        elif kind == "pause":
            return self._pause(running)
        elif kind == "worker_kill":
            deadline = time.monotonic() + 20  # a trial may be starting, or the search ending
            while not (workers := self.world.trial_workers()) and running.poll() is None:
                if time.monotonic() > deadline:
                    return running  # no trial trained meanwhile: nothing struck
                time.sleep(0.3)
            if not workers:
                return running
            self.rng.choice(workers).kill()
        elif kind == "node_cycle":
            self.world.cycle_node(self.rng, fault.seconds)
        elif kind.startswith("s3_"):
            self.world.s3.switch.burst(kind, fault.seconds, fault.rate, delay_s=fault.rate * 2)
            time.sleep(fault.seconds)
        elif kind == "disk_full":
            if self.disk is None:
                return running
            self.disk.fill()
            time.sleep(fault.seconds)
            self.disk.free()
        self.outcome.injected[kind] += 1
        return running if running.poll() is None else self._resumed(running)

    def _resumed(self, gone: subprocess.Popen) -> subprocess.Popen:
        self.ended(gone, 0)
        return self.driver()

    def _rot(self, how: str) -> bool:
        """Tear or rot one stored trial file of the search; False when none is stored yet."""
        import pyarrow.fs as pafs

        try:
            store = Store.open(self.uri)
        except OrthotuneError:  # killed before it created the store: nothing to rot
            return False
        if not store.exists(f"searches/{NAME}.json") or store.search_meta(NAME).get("state") == "finished":
            return False  # rot in a finished search is bounded loss (tests/store/test_bounded_loss.py)
        folder = store.path("trials", f"search={NAME}")
        try:
            files = sorted(i.path for i in store.fs.get_file_info(pafs.FileSelector(folder)) if
                           i.base_name.startswith("trial-") and i.base_name.endswith(".parquet"))
        except (FileNotFoundError, OSError):
            return False
        if not files:
            return False
        victim = self.rng.choice(files)
        with store.fs.open_input_stream(victim) as source:
            data = source.read()
        with store.fs.open_output_stream(victim) as sink:
            sink.write(corrupt(data, how, self.rng))
        return True

    def _pause(self, running: subprocess.Popen) -> subprocess.Popen:
        """SIGSTOP past the lease's staleness, a successor takes over, then SIGCONT: the paused
        driver must stop saying it lost the search (paused before it held the lease: it is
        refused as the lease is held, or finds the search finished and says so)."""
        held = self.holder() == running.pid
        os.kill(running.pid, signal.SIGSTOP)
        successor = self.driver()
        try:
            taken = self._wait(lambda: self.holder() == successor.pid, successor, 120)
        finally:
            os.kill(running.pid, signal.SIGCONT)
        self.outcome.injected["pause"] += 1
        if not taken:  # the successor ended first (it found the search finished, or failed)
            return running if running.poll() is None else successor
        code = self.ended(running, 300)
        last = (self.err(running).strip().splitlines() or [""])[-1]
        lost = code == 1 and "was lost by this driver" in last
        # paused before it took the lease: refused (the lease is held), or the search's outcome
        if not (lost or not held and (code == 0 or code == 2 and "held by driver" in last)):
            self.outcome.problems.append(f"the paused driver {running.pid} (holding the lease: {held}) ended with "
                                         f"exit {code}, not the lost lease: {last}")
        return successor

    def check(self) -> None:
        """The operator's repair (``store check --quarantine`` of corrupt files), then every invariant."""
        self.outcome.problems += [f"driver {p.pid} still runs after the search ended" for p in self.procs
                                  if p.poll() is None]
        store = Store.open(self.uri)
        quarantine(store, [p for p in check_store(store) if p.kind == "corrupt parquet"])
        self.outcome.trials = store.read("trials", search=NAME).num_rows
        self.outcome.problems += anomalies(self.uri, NAME, BUDGET, grid=GRID, pairs=1)
        self.outcome.problems += self.world.settled()
        self.outcome.problems += leftovers(self.sessions, self.work / "tmp")


def play(world: World, seed: int, work: Path, **drawn) -> Outcome:
    """Schedule ``seed`` against ``world`` in ``work/seed-SEED``."""
    plan, run = schedule(seed, **drawn), None
    try:
        run = Run(world, plan, work / f"seed-{seed}")
        return run.play()
    except Exception as error:  # noqa: BLE001  (the nemesis itself failed: reported with its seed)
        outcome = run.outcome if run else Outcome(plan)
        outcome.problems.append(f"the nemesis failed: {type(error).__name__}: {error}")
        return outcome
