"""The service's own cost on this machine: what a search adds per Ray trial and per report to
Tune beyond the trainer, measured by running small real searches through the launch path.

Each run is one search (``search.launch`` on a private local Ray started here; Optuna and
ASHA, as a search runs by default; one trial at a time) of some Cora GCN-2
configs trained ``epochs`` epochs each (patience and ASHA's grace at the cap: nothing stops
early), at one ``(configs, configs_per_trial, report_every)`` of :data:`RUNS`. Its overhead is the
search's wall minus the trainer's own seconds for the same trials (``run_configs`` on each
trial group of configs of the same shape, with the same options and a callback that does
nothing, in this process, without Ray: learning rates and seeds do not change an epoch's
cost). The runs' overheads are then fitted, by least squares, as

    overhead = fixed + ray_trials x per_trial_s + reports x per_report_s

(``fixed``: what each search pays once, the Tuner's set-up, its trial worker's start and
imports and the data's loading there, which the plan's ``start_s`` counts apart; a search
with trial groups has a fixed cost of its own: under ASHA it starts the rung board). A
trial's reports follow the trainable's rule: one every ``report_every`` epochs, the last
with the final report (``ceil(epochs / report_every)``).

Run as ``python -m orthotune.plan._overhead_probe`` (prints the result as JSON on its last
line); ``bench/service_overhead.py`` runs it with repeats and writes the file that
``orthotune plan --service-overhead`` reads.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

#: The searches run: (configs, configs per trial, report every; None: every ``epochs``, one
#: report per trial). Pairs that differ only in their configs tell the cost per trial apart
#: from the search's fixed cost; pairs that differ only in ``report_every``, per report.
RUNS: tuple[tuple[int, int, int | None], ...] = (
    (5, 1, None), (25, 1, None), (5, 1, 1), (25, 1, 1), (10, 5, 1), (30, 5, 1))
EPOCHS = 10


def probe_space(configs: int, epochs: int) -> dict[str, Any]:
    """One cell and arm (Cora semi-supervised, GCN-2, the original arm), ``configs`` trials,
    nothing stopped before the cap."""
    train = {"lr": {"low": 0.001, "high": 0.1, "log": True}, "hidden": 16, "epochs": epochs, "patience": epochs}
    return {"name": "service-probe", "datasets": ["cora"], "setting": "semi", "repeats": [0], "backbones": ["gcn"],
            "depths": [2], "original": True, "train": train,
            "asha": {"grace_period": epochs, "reduction_factor": 2}, "samples": configs}


def reports_of(epochs: int, report_every: int) -> int:
    """A trial's reports to Tune: one every ``report_every`` epochs, the last with the final."""
    return math.ceil(epochs / report_every)


def trainer_seconds(space: Any, configs: int, per_trial: int, report_every: int, data_root: str | None) -> float:
    """The trainer's own seconds for the search's trials, without Ray: each trial group of
    configs of the probe's shape trained by ``run_configs`` with the trainable's options."""
    import torch

    from orthotune.core import TrainConfig
    from orthotune.spaces import default_config
    from orthotune.training import TrainOptions, run_configs

    cell = next(iter(space.cells()))
    base = default_config(cell)
    options = TrainOptions(report_every=report_every, grad_norms_every=report_every)
    total = 0.0
    for first in range(0, configs, per_trial):
        group = [TrainConfig.from_dict({**base, "seeds": [k]}) for k in range(first, min(configs, first + per_trial))]
        start = time.perf_counter()
        run_configs(group, torch.device("cpu"), data_root, lambda report: [], options)
        total += time.perf_counter() - start
    return total


def search_seconds(space: Any, per_trial: int, report_every: int, store: str, name: str,
                   data_root: str | None) -> float:
    """The wall of one search through the launch path (Ray already started here)."""
    from orthotune.search import LaunchOptions, launch

    options = LaunchOptions(store=store, name=name, space=space, data_root=data_root, concurrency=1,
                            configs_per_trial=per_trial, report_every=report_every)
    start = time.perf_counter()
    outcome = launch(options, progress=False)
    wall = time.perf_counter() - start
    done = outcome.counts.get("completed", 0)
    if done != space.samples:
        raise RuntimeError(f"the probe's search {name} completed {done} of {space.samples} configs: {outcome.counts}")
    return wall


