"""What the nemesis (tests/nemesis.py) breaks: a real multi-node Ray on one machine (Ray's
``cluster_utils.Cluster`` on loopback: a head with no CPUs, where drivers attach, and worker
nodes of one CPU each), a real S3 API behind a switch of faults (``s3_faults.FaultyS3``), a
small disk of its own for a local store (a tmpfs; root only), and the drivers' files."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import psutil

from orthotune.search._local_ray import LOOPBACK, loopback_ray

#: A tmpfs of this size holds a tiny search's store (its rows, journal and TensorBoard files).
DISK_SIZE = "16m"


class World:
    """The cluster, the S3 server and the small disks, shared by every schedule of one run."""

    def __init__(self, workers: int = 2, s3: bool = True) -> None:
        from ray.cluster_utils import Cluster

        with loopback_ray():  # every node on 127.0.0.1
            self.cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 0, "node_ip_address": LOOPBACK, "include_dashboard": False})
        self.workers = [self.add_worker() for _ in range(workers)]
        self.s3 = None
        self.saved_environment: dict[str, str | None] = {}
        if s3:
            from s3_faults import FaultyS3

            self.s3 = FaultyS3()
            # this process reads the stores too; given back at shutdown (the other S3 tests'
            # moto server refuses these credentials)
            self.saved_environment = {key: os.environ.get(key) for key in self.s3.environment()}
            os.environ.update(self.s3.environment())
        self.disk_reason = can_mount()

    @property
    def address(self) -> str:
        return self.cluster.address

    def add_worker(self):
        with loopback_ray():
            return self.cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK)

    def cycle_node(self, rng: random.Random, gap_s: float) -> None:
        """Remove a worker node (its raylet and workers killed, no draining), then ``gap_s``
        later add a fresh one."""
        node = self.workers.pop(rng.randrange(len(self.workers)))
        self.cluster.remove_node(node, allow_graceful=False)
        time.sleep(gap_s)
        self.workers.append(self.add_worker())

    def trial_workers(self) -> list[psutil.Process]:
        """The cluster's worker processes training a trial now."""
        found = []
        for node in self.workers:
            try:
                raylet = psutil.Process(node.all_processes["raylet"][0].process.pid)
                children = raylet.children(recursive=True)
            except psutil.Error:
                continue
            for child in children:
                try:
                    if "ray::ImplicitFunc" in " ".join(child.cmdline()):
                        found.append(child)
                except psutil.Error:
                    continue
        return found

    def settled(self, deadline_s: float = 30) -> list[str]:
        """Once a search ended: trial workers still running on the cluster after ``deadline_s``."""
        deadline = time.monotonic() + deadline_s
        while (left := self.trial_workers()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return [f"trial worker {p.pid} is left running on the cluster" for p in left]

    def shutdown(self) -> None:
        if self.s3 is not None:
            self.s3.stop()
        for key, value in self.saved_environment.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self.cluster.shutdown()


def can_mount() -> str | None:
    """None where this process may mount a tmpfs (root with CAP_SYS_ADMIN), else why not."""
    probe = Path(f"/tmp/nemesis-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            return f"cannot mount a tmpfs ({mounted.stderr.strip() or mounted.returncode}): needs root"
        subprocess.run(["umount", str(probe)], check=True)
        return None
    except FileNotFoundError as missing:
        return f"cannot mount a tmpfs ({missing})"
    finally:
        probe.rmdir()


class SmallDisk:
    """A tmpfs of :data:`DISK_SIZE` at ``folder`` that :meth:`fill` fills and :meth:`free` frees."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(folder)], check=True)
        self.folder, self.ballast = folder, folder / "ballast"

    def fill(self) -> None:
        with open(self.ballast, "ab", buffering=0) as sink:
            try:
                while True:
                    sink.write(b"\0" * 65536)
            except OSError as full:
                assert full.errno == 28, full  # ENOSPC

    def free(self) -> None:
        self.ballast.unlink(missing_ok=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.folder)], check=False)


def corrupt(data: bytes, how: str, rng: random.Random) -> bytes:
    """``data`` torn (``truncate``: a prefix of it kept, as a crash mid-write or a lost tail
    leaves a file) or rotted (``flip``: one to four bytes with one bit flipped each)."""
    if how == "truncate":
        return data[:rng.randrange(max(1, len(data) - 1))]
    rotten = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(rotten))
        rotten[at] ^= 1 << rng.randrange(8)
    return bytes(rotten)


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to a driver's process group (the driver, and a local Ray of its own)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
