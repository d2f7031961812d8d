"""The Ray Tune trainable: a plain function of a config, as in Ray Tune's own examples.

A trial trains one config (all its repeats as one packed model) or, with packing, several
configs that share a pack key. It reports every ``report_every`` epochs: the objective
(``val_acc``: mean over the repeats of each repeat's best validation accuracy so far), the
epoch (ASHA's time attribute), the per-epoch history since the last report (each repeat's
epoch a ``core.EpochRow`` as a plain list), and at the end the full result of every config.
Test accuracy is in the history for the store, never in the objective.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from ray import tune

from orthotune.core import (
    OBJECTIVE,
    REASON_LIMIT,
    ConfigResult,
    EpochReport,
    EpochRow,
    RunResult,
    Status,
    TrainConfig,
    one_line,
)
from orthotune.search._cell_key import cell_key, member_configs
from orthotune.search._objective import RUNG_SCORE, TIME_ATTR, rung_score
from orthotune.training import TrainOptions, choose_device, retain_freed_memory, run_configs, task_data


@dataclass(frozen=True)
class TrialContext:
    """What every trial of a search shares (handed over once via ``tune.with_parameters``)."""

    data_root: str | None
    report_every: int = 10
    threads: int = 1
    device: str | None = None
    rung_board: Any = None  # a RungBoard actor: ASHA per config inside packs
    download: bool = False  # the loaders may fetch missing files into data_root (--download)
    execution: dict[str, bool] = field(default_factory=dict)  # the GPU switches (LaunchOptions.execution)

    def train_options(self) -> TrainOptions:
        """How a trial trains: the search's GPU switches, reports at its cadence, and the
        per-layer gradient norms of the report epochs (the epochs table, Figure 1(b, c))."""
        return TrainOptions(**self.execution, report_every=self.report_every, grad_norms_every=self.report_every)


#: ``ORTHOTUNE_TIMINGS=1`` in a search's environment: each trial's final report also says
#: where its worker's time went (``timings``; the benchmarks' hook, ``instrumentation``, sets it).
TIMINGS_ENV = "ORTHOTUNE_TIMINGS"


@dataclass
class WorkerTimings:
    """Seconds of one trial on its worker: loading the data (once per process), training, and
    the per-epoch bookkeeping and reports to Tune; ``trial_s`` from entering the trainable to
    its last report. ``entered`` and, on the first trial a worker process runs,
    ``process_started`` are clock times (``time.time()``): the driver, which knows when its
    Tune run began, works out how long starting that worker and its imports took (to about a
    second: a process's start time is counted from the boot time, which Linux gives in whole
    seconds). ``pid``, also on a process's first trial, tells which worker ran it;
    ``env_vars``: the variables the trial actor's runtime env sets (one other than the job's
    keeps a trial off the workers Ray started with the job)."""

    entered: float = 0.0
    process_started: float | None = None
    pid: int | None = None
    env_vars: list[str] = field(default_factory=list)
    data_s: float = 0.0
    train_s: float = 0.0
    report_s: float = 0.0
    trial_s: float = 0.0
    started: float = field(default=0.0, repr=False)  # perf_counter at entry

    def to_dict(self) -> dict[str, Any]:
        return {name: value for name, value in asdict(self).items() if name != "started"}


_WORKER_STARTED: list[bool] = []  # whether this process has run a trial before


def _timings() -> WorkerTimings | None:
    if os.environ.get(TIMINGS_ENV, "") in ("", "0"):
        return None
    import psutil
    import ray

    runtime_env = ray.get_runtime_context().runtime_env or {}
    timings = WorkerTimings(entered=time.time(), started=time.perf_counter(),
                            env_vars=sorted(runtime_env.get("env_vars") or {}))
    if not _WORKER_STARTED:
        timings.process_started, timings.pid = psutil.Process().create_time(), os.getpid()
        _WORKER_STARTED.append(True)
    return timings


def train_trial(config: dict[str, Any], context: TrialContext) -> None:
    timings = _timings()
    torch.set_num_threads(context.threads)
    configs = [TrainConfig.from_dict(values) for values in member_configs(config)]
    ids = [member_trial_id(tune.get_context().get_trial_id() or "trial", k, len(configs))
           for k in range(len(configs))]
    cells = [cell_key(values) for values in member_configs(config)]
    reporter = _Reporter(context.report_every, context.rung_board, ids, cells)
    # A worker only trains: it keeps freed activations for the next epoch (glibc thresholds),
    # which a library call must not do to its caller's process.
    retain_freed_memory()
    # The callback runs at the report cadence; each call carries every epoch since the last.
    options = context.train_options()
    device = choose_device(context.device)
    try:
        if timings is not None:  # loaded here to be timed; run_configs finds it in the process's cache
            first = configs[0]
            loading = time.perf_counter()
            task_data(first.dataset, first.setting, context.data_root, str(device), first.directed, context.download)
            timings.data_s = time.perf_counter() - loading
        training = time.perf_counter()
        results = run_configs(configs, device, context.data_root, reporter, options, context.download)
        if timings is not None:
            timings.train_s = time.perf_counter() - training - reporter.seconds
    except Exception as error:  # noqa: BLE001  (any error of this trial is this trial's failure)
        # Stored as failed with its reason, and the search goes on. Raising would make Tune
        # retry it (its FailureConfig is for dead workers: an error would only repeat) and
        # lose the reason. Tune's own stop (SystemExit) and Ctrl-C pass through.
        results = failed_results(configs, error_line(error))
    tune.report(reporter.final_metrics(results, timings))


def error_line(error: BaseException) -> str:
    """One line for the store: the exception's type and its message (``core.one_line``)."""
    return one_line(error, typed=True, limit=REASON_LIMIT)