def fit(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Least squares of ``overhead = fixed + ray_trials x per_trial_s + reports x per_report_s``,
    with a fixed cost of its own for the searches with trial groups (they start the rung
    board, an actor of its own, under ASHA)."""
    import numpy as np

    design = np.array([[float(r["configs_per_trial"] == 1), float(r["configs_per_trial"] > 1), r["ray_trials"],
                        r["reports"]] for r in runs])
    overhead = np.array([r["overhead_s"] for r in runs])
    solution, *_ = np.linalg.lstsq(design, overhead, rcond=None)
    residual = overhead - design @ solution
    return {"fixed_s": float(solution[0]), "fixed_grouped_s": float(solution[1]),
            "per_trial_s": float(solution[2]), "per_report_s": float(solution[3]),
            "residual_rms_s": float(np.sqrt(np.mean(residual**2)))}


def measure_overhead(runs: tuple[tuple[int, int, int | None], ...] = RUNS, epochs: int = EPOCHS, repeats: int = 1,
                     data_root: str | None = None, cores: int | None = None) -> dict[str, Any]:
    """Every search of ``runs`` (:data:`RUNS`) ``repeats`` times, after one that warms up, and
    the fit (:func:`fit`); its per-trial and per-report figures, negative where the fit's noise
    made them so, are taken as 0.0 (``fit`` keeps them as fitted)."""
    import ray
    import torch

    from orthotune.search import local_ray_options, loopback_ray
    from orthotune.spaces import parse_space

    torch.set_num_threads(1)  # a trial's one thread (cpus_per_trial 1)
    plans = [(configs, per_trial, every or epochs) for _ in range(repeats) for configs, per_trial, every in runs]
    alone = {plan: trainer_seconds(parse_space(probe_space(plan[0], epochs)), *plan, data_root)
             for plan in dict.fromkeys(plans)}
    cores = cores or min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2)
    done = []
    with loopback_ray():
        ray.init(**{**local_ray_options(), "num_cpus": cores}, log_to_driver=False, logging_level="ERROR")
    try:
        with tempfile.TemporaryDirectory(prefix="service-probe-") as folder:
            # a first search warms Ray's processes and the caches up; not counted
            search_seconds(parse_space(probe_space(2, epochs)), 1, epochs, f"{folder}/store", "warm-up", data_root)
            for index, (configs, per_trial, every) in enumerate(plans):
                space = parse_space(probe_space(configs, epochs))
                wall = search_seconds(space, per_trial, every, f"{folder}/store", f"probe-{index}", data_root)
                trainer = alone[(configs, per_trial, every)]
                ray_trials = math.ceil(configs / per_trial)
                done.append({"configs": configs, "configs_per_trial": per_trial, "report_every": every,
                             "ray_trials": ray_trials, "reports": ray_trials * reports_of(epochs, every),
                             "search_s": wall, "trainer_s": trainer, "overhead_s": wall - trainer})
    finally:
        ray.shutdown()
    fitted = fit(done)
    return {"per_trial_s": max(0.0, fitted["per_trial_s"]), "per_report_s": max(0.0, fitted["per_report_s"]),
            "fit": fitted, "runs": done, "epochs": epochs, "repeats": repeats,
            "measured": measured_on(cores, ray.__version__, torch.__version__)}


def measured_on(cores: int, ray_version: str, torch_version: str) -> dict[str, Any]:
    """Where and when: the date (UTC), the host's CPU and cores, its load, the versions."""
    from orthotune import __version__

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": cpu_name(),
            "cores": cores, "load": list(load) if load else None, "ray": ray_version, "torch": torch_version,
            "orthotune": __version__, "python": platform.python_version(), "command": " ".join(sys.argv)}


def cpu_name() -> str:
    """The CPU's model name where Linux tells it, else the platform's word."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--data-root", default=os.environ.get("ORTHOTUNE_DATA_ROOT"))
    args = parser.parse_args(argv)
    from orthotune.plan._start_probe import _silenced

    with _silenced():  # Ray's and Tune's lines; stdout is the result
        result = measure_overhead(RUNS, args.epochs, args.repeats, args.data_root)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
