"""The service's own cost, as a plan includes it: what a search adds beyond the trainer per
Ray trial (scheduling it on a reused actor, the trainable's set-up, its completion) and per
report to Tune (the round trip, the store's and the callbacks' work), measured on this
machine by ``_overhead_probe`` (small real searches on a local Ray).

Where a plan's figures come from, in order: a file given (``orthotune plan
--service-overhead FILE``, the JSON ``bench/service_overhead.py`` writes: how a plan made on a
machine without Ray, a GPU host, includes what was measured on one with it); else the
measurement kept for this environment (``plan-service`` in orthotune's cache); else, where
asked and Ray is importable, measured now in an interpreter of its own. Without any of
these a plan says in one line that the overhead is not included: never a silent zero.

Light: reading a file or the cache imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import platform
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from orthotune import __version__
from orthotune.core import OrthotuneError
from orthotune.plan import _cache
from orthotune.plan._cache import CACHE_FORMAT, torch_version, write_json

#: The probe's module (its source is part of the cache's key: a changed probe measures again).
PROBE_MODULE = "orthotune.plan._overhead_probe"
#: The longest the plan waits for the probe (its searches take about a minute on two cores).
PROBE_TIMEOUT_S = 900
#: A service-overhead file is a small JSON object; anything larger is not one.
FILE_LIMIT = 1 << 20
#: The figures a file must hold, each a finite number of seconds >= 0.
FIGURES = ("per_trial_s", "per_report_s")


@dataclass(frozen=True)
class ServiceOverhead:
    """Seconds the service adds per Ray trial and per report, and where they come from
    (``source``: ``measured here``, ``cache`` or ``file NAME``; ``measured``: the date,
    machine, load and versions the measurement recorded)."""

    per_trial_s: float
    per_report_s: float
    source: str
    measured: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def from_values(values: Any, source: str, where: str | None = None) -> ServiceOverhead:
    """The overhead in ``values`` (a decoded JSON object), or an ``OrthotuneError`` saying
    in one line what is wrong with it (``where``: what the line names, default ``source``)."""
    where = where or source
    if not isinstance(values, dict):
        raise OrthotuneError(f"{where}: a JSON object with {' and '.join(FIGURES)} expected")
    for name in FIGURES:
        value = values.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise OrthotuneError(f"{where}: {name}={value!r} must be a finite number of seconds >= 0")
    measured = values.get("measured")
    return ServiceOverhead(float(values["per_trial_s"]), float(values["per_report_s"]), source,
                           measured if isinstance(measured, dict) else {})


def read_service_overhead(path: str) -> ServiceOverhead:
    """The overhead in the file at ``path`` (``bench/service_overhead.py``'s JSON), or an
    ``OrthotuneError`` in one line: missing, not a file, too large, binary, not JSON, or
    without its two figures."""
    source = f"service overhead file {path}"
    file = Path(path)
    if not file.is_file():
        raise OrthotuneError(f"{source}: {'not a file' if file.exists() else 'no such file'}")
    try:
        data = file.read_bytes()[: FILE_LIMIT + 1]
    except OSError as error:
        raise OrthotuneError(f"{source}: cannot be read ({error.strerror})") from None
    if len(data) > FILE_LIMIT:
        raise OrthotuneError(f"{source}: larger than {FILE_LIMIT} bytes, not a service-overhead file")
    try:
        values = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise OrthotuneError(f"{source}: not a text file (not UTF-8)") from None
    except ValueError as error:
        raise OrthotuneError(f"{source}: not JSON ({str(error).splitlines()[0]})") from None
    return from_values(values, f"file {file.name}", source)


def ray_version() -> str | None:
    """Ray's version as installed (None without Ray), read without importing it."""
    try:
        return version("ray")
    except PackageNotFoundError:
        return None


def cache_path() -> Path:
    """The measurement kept for this environment: the interpreter, Ray's, torch's and
    orthotune's versions, the probe's source and this host."""
    source = (Path(__file__).parent / "_overhead_probe.py").read_text()
    parts = [sys.prefix, ray_version(), torch_version(), __version__, CACHE_FORMAT, source, platform.node()]
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
    return _cache.plan_cache() / "plan-service" / f"{key}.json"  # through the module: tests move the cache


def cached_overhead() -> ServiceOverhead | None:
    try:
        return from_values(json.loads(cache_path().read_text()), "cache")
    except (OSError, ValueError, OrthotuneError):  # none, or damaged: measured again where asked
        return None


def measure_here(data_root: str | None) -> ServiceOverhead | str:
    """Measured now in an interpreter of its own (``_overhead_probe``) and kept; or why not."""
    command = [sys.executable, "-m", PROBE_MODULE, *(["--data-root", data_root] if data_root else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        values = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        values = None
    if values is None:
        return "its measurement failed here (python -m orthotune.plan._overhead_probe says why)"
    write_json(cache_path(), values)
    return from_values(values, "measured here")


def service_overhead(file: str | None, measure: bool, remeasure: bool = False, data_root: str | None = None,
                     note: Callable[[str], None] | None = None) -> ServiceOverhead | str:
    """The overhead a plan includes (see the module's note), or the one line that says why
    none is. ``measure``: measure it here where it is not kept yet (``orthotune plan``;
    ``launch``'s plan only reads what is kept)."""
    if file is not None:
        return read_service_overhead(file)
    kept = None if remeasure else cached_overhead()
    if kept is not None:
        return kept
    if importlib.util.find_spec("ray") is None:
        return "no Ray here to measure it; give --service-overhead FILE (bench/service_overhead.py writes one)"
    if not measure:
        return "not measured in this environment yet (orthotune plan measures it)"
    if note is not None:
        note("measuring the service's overhead per trial and per report (small searches on a local Ray)")
    return measure_here(data_root)
