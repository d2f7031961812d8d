"""What a plan keeps in orthotune's cache, read and written without importing torch: each
measured shape's cost (``plan-costs``), whole plans (``plan-index``) and the search's fixed
start (``plan-start``, measured by :class:`StartProbe` in a fresh interpreter)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from orthotune import __version__
from orthotune.search._estimate import CellEstimate

#: Bumped when what a cached measurement means changes: older entries are then measured again.
CACHE_FORMAT = 3
#: What the fixed start of a search is measured as, in a fresh interpreter (cached per
#: machine, version and probe): the driver's imports, Ray's start, one trial worker started as
#: Tune starts one (a Ray actor process that imports the trainable's module, torch and PyG
#: with it), and Ray's shutdown with that worker alive, as a search's end has it.
START_PROBE = r"""
import json, time
started = time.perf_counter()
import torch, torch_geometric, ray
import orthotune.search._tuner
imported = time.perf_counter()
from orthotune.search._local_ray import local_ray_options, loopback_ray
with loopback_ray():
    ray.init(**local_ray_options(), log_to_driver=False, logging_level="ERROR")
up = time.perf_counter()

@ray.remote(num_cpus=1)
class Worker:
    def ready(self):
        import orthotune.search._trainable
        return True

worker = Worker.remote()
ray.get(worker.ready.remote())
ready = time.perf_counter()
ray.shutdown()
print(json.dumps({"imports_s": imported - started, "ray_start_s": up - imported, "worker_start_s": ready - up,
                  "ray_shutdown_s": time.perf_counter() - ready}))
"""


def torch_version() -> str:
    """torch's version as installed (read without importing torch)."""
    try:
        return version("torch")
    except PackageNotFoundError:
        return "none"


def plan_cache() -> Path:
    """orthotune's cache (``ORTHOTUNE_CACHE`` or ``~/.cache/orthotune``), the folder of
    ``orthotune.training.cache_dir()``, resolved here without importing torch (a test holds the
    two equal)."""
    if os.environ.get("ORTHOTUNE_CACHE"):
        return Path(os.environ["ORTHOTUNE_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orthotune"


def cost_folder() -> Path:
    """Where measured shapes are kept: ``plan-costs`` in orthotune's cache (``ORTHOTUNE_CACHE``)."""
    return plan_cache() / "plan-costs"


def cached_cost(shape: str) -> Any:
    from orthotune.training import CellCost

    path = cost_folder() / f"{shape}.json"
    if not path.is_file():
        return None
    try:
        return CellCost.from_dict(json.loads(path.read_text())["cost"])
    except (OSError, ValueError, KeyError, TypeError):  # a damaged entry is measured again
        return None


def save_cost(shape: str, cost: Any) -> None:
    write_json(cost_folder() / f"{shape}.json", {"cost": cost.to_dict(), "measured_at": time.time()})


def shape_stamps(shapes: set[str]) -> dict[str, float | None]:
    """When each shape's cached measurement was made (None where it is missing or damaged)."""
    stamps = {}
    for shape in sorted(shapes):
        try:
            stamps[shape] = float(json.loads((cost_folder() / f"{shape}.json").read_text())["measured_at"])
        except (OSError, ValueError, KeyError, TypeError):
            stamps[shape] = None
    return stamps


def index_path(key: str) -> Path:
    return plan_cache() / "plan-index" / f"{key[:32]}.json"


def kept_plan(key: str) -> tuple[dict[str, Any], list[CellEstimate]] | None:
    """A whole plan kept under ``key`` (the machine and the cells), if every shape it read is
    still the one cached; its start is read from the start's own cache (:class:`StartProbe`),
    so a start measured again reaches the kept plans too."""
    try:
        kept = json.loads(index_path(key).read_text())
        if shape_stamps(set(kept["shapes"])) != kept["shapes"]:  # a shape measured again since
            return None
        cells = [CellEstimate(**{**c, "cached": True, "sources": tuple(c["sources"])}) for c in kept["cells"]]
        return kept["machine"], cells
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_json(path: Path, values: dict[str, Any]) -> None:
    """Written whole or not at all (a plan killed mid-write leaves no half entry)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(values))
    partial.replace(path)


class StartProbe:
    """A search's fixed start on this machine (:data:`START_PROBE`: the driver's imports,
    Ray's start, one trial worker's start, Ray's shutdown), measured once in a fresh
    interpreter started at once (it runs while the plan loads torch) and cached per
    environment (``plan-start`` in orthotune's cache); 0.0 where the probe fails."""

    def __init__(self, remeasure: bool) -> None:
        key = hashlib.sha256(json.dumps([sys.prefix, torch_version(), __version__, CACHE_FORMAT,
                                         START_PROBE]).encode())
        self.path = plan_cache() / "plan-start" / f"{key.hexdigest()[:16]}.json"
        self.start_s: float | None = None if remeasure else self._cached()
        self.process: subprocess.Popen[str] | None = None
        if self.start_s is None:
            try:
                self.process = subprocess.Popen([sys.executable, "-c", START_PROBE], stdout=subprocess.PIPE,
                                                stderr=subprocess.DEVNULL, text=True)
            except OSError:
                self.start_s = 0.0

    def _cached(self) -> float | None:
        try:
            return float(json.loads(self.path.read_text())["start_s"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def wait(self) -> None:
        """Until the probe has finished (measurements are not timed beside its Ray)."""
        if self.start_s is not None or self.process is None:
            return
        try:
            out, _ = self.process.communicate(timeout=300)
            parts = json.loads(out.strip().splitlines()[-1]) if self.process.returncode == 0 else None
        except (subprocess.SubprocessError, ValueError, IndexError):
            self.process.kill()
            parts = None
        if parts is None:
            self.start_s = 0.0
            return
        self.start_s = sum(parts[name] for name in ("imports_s", "ray_start_s", "worker_start_s", "ray_shutdown_s"))
        write_json(self.path, {"start_s": self.start_s, **parts})

    @property
    def done(self) -> bool:
        """Whether the start is known (cached, measured or failed) without waiting."""
        return self.start_s is not None

    def seconds(self) -> float:
        self.wait()
        return self.start_s or 0.0
