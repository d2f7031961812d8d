"""Launch and resume searches with Ray Tune's Tuner, its schedulers and Optuna's samplers.

Trials run on a local embedded Ray by default, or on a cluster given its address. Every
trial is written to the store by :class:`~search._recorder.StoreRecorder`; Ray Tune's own
experiment lives in the store too (``tune/NAME``), which is what ``--resume`` restores.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from orthotune.core import OrthotuneError, Registry, check
from orthotune.search.store import Store, check_search_name, now
from orthotune.search.training import DataRoot
from orthotune.search.tune._packing import PackSearcher, PointSearcher, RungBoard, pack_points
from orthotune.search.tune._progress import ProgressLine
from orthotune.search.tune._recorder import StoreRecorder, member_statuses
from orthotune.search.tune._space import SearchSpace
from orthotune.search.tune._trainable import OBJECTIVE, TIME_ATTR, TrialContext, member_configs, train_trial

SEARCHERS: Registry[Callable[[SearchSpace, int], Any]] = Registry("search algorithm")
SCHEDULERS: Registry[Callable[[SearchSpace], Any]] = Registry("scheduler")


@SEARCHERS.register("optuna")
def _optuna(space: SearchSpace, seed: int):
    return _optuna_search(space, "TPESampler", seed=seed)


@SEARCHERS.register("random")
def _random(space: SearchSpace, seed: int):
    return _optuna_search(space, "RandomSampler", seed=seed)


@SEARCHERS.register("grid")
def _grid(space: SearchSpace, seed: int):
    return _grid_search(space.grid())


def _grid_search(points: list[dict[str, Any]]):
    return PointSearcher(points, metric=OBJECTIVE, mode="max")


def _optuna_search(space: SearchSpace, sampler: str, **kwargs):
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return OptunaSearch(space=space.define_by_run, metric=OBJECTIVE, mode="max",
                        sampler=getattr(optuna.samplers, sampler)(**kwargs))


@SCHEDULERS.register("asha")
def _asha(space: SearchSpace):
    from ray.tune.schedulers import ASHAScheduler

    # stop_last_trials=False: a trial that reaches max_t completes on its own report
    return ASHAScheduler(time_attr=TIME_ATTR, metric=OBJECTIVE, mode="max", max_t=space.max_epochs(),
                         grace_period=space.grace_period, reduction_factor=space.reduction_factor,
                         stop_last_trials=False)


@SCHEDULERS.register("fifo")
def _fifo(space: SearchSpace):
    from ray.tune.schedulers import FIFOScheduler

    return FIFOScheduler()


@dataclass(frozen=True)
class LaunchOptions:
    """How to run one search; validated here, typed afterwards."""

    store: str
    name: str
    space: SearchSpace
    samples: int | None = None
    searcher: str = "optuna"
    scheduler: str = "asha"
    address: str | None = None
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    concurrency: int | None = None
    data_root: str | None = None
    seed: int = 0
    report_every: int = 10
    pack: int = 1
    points: tuple[dict[str, Any], ...] | None = None  # explicit configs for the grid searcher

    def __post_init__(self) -> None:
        check_search_name(self.name)
        SEARCHERS.get(self.searcher)
        SCHEDULERS.get(self.scheduler)
        check(self.samples is None or self.samples >= 1, f"samples={self.samples!r} must be >= 1")
        check(self.cpus_per_trial > 0, f"cpus_per_trial={self.cpus_per_trial!r} must be > 0")
        check(self.gpus_per_trial >= 0, f"gpus_per_trial={self.gpus_per_trial!r} must be >= 0")
        check(self.gpus_per_trial <= 1 or float(self.gpus_per_trial).is_integer(),
              f"gpus_per_trial={self.gpus_per_trial!r} must be a fraction <= 1 or a whole number")
        check(self.concurrency is None or self.concurrency >= 1,
              f"concurrency={self.concurrency!r} must be >= 1")
        check(self.report_every >= 1, f"report_every={self.report_every!r} must be >= 1")
        check(isinstance(self.pack, int) and self.pack >= 1, f"pack={self.pack!r} must be an integer >= 1")
        check(self.points is None or self.searcher == "grid",
              f"explicit points need searcher='grid', got searcher={self.searcher!r}")

    def to_meta(self) -> dict[str, Any]:
        values = asdict(self)
        values["space"] = self.space.to_dict()
        return values

    @classmethod
    def from_meta(cls, values: dict[str, Any], parse_space: Callable[[dict[str, Any]], SearchSpace]) -> LaunchOptions:
        """Options saved by :meth:`to_meta`; ``parse_space`` reads the space back (the spaces
        layer sits above this one, so it is handed in)."""
        values = dict(values)
        values["space"] = parse_space(values["space"])
        if values.get("points") is not None:
            values["points"] = tuple(values["points"])
        return cls(**values)


@dataclass
class SearchOutcome:
    """What a finished (or interrupted) search left: counts by status and the best trial."""

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    best_config: dict[str, Any] | None = None
    best_objective: float | None = None


def launch(options: LaunchOptions, progress: bool = True) -> SearchOutcome:
    _data_root(options.data_root)  # a missing data root fails here, not in every trial
    store = Store.open(options.store, create=True)
    if store.exists(f"searches/{options.name}.json"):
        raise OrthotuneError(f"search {options.name!r} already exists in store {options.store!r}; "
                             f"resume it with --resume {options.name} or pick another --name")
    fits = _start_ray(options)
    tuner = _tuner(options, store, progress, options.concurrency or fits)
    store.save_search_meta(options.name, {"options": options.to_meta(), "state": "running",
                                          "created_at": now().isoformat()})
    return _fit(tuner, store, options)


def resume(store_uri: str, name: str, parse_space: Callable[[dict[str, Any]], SearchSpace],
           address: str | None = None, progress: bool = True) -> SearchOutcome:
    """Continue a search whose driver died: finished trials are kept, the rest run."""
    from ray import tune

    store = Store.open(store_uri)
    meta = store.search_meta(name)
    options = LaunchOptions.from_meta({**meta["options"], "store": store_uri,
                                       "address": address or meta["options"].get("address")}, parse_space)
    path = f"{store.tune_path()}/{name}"
    if not tune.Tuner.can_restore(path):
        raise OrthotuneError(f"search {name!r} has no Ray Tune state at {path!r} to resume from")
    _start_ray(options)
    tuner = tune.Tuner.restore(path, trainable=_trainable(options), resume_unfinished=True,
                               resume_errored=False, restart_errored=False)
    store.save_search_meta(name, {**meta, "state": "running", "resumed_at": now().isoformat()})
    return _fit(tuner, store, options)


def _fit(tuner, store: Store, options: LaunchOptions) -> SearchOutcome:
    meta = store.search_meta(options.name)
    try:
        grid = tuner.fit()
    except KeyboardInterrupt:
        store.save_search_meta(options.name, {**meta, "state": "interrupted"})
        raise
    outcome = _outcome(options.name, grid)
    store.save_search_meta(options.name, {**meta, "state": "finished", "finished_at": now().isoformat(),
                                          "counts": outcome.counts})
    return outcome


def _tuner(options: LaunchOptions, store: Store, progress: bool, concurrency: int):
    from ray import tune

    search_alg, scheduler, samples = _plan(options)
    callbacks = [StoreRecorder(options.store, options.name)] + ([ProgressLine()] if progress else [])
    return tune.Tuner(
        _trainable(options),
        tune_config=tune.TuneConfig(
            search_alg=search_alg, scheduler=scheduler, num_samples=samples,
            max_concurrent_trials=concurrency,
            reuse_actors=True,  # a fresh worker spends seconds importing torch and PyG
        ),
        run_config=tune.RunConfig(
            name=options.name, storage_path=store.tune_path(), callbacks=callbacks, verbose=0,
            failure_config=tune.FailureConfig(max_failures=0),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        ),
    )


def _plan(options: LaunchOptions) -> tuple[Any, Any, int]:
    """Search algorithm, Tune-level scheduler and number of Tune trials.

    Packed, Tune runs packs FIFO and ASHA decides per config on the rung board.
    """
    space, pack = options.space, options.pack
    samples = options.samples or space.samples
    if options.searcher == "grid":
        points = list(options.points) if options.points is not None else space.grid()
        if pack == 1:
            return _grid_search(points), SCHEDULERS.get(options.scheduler)(space), len(points)
        packs = pack_points(points, pack)
        return _grid_search(packs), SCHEDULERS.get("fifo")(space), len(packs)
    searcher = SEARCHERS.get(options.searcher)(space, options.seed)
    if pack == 1:
        return searcher, SCHEDULERS.get(options.scheduler)(space), samples
    packed = PackSearcher(searcher, pack, samples, metric=OBJECTIVE, mode="max")
    return packed, SCHEDULERS.get("fifo")(space), samples


def _trainable(options: LaunchOptions):
    from ray import tune

    threads = max(1, int(options.cpus_per_trial))
    board = None
    if options.pack > 1 and options.scheduler == "asha":
        board = RungBoard.remote(SCHEDULERS.get("asha")(options.space))
    context = TrialContext(_data_root(options.data_root), options.report_every, threads, rung_board=board)
    resources = {"cpu": options.cpus_per_trial, "gpu": options.gpus_per_trial}
    return tune.with_resources(tune.with_parameters(train_trial, context=context), resources)


def _start_ray(options: LaunchOptions) -> int:
    """A local embedded Ray (dashboard off, bound to localhost), or the given cluster.

    Returns how many trials its resources fit at once: the default concurrency. Without a
    limit, Tune with Optuna and reused actors ran one trial at a time on 2 CPUs (measured:
    1 running, 2 pending throughout), so orthotune always sets one.
    """
    import ray

    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # our progress line replaces Tune's tables
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "5")  # how much a killed driver replays
    # Without Tune's JSON/CSV loggers (the store is the record) its result grid warns once
    # per trial that it found no metrics files: thousands of lines for a large search.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    if not ray.is_initialized() and options.address:
        ray.init(address=options.address, log_to_driver=False)
    elif not ray.is_initialized():
        ray.init(include_dashboard=False, dashboard_host="127.0.0.1", log_to_driver=False,
                 configure_logging=True, logging_level="ERROR")
    resources = ray.cluster_resources()
    if options.gpus_per_trial and not resources.get("GPU"):
        raise OrthotuneError(f"gpus_per_trial={options.gpus_per_trial} but the Ray cluster has no GPU")
    fits = int(resources.get("CPU", 1) // options.cpus_per_trial)
    if options.gpus_per_trial:
        fits = min(fits, int(resources.get("GPU", 0) // options.gpus_per_trial))
    return max(1, fits)


def _data_root(option: str | None) -> str | None:
    """The data root the workers read (absolute), or None to let their loaders download."""
    root = DataRoot.resolve(option)
    return str(root.path) if root.explicit else None


def _outcome(name: str, grid) -> SearchOutcome:
    """Counts by status and the best config, per config (packs unpacked), as Ray Tune saw them."""
    counts: Counter = Counter()
    best: tuple[float, dict] | None = None
    for result in grid:
        members = member_configs(result.config)
        last = result.metrics or {}
        counts.update(member_statuses(last, result.error is not None, len(members)))
        for config, objective in zip(members, last.get("member_val_acc") or []):
            if best is None or objective > best[0]:
                best = (objective, config)
    outcome = SearchOutcome(name, dict(counts))
    if best is not None:
        outcome.best_objective, outcome.best_config = best
    return outcome
