"""What a plan keeps in orthotune's cache, read and written without importing torch: each
measured shape's cost (``plan-costs``), whole plans (``plan-index``) and the search's fixed
start (``plan-start``, measured by :class:`StartProbe` in a fresh interpreter)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from orthotune import __version__
from orthotune.core import cache_dir
from orthotune.plan._estimate import CellEstimate
from orthotune.plan._start_probe import PARTS

#: The longest the plan waits for the start probe (then the start counts as 0.0, unmeasured).
PROBE_TIMEOUT_S = 300

#: Bumped when what a cached measurement means changes: older entries are then measured again.
CACHE_FORMAT = 3
#: The module that measures the search's fixed start (``_start_probe``); its source is part of
#: the start's cache key, so a changed probe measures again.
PROBE_MODULE = "orthotune.plan._start_probe"


#: The packages whose code decides what an epoch costs. Their source is part of every shape's
#: key: a checkout between releases keeps one version while its trainer changes, and a shape
#: measured before a change would otherwise price the plans after it.
TRAINER_PACKAGES = ("core", "models", "training")


@functools.cache
def trainer_digest() -> str:
    """:func:`source_digest` of this installation's :data:`TRAINER_PACKAGES` (read once per process)."""
    return source_digest(Path(__file__).resolve().parents[1], TRAINER_PACKAGES)


def source_digest(root: Path, packages: Sequence[str]) -> str:
    """A digest of the ``.py`` files under ``root / package`` for each package: their paths and
    their bytes, in sorted order."""
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def torch_version() -> str:
    """torch's version as installed (read without importing torch)."""
    try:
        return version("torch")
    except PackageNotFoundError:
        return "none"


def plan_cache() -> Path:
    """orthotune's cache (``core.cache_dir``: ``ORTHOTUNE_CACHE`` or ``~/.cache/orthotune``),
    where the datasets are processed too."""
    return cache_dir()


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
    """A search's fixed start on this machine (``_start_probe``: the driver's imports, Ray's
    start, one trial worker's start, Ray's shutdown), measured once in a fresh interpreter and
    cached per environment (``plan-start`` in orthotune's cache); 0.0 where the probe fails.

    ``here``: the probe's interpreter starts at once (it runs while the plan loads torch);
    otherwise the first of the plan's measuring processes measures it before any shape
    (``_costing``) and hands the parts in through :meth:`deliver`."""

    def __init__(self, remeasure: bool, here: bool = True) -> None:
        source = (Path(__file__).parent / "_start_probe.py").read_text()
        key = hashlib.sha256(json.dumps([sys.prefix, torch_version(), __version__, CACHE_FORMAT, source]).encode())
        self.path = plan_cache() / "plan-start" / f"{key.hexdigest()[:16]}.json"
        self.start_s: float | None = None if remeasure else self._cached()
        self.process: subprocess.Popen[str] | None = None
        self.lock = threading.Lock()
        self.delivered = threading.Event()
        self.elsewhere = self.start_s is None and not here  # a measuring process measures it
        if self.start_s is None and here:
            try:
                self.process = subprocess.Popen([sys.executable, "-m", PROBE_MODULE], stdout=subprocess.PIPE,
                                                stderr=subprocess.DEVNULL, text=True)
            except OSError:
                self.start_s = 0.0

    def _cached(self) -> float | None:
        try:
            return float(json.loads(self.path.read_text())["start_s"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def deliver(self, parts: dict[str, float] | None) -> None:
        """The parts as a measuring process measured them (None: the probe failed there)."""
        with self.lock:
            self._record(parts)
        self.delivered.set()

    def wait(self) -> None:
        """Until the probe has finished (from any thread)."""
        if self.elsewhere:
            if not self.delivered.wait(timeout=PROBE_TIMEOUT_S):
                self.deliver(None)
            return
        with self.lock:
            if self.start_s is not None or self.process is None:
                return
            try:
                out, _ = self.process.communicate(timeout=PROBE_TIMEOUT_S)
                parts = json.loads(out.strip().splitlines()[-1]) if self.process.returncode == 0 else None
            except (subprocess.SubprocessError, ValueError, IndexError):
                self.process.kill()
                parts = None
            self._record(parts)

    def _record(self, parts: dict[str, float] | None) -> None:
        if self.start_s is not None:  # delivered once already (a late delivery after the timeout)
            return
        if not parts:
            self.start_s = 0.0
            return
        self.start_s = sum(parts[name] for name in PARTS)
        write_json(self.path, {"start_s": self.start_s, **parts})

    @property
    def done(self) -> bool:
        """Whether the start is known (cached, measured or failed) without waiting."""
        return self.start_s is not None

    def seconds(self) -> float:
        self.wait()
        return self.start_s or 0.0
