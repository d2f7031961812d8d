"""A search's fixed start on this machine, measured in a fresh interpreter: the driver's
imports, Ray's start, one trial worker started as Tune starts one (a Ray actor process that
imports the trainable's module, torch and PyG with it), and Ray's shutdown with that worker
alive, as a search's end has it.

Run as ``python -m orthotune.plan._start_probe`` (it prints the parts as JSON), or as the
first task of one of the plan's measuring processes (:func:`measure_start_quietly`), which
then goes on to measure shapes with torch loaded. ``_cache.StartProbe`` keeps the
result per environment. This module imports nothing heavy until it measures.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: The parts of the start, in order; the start is their sum.
PARTS = ("imports_s", "ray_start_s", "worker_start_s", "ray_shutdown_s")


class _Worker:
    """A trial worker's stand-in: its process imports the trainable's module, as a trial's does."""

    def ready(self) -> bool:
        from orthotune.search import train_trial  # noqa: F401 - the import is what is timed

        return True


def measure_start() -> dict[str, float]:
    """The start's parts, in seconds (:data:`PARTS`)."""
    started = time.perf_counter()
    import ray
    import torch  # noqa: F401 - the driver's imports are what is timed
    import torch_geometric  # noqa: F401

    from orthotune.search import launch, local_ray_options, loopback_ray  # noqa: F401 - launch: the tuner's imports

    imported = time.perf_counter()
    with loopback_ray():
        ray.init(**local_ray_options(), log_to_driver=False, logging_level="ERROR")
    up = time.perf_counter()
    worker = ray.remote(num_cpus=1)(_Worker).remote()
    ray.get(worker.ready.remote())
    ready = time.perf_counter()
    ray.shutdown()
    return {"imports_s": imported - started, "ray_start_s": up - imported, "worker_start_s": ready - up,
            "ray_shutdown_s": time.perf_counter() - ready}


def measure_start_quietly() -> dict[str, float]:
    """:func:`measure_start` with this process's output, and Ray's processes', sent to
    /dev/null (a measuring process shares the user's terminal)."""
    with _silenced():
        return measure_start()


@contextmanager
def _silenced() -> Iterator[None]:
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(null)


if __name__ == "__main__":
    print(json.dumps(measure_start()))
