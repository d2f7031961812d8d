"""Where the launch path's wall goes (``bench/throughput.py --breakdown``): timers around the
driver's parts and the workers' own timings, as core-seconds per part."""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any


class Breakdown:
    """Where the launch path's wall goes (``--breakdown``).

    The driver runs in this process: its parts are timed by wrapping orthotune's and Ray's
    own methods for the run (searcher, scheduler, the recorder's store writes and history,
    TensorBoard, the Optuna journal, the progress display, ``Tuner.fit``). The workers' parts
    come from each trial's final report, which says where its worker's time went when
    ``ORTHOTUNE_TIMINGS=1`` (set by orthotune's benchmark hook, entered before Ray starts so
    that the workers inherit it)."""

    #: Ray's and Optuna's own parts of the driver (orthotune's come from its benchmark hook,
    #: ``orthotune.search.instrumentation``).
    LIBRARIES = {
        "scheduler": ("ray.tune.schedulers", "FIFOScheduler",
                      ("on_trial_add", "on_trial_result", "on_trial_complete", "choose_trial_to_run")),
        "Optuna journal": ("optuna.storages.journal", "JournalFileBackend", ("append_logs", "read_logs")),
    }

    def __init__(self) -> None:
        self.driver: dict[str, float] = {}
        self.before: dict[str, float] = {}
        self.after: dict[str, float] = {}
        self.workers: list[dict[str, Any]] = []
        self.launch_started = self.fit_started = 0.0  # perf_counter readings
        self.fit_clock = 0.0  # time.time() when Tune's run began
        self.idle_workers: set[int] = set()  # the workers Ray had started when the launch began
        self.fit_s = self.launch_s = 0.0
        self.tunes_env: dict[str, str] = {}

    @contextlib.contextmanager
    def timers(self):
        """Timers around the driver's parts (orthotune's through its benchmark hook, then
        Ray's and Optuna's) and ``Tuner.fit``; each ended trial's worker timings collected."""
        import importlib

        from ray import tune
        from ray.tune.execution import class_cache

        from orthotune.search.instrumentation import instrumented

        # what Ray Tune adds to its trial actors' runtime env (a search leaves it out, _startup)
        self.tunes_env = dict(class_cache.DEFAULT_ENV_VARS)
        patched: list[tuple[Any, str, Any]] = []
        with instrumented(self._timed, self._collect):
            for part, (module, owner, methods) in self.LIBRARIES.items():
                cls = getattr(importlib.import_module(module), owner)
                for name in methods:
                    patched.append((cls, name, getattr(cls, name)))
                    setattr(cls, name, self._timed(part, getattr(cls, name)))
            patched.append((tune.Tuner, "fit", tune.Tuner.fit))
            tune.Tuner.fit = self._timed_fit(tune.Tuner.fit)
            try:
                yield self
            finally:
                for cls, name, original in reversed(patched):
                    setattr(cls, name, original)

    def _timed(self, part: str, method):
        self.driver.setdefault(part, 0.0)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.driver[part] += time.perf_counter() - start
        return timed

    def _timed_fit(self, fit):
        def timed(tuner, *args, **kwargs):
            self.fit_started, self.fit_clock = time.perf_counter(), time.time()
            try:
                return fit(tuner, *args, **kwargs)
            finally:
                self.fit_s = time.perf_counter() - self.fit_started
        return timed

    def _collect(self, timings: dict[str, Any]) -> None:
        self.workers.append(timings)

    def rows(self, cores: int) -> list[tuple[str, float]]:
        """(part, core-seconds); the parts add up to cores x (Ray start + launch + shutdown)."""
        def total(key: str) -> float:
            return sum(w.get(key, 0.0) for w in self.workers)

        # a worker's start: from Tune's run beginning (Ray prestarts idle workers at
        # ray.init) or the process's birth, whichever is later, to its first trial's entry
        starts = sum(w["entered"] - max(w["process_started"], self.fit_clock)
                     for w in self.workers if w.get("process_started") is not None)
        busy = starts + total("trial_s")
        inside = total("trial_s") - total("data_s") - total("train_s") - total("report_s")
        setup = self.fit_started - self.launch_started
        rows = [(name, cores * seconds) for name, seconds in self.before.items()]
        rows += [("launch before Tune runs (checks, store, lease, planning)", cores * setup),
                 ("worker start and imports, to each worker's first trial", starts),
                 ("data loading (once per worker)", total("data_s")),
                 ("training (run_configs)", total("train_s")),
                 ("per-epoch bookkeeping and reports to Tune (trainable)", total("report_s")),
                 ("rest of the trainable (configs, final result)", inside),
                 ("cores without a trial during Tune's run", cores * self.fit_s - busy),
                 ("launch after Tune's run (record, outcome)", cores * (self.launch_s - self.fit_s - setup))]
        rows += [(name, cores * seconds) for name, seconds in self.after.items()]
        return rows

    def markdown(self, args: argparse.Namespace, floor: float | None) -> str:
        cores = args.cores
        rows = self.rows(cores)
        whole = sum(value for _, value in rows)
        lines = [f"Breakdown of orthotune's launch path: Cora full, {args.configs} configs x {args.epochs} epochs, "
                 f"{args.backbone} depth {args.depth}, {cores} cores, {len(self.workers)} trials "
                 f"({self.prestarted()} of them on workers Ray started at ray.init); "
                 f"Ray start to shutdown {whole / cores:.2f} s",
                 "", "| part | core-seconds | share |", "|---|---|---|"]
        lines += [f"| {name} | {value:.2f} | {100 * value / whole:.1f}% |" for name, value in rows]
        lines.append(f"| all (cores x wall) | {whole:.2f} | 100% |")
        if floor is not None:
            lines.append(f"\ncompute floor (each config alone, no Ray): {floor * cores:.2f} core-seconds; "
                         f"training inside the launch path / floor: {self._training() / (floor * cores):.2f}; "
                         f"launch wall / floor: {self.launch_s / floor:.2f}")
        lines += ["", "Driver work during Tune's run (this process, on the same cores as the trials):", "",
                  "| part | seconds |", "|---|---|"]
        lines += [f"| {name} | {value:.3f} |" for name, value in self.driver.items()]
        return "\n".join(lines)

    def summary(self, args: argparse.Namespace, floor: float | None) -> dict[str, Any]:
        return {"configs": args.configs, "epochs": args.epochs, "cores": args.cores, "trials": len(self.workers),
                "trials_on_ray_init_workers": self.prestarted(),
                # a variable of Ray Tune's in a trial actor's runtime env keeps it off the
                # workers Ray started at ray.init (a search leaves them out, _startup)
                "trials_on_the_jobs_runtime_env": sum(1 for w in self.workers
                                                      if not set(w.get("env_vars", ())) & set(self.tunes_env)),
                "floor_s": floor, "launch_s": self.launch_s,
                "fit_s": self.fit_s,
                "core_seconds": dict(self.rows(args.cores)), "driver_s": self.driver}

    def prestarted(self) -> int:
        """How many trials ran on a worker Ray started with the job (at ``ray.init``, idle
        when the launch began) rather than one started for the search. Not every one can:
        Ray ends a worker idle for a second once the free CPUs are fewer than its idle
        workers ("Worker exited because it was idle for a long time" in its raylet.out), and
        Tune reserves the trials' CPUs (placement groups) before it places their actors, so
        on a busy machine a prestarted worker may end in between and a trial start a new one."""
        return sum(1 for w in self.workers if w.get("pid") in self.idle_workers)

    def _training(self) -> float:
        return sum(w.get("train_s", 0.0) for w in self.workers)


def idle_ray_workers() -> set[int]:
    """Process ids of this machine's idle Ray workers (their process title is ``ray::IDLE``)."""
    import psutil

    idle = set()
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if (process.info["cmdline"] or [""])[0].startswith("ray::IDLE"):
                idle.add(process.pid)
    return idle
