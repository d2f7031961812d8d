"""Launch and resume searches with Ray Tune's Tuner, its schedulers and Optuna's samplers.

Trials run on a local embedded Ray by default, or on a cluster given its address. A search
over several cells (dataset, backbone, depth, arm) gives each cell its own searcher and
``samples`` trainings (:class:`CellSearcher`) and its own ASHA (:class:`CellScheduler`).
Every trial is written to the store by :class:`StoreRecorder`; progress is drawn by
:class:`SearchProgress`, TensorBoard files by :class:`TensorBoardLogger`, and each cell's
Optuna study lives in an Optuna storage (``optuna-dashboard``). Ray Tune's own experiment
lives in the store too (``tune/NAME``), which is what ``--resume`` restores.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orthotune.core import ConfigError, OrthotuneError, Status, check
from orthotune.search.store import Store, now
from orthotune.search.training import DataRoot
from orthotune.search.tune._cells import CellSearcher, cell_key, space_cell_key
from orthotune.search.tune._grouping import GroupSearcher, RungBoard, group_points
from orthotune.search.tune._live import (
    TensorBoardLogger,
    optuna_storage,
    optuna_storage_location,
    tensorboard_folder,
)
from orthotune.search.tune._options import (
    MODES,
    OBJECTIVE,
    SCHEDULERS,
    SEARCHERS,
    LaunchOptions,
    SearchOutcome,
    grid_search,
)
from orthotune.search.tune._progress import SearchProgress
from orthotune.search.tune._recorder import StoreRecorder, member_statuses
from orthotune.search.tune._space import SearchSpace
from orthotune.search.tune._trainable import TrialContext, member_configs, train_trial


@dataclass
class SearchPlan:
    """What Tune runs: the search algorithm, the Tune-level scheduler, the number of Tune
    trials, and the number of configs that makes (the progress display's total)."""

    search_alg: Any
    scheduler: Any
    num_samples: int
    configs: int


def launch(options: LaunchOptions, progress: bool | str = True) -> SearchOutcome:
    """Run a new search. ``progress``: True (a bar on a terminal, plain lines elsewhere),
    ``"bar"``, ``"plain"``, or False (nothing)."""
    _data_root(options.data_root)  # a missing data root fails here, not in every trial
    store = Store.open(options.store, create=True)
    if store.exists(f"searches/{options.name}.json"):
        raise OrthotuneError(f"search {options.name!r} already exists in store {options.store!r}; "
                             f"resume it with --resume {options.name} or pick another --name")
    with tune_settings():
        fits = _start_ray(options)
        tuner = _tuner(options, store, progress, options.concurrency or fits)
        started = now().isoformat()
        store.save_search_meta(options.name, {"options": options.to_meta(), "state": "running",
                                              "created_at": started, "session_started_at": started,
                                              "elapsed_s": 0.0})
        return _fit(tuner, store, options)


def resume(store_uri: str, name: str, parse_space: Callable[[dict[str, Any]], SearchSpace],
           address: str | None = None, progress: bool | str = True) -> SearchOutcome:
    """Continue a search whose driver died: finished trials are kept, the rest run."""
    from ray import tune

    store = Store.open(store_uri)
    meta = store.search_meta(name)
    options = LaunchOptions.from_meta({**meta["options"], "store": store_uri,
                                       "address": address or meta["options"].get("address")}, parse_space)
    path = f"{store.tune_path()}/{name}"
    if not tune.Tuner.can_restore(path):
        raise OrthotuneError(f"search {name!r} has no Ray Tune state at {path!r} to resume from")
    with tune_settings():
        _start_ray(options)
        tuner = tune.Tuner.restore(path, trainable=_trainable(options), resume_unfinished=True,
                                   resume_errored=False, restart_errored=False)
        elapsed = prior_elapsed(meta, store)
        _replace_callbacks(tuner, _callbacks(options, store, progress, planned_configs(options), elapsed))
        started = now().isoformat()
        store.save_search_meta(name, {**meta, "state": "running", "resumed_at": started,
                                      "session_started_at": started, "elapsed_s": elapsed})
        return _fit(tuner, store, options)


def prior_elapsed(meta: dict[str, Any], store: Store) -> float:
    """Seconds the search ran before this session: the sessions that ended cleanly, plus,
    for one whose driver died, the time until its last stored trial."""
    elapsed = float(meta.get("elapsed_s") or 0.0)
    started = meta.get("session_started_at") or meta.get("created_at")
    if meta.get("state") != "running" or not started:
        return elapsed  # the last session recorded its time when it ended
    rows = store.read("trials", search=meta["options"]["name"]).column("finished_at").to_pylist()
    last = max((t for t in rows if t is not None), default=None)
    if last is None:
        return elapsed
    return elapsed + max(0.0, (last - datetime.fromisoformat(started)).total_seconds())


def _replace_callbacks(tuner, callbacks: list) -> None:
    """Give a restored Tuner this session's callbacks (Tune restores the first session's,
    pickled: an old store path, progress mode and clock). Under Ray Client the tuner runs
    remotely and keeps the pickled ones."""
    local = getattr(tuner, "_local_tuner", None)
    if local is not None:
        local.get_run_config().callbacks = callbacks


def _fit(tuner, store: Store, options: LaunchOptions) -> SearchOutcome:
    meta = store.search_meta(options.name)
    started = datetime.fromisoformat(meta.get("session_started_at") or now().isoformat())

    def ended(state: str, **extra: Any) -> dict[str, Any]:
        ran = (now() - started).total_seconds()
        return {**meta, "state": state, "elapsed_s": float(meta.get("elapsed_s") or 0.0) + ran, **extra}

    try:
        grid = tuner.fit()
    except KeyboardInterrupt:
        store.save_search_meta(options.name, ended("interrupted"))
        raise
    outcome = _outcome(options.name, grid)
    store.save_search_meta(options.name, ended("finished", finished_at=now().isoformat(), counts=outcome.counts))
    return outcome


def _callbacks(options: LaunchOptions, store: Store, progress: bool | str, configs: int,
               elapsed_before: float = 0.0) -> list:
    """The recorder (the store), the live views, and the progress display."""
    callbacks: list = [StoreRecorder(options.store, options.name)]
    folder = tensorboard_folder(store, options.name) if options.tensorboard else None
    if folder is not None:
        callbacks.append(TensorBoardLogger(folder))
    if progress and progress != "off":
        mode = "auto" if progress is True else str(progress)
        check(mode in MODES, f"progress={progress!r} must be one of {', '.join(MODES)} or true/false")
        callbacks.append(SearchProgress(configs, mode=mode, elapsed_before=elapsed_before))
    return callbacks


def _tuner(options: LaunchOptions, store: Store, progress: bool | str, concurrency: int):
    from ray import tune

    storage = None
    if options.searcher != "grid":  # the grid has no Optuna study
        storage = optuna_storage(optuna_storage_location(options.optuna_storage, store, options.name))
    planned = plan(options, storage)
    callbacks = _callbacks(options, store, progress, planned.configs)
    return tune.Tuner(
        _trainable(options),
        tune_config=tune.TuneConfig(
            search_alg=planned.search_alg, scheduler=planned.scheduler, num_samples=planned.num_samples,
            max_concurrent_trials=concurrency,
            reuse_actors=True,  # a fresh worker spends seconds importing torch and PyG
        ),
        run_config=tune.RunConfig(
            name=options.name, storage_path=store.tune_path(), callbacks=callbacks, verbose=0,
            failure_config=tune.FailureConfig(max_failures=0),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        ),
    )


def plan(options: LaunchOptions, storage: Any = None) -> SearchPlan:
    """Search algorithm, Tune-level scheduler and number of Tune trials.

    Sampled searches get one searcher per cell (``samples`` trainings each); ``storage`` is
    the Optuna storage their studies are written to (one study per cell, named
    ``SEARCH/cell``). With several configs per trial (a trial group, trained as one packed
    model), Tune runs the groups FIFO and ASHA decides per config on the rung board (one
    ASHA per cell there too).
    """
    space, group = options.space, options.configs_per_trial
    if options.searcher == "grid":
        points = list(options.points) if options.points is not None else space.grid()
        if group == 1:
            return SearchPlan(grid_search(points), SCHEDULERS.get(options.scheduler)(space), len(points), len(points))
        groups = group_points(points, group)
        return SearchPlan(grid_search(groups), SCHEDULERS.get("fifo")(space), len(groups), len(points))
    cells = space.cells()
    samples = options.samples or space.samples
    make = SEARCHERS.get(options.searcher)
    searchers = {space_cell_key(cell): make(cell, options.seed + index, storage=storage,
                                            study_name=f"{options.name}/{space_cell_key(cell)}")
                 for index, cell in enumerate(cells)}
    sizes = {space_cell_key(cell): _grid_size(cell) for cell in cells}
    searcher = CellSearcher(searchers, samples, sizes, metric=OBJECTIVE, mode="max")
    total = samples * len(cells)  # Tune's bound; the searcher finishes spent cells earlier
    configs = planned_configs(options)
    if group == 1:
        return SearchPlan(searcher, SCHEDULERS.get(options.scheduler)(space), total, configs)
    grouped = GroupSearcher(searcher, group, total, metric=OBJECTIVE, mode="max")
    return SearchPlan(grouped, SCHEDULERS.get("fifo")(space), total, configs)


def planned_configs(options: LaunchOptions) -> int:
    """How many configs a search trains at most: the grid's points, or per cell ``samples``
    (fewer where the cell has fewer distinct configs: nothing trains twice)."""
    if options.searcher == "grid":
        return len(options.points) if options.points is not None else len(options.space.grid())
    samples = options.samples or options.space.samples
    return sum(min(samples, _grid_size(cell) or samples) for cell in options.space.cells())


def _grid_size(cell: SearchSpace) -> int | None:
    """How many distinct configs a cell has; None when a dimension is continuous."""
    try:
        return len(cell.grid())
    except ConfigError:
        return None


def _trainable(options: LaunchOptions):
    from ray import tune

    threads = max(1, int(options.cpus_per_trial))
    board = None
    if options.configs_per_trial > 1 and options.scheduler == "asha":  # one ASHA per cell, on the board
        board = RungBoard.remote(SCHEDULERS.get("asha")(options.space))
    context = TrialContext(_data_root(options.data_root), options.report_every, threads, rung_board=board)
    resources = {"cpu": options.cpus_per_trial, "gpu": options.gpus_per_trial}
    return tune.with_resources(tune.with_parameters(train_trial, context=context), resources)


#: Settings Ray Tune reads only from the environment (it has no API for them): our progress
#: display replaces Tune's tables; the store and our TensorBoard logger replace Tune's own
#: JSON/CSV/TBX loggers; Tune saves its experiment state every 5 s (how much a killed driver
#: replays). Set only while a search runs (a value the user set wins), then restored.
TUNE_SETTINGS = {"RAY_AIR_NEW_OUTPUT": "0", "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
                 "TUNE_GLOBAL_CHECKPOINT_S": "5"}


@contextmanager
def tune_settings() -> Iterator[None]:
    """:data:`TUNE_SETTINGS` in the environment for the duration of a search only."""
    saved = {key: os.environ.get(key) for key in TUNE_SETTINGS}
    for key, value in TUNE_SETTINGS.items():
        os.environ.setdefault(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _start_ray(options: LaunchOptions) -> int:
    """A local embedded Ray (dashboard off, bound to localhost), or the given cluster.

    Returns how many trials its resources fit at once: the default concurrency. Without a
    limit, Tune with Optuna and reused actors ran one trial at a time on 2 CPUs (measured:
    1 running, 2 pending throughout), so orthotune always sets one.
    """
    import ray

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
    """Counts by status and the best config per cell, per config (trial groups unpacked), as Ray
    Tune saw them; failed configs are never best."""
    counts: Counter = Counter()
    best: dict[str, tuple[float, dict[str, Any]]] = {}
    for result in grid:
        members = member_configs(result.config)
        last = result.metrics or {}
        statuses = member_statuses(last, result.error is not None, len(members))
        counts.update(statuses)
        for config, status, objective in zip(members, statuses, last.get("member_val_acc") or []):
            cell = cell_key(config)
            if status != Status.FAILED and (cell not in best or objective > best[cell][0]):
                best[cell] = (objective, config)
    outcome = SearchOutcome(name, dict(counts), best_by_cell=dict(sorted(best.items())))
    if best:
        outcome.best_objective, outcome.best_config = max(best.values(), key=lambda entry: entry[0])
    return outcome