def failed_results(configs: list[TrainConfig], reason: str) -> list[ConfigResult]:
    """Every repeat of every config failed for ``reason`` (nothing was selected)."""
    return [ConfigResult(config, [RunResult(split, seed, status=Status.FAILED, reason=reason)
                                  for split, seed in config.runs()], 0.0, 0.0) for config in configs]


def member_trial_id(tune_trial_id: str, member: int, members: int) -> str:
    """The store's trial id of a config: the Tune trial's, suffixed inside a pack."""
    return tune_trial_id if members == 1 else f"{tune_trial_id}-{member}"


class _Reporter:
    """Collects per-epoch values and hands them to Tune at the report cadence."""

    def __init__(self, every: int, rung_board: Any = None, member_ids: list[str] | None = None,
                 cells: list[str] | None = None) -> None:
        self.every, self.rung_board, self.member_ids = every, rung_board, member_ids or []
        self.cells = cells or []
        self.pending: list[list[float]] = []
        self.objective = [0.0]
        self.min_val_loss: dict[int, dict[int, float]] = {}  # member -> repeat -> lowest so far
        self.epoch = 0
        self.seconds = 0.0  # spent here: the per-epoch bookkeeping and the reports to Tune

    def __call__(self, report: EpochReport) -> list[int]:
        """Returns the configs to stop now (ASHA's per-config verdicts inside a pack)."""
        start = time.perf_counter()
        try:
            return self._take(report)
        finally:
            self.seconds += time.perf_counter() - start

    def _take(self, report: EpochReport) -> list[int]:
        self.epoch = report.epoch
        self.objective = report.best_val
        for values in report.history:  # rows of the epochs table: each run in each epoch it trained
            for member, runs in enumerate(values.trained):
                for repeat, trained in enumerate(runs):
                    if trained:
                        self._lowest_loss(member, repeat, values.val_loss[member][repeat])
                        self.pending.append(EpochRow(
                            member, repeat, values.epoch, values.train_loss[member][repeat],
                            values.val_acc[member][repeat], values.test_acc[member][repeat],
                            values.val_loss[member][repeat], values.grad_norms[member][repeat] or None).to_list())
        # the last epoch goes out with the final report, so ASHA never sees a trial end twice
        if report.epoch % self.every != 0 or not any(report.active):
            return []
        so_far = [[asdict(run) for run in runs] for runs in report.runs]
        tune.report(self._metrics(final=False, members=report.best_val, extra={"runs": so_far}))
        return self._verdicts(report)

    def _verdicts(self, report: EpochReport) -> list[int]:
        if self.rung_board is None:
            return []
        import ray

        live = [k for k, active in enumerate(report.active) if active]
        scores = self.scores(report.best_val)
        asks = [(self.member_ids[k], self.cells[k], report.epoch, scores[k]) for k in live]
        stops = ray.get(self.rung_board.decide.remote(asks))
        return [k for k, stop in zip(live, stops) if stop]

    def _lowest_loss(self, member: int, repeat: int, loss: float) -> None:
        repeats = self.min_val_loss.setdefault(member, {})
        known = repeats.get(repeat, math.inf)  # inf: no finite loss yet
        repeats[repeat] = min(known, loss) if math.isfinite(loss) else known

    def scores(self, objectives: list[float]) -> list[float]:
        """Each config's ASHA score: its objective, ties broken by its validation loss."""
        return [rung_score(objective, list(self.min_val_loss.get(member, {}).values()) or [math.inf])
                for member, objective in enumerate(objectives)]

    def _metrics(self, final: bool, members: list[float], extra: dict | None = None) -> dict[str, Any]:
        history, self.pending = self.pending, []
        # a trial group's Tune-level score is its best member's (the rung board ranks members)
        return {OBJECTIVE: max(members), RUNG_SCORE: max(self.scores(list(members))), TIME_ATTR: self.epoch,
                "member_val_acc": list(members), "history": history, "final": final, **(extra or {})}

    def final_metrics(self, results: list[ConfigResult], timings: WorkerTimings | None = None) -> dict[str, Any]:
        start = time.perf_counter()
        objectives = [_objective(r) for r in results]
        extra: dict[str, Any] = {"results": [result_to_dict(r) for r in results]}
        if timings is not None:
            timings.report_s = self.seconds + time.perf_counter() - start
            timings.trial_s = time.perf_counter() - timings.started
            extra["timings"] = timings.to_dict()
        return self._metrics(True, objectives, extra)



def _objective(result: ConfigResult) -> float:
    value = result.mean(OBJECTIVE)
    return value if result.status != Status.FAILED and math.isfinite(value) else 0.0


def result_to_dict(result: ConfigResult) -> dict[str, Any]:
    return {"runs": [asdict(r) for r in result.runs], "seconds": result.seconds,
            "seconds_per_epoch": result.seconds_per_epoch, "device": result.device}
