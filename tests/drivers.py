"""Real ``orthotune launch`` drivers of one tiny search, as the fault tests start, pause, kill
and continue them: Cora, GCN-2, both arms, ``samples`` configs each, the lease's staleness
shortened to :data:`STALE_S` (``ORTHOTUNE_LEASE_STALE_S``) so a takeover takes seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from orthotune.store import Store, lease_info

DATA = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
SPACE = {"name": "faults", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2],
         "original": True, "ortho": {"T": [2, 6], "beta": 1.0, "lam": 5.0e-4},
         "train": {"lr": [0.1, 0.03, 0.01, 0.003], "dropout": 0.0, "epochs": 200, "patience": 200, "hidden": 16},
         "samples": 3}
BUDGET = 2 * SPACE["samples"]
STALE_S = 5
NAME = "p"


#: ``python -c`` of a driver whose store is never fenced (as before issue 51): only to show
#: that the checker catches what such a driver writes after it lost its lease.
UNFENCED = ("import sys; from orthotune.store import Store; Store.fenced = lambda self, check: self; "
            "from orthotune.cli import main; sys.exit(main(sys.argv[1:]))")


def driver(tmp_path: Path, *extra: str, fenced: bool = True) -> subprocess.Popen:
    """A driver of search :data:`NAME` in ``tmp_path/store`` (``--start-or-resume`` in ``extra``
    continues it), in a session of its own (a process group: its local Ray with it);
    ``fenced=False``: its writes skip the lease's fence (:data:`UNFENCED`)."""
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ORTHOTUNE_DATA_ROOT": str(DATA),
           "ORTHOTUNE_LEASE_STALE_S": str(STALE_S)}
    entry = ["-m", "orthotune.cli"] if fenced else ["-c", UNFENCED]
    return subprocess.Popen([sys.executable, *entry, "launch", "--space", str(space), "--name", NAME,
                             "--store", str(tmp_path / "store"), "--concurrency", "1", "--scheduler", "fifo",
                             "--report-every", "5", "--progress", "plain", *extra],
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def wait_until(condition, proc: subprocess.Popen, what: str, deadline_s: float = 300) -> bool:
    """Poll ``condition`` until true (True) or ``proc`` ended (False); fails after ``deadline_s``."""
    start = time.monotonic()
    while not condition():
        if proc.poll() is not None:
            return False
        assert time.monotonic() - start < deadline_s, f"timed out waiting for {what}"
        time.sleep(0.3)
    return True


def holder(store: Path) -> int | None:
    """The pid of the driver holding the search's lease (None for an instant during a takeover)."""
    lease = lease_info(Store.open(str(store)), NAME, STALE_S)
    return None if lease is None else lease.pid
