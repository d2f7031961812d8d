"""Launch and resume searches with Ray Tune's Tuner, its schedulers and Optuna's samplers.

Trials run on a local embedded Ray by default, or on a cluster given its address. A search
over several cells (dataset, backbone, depth, arm) gives each cell its own searcher and
``samples`` trainings (:class:`CellSearcher`) and its own ASHA (:class:`CellScheduler`).
Every trial is written to the store by :class:`StoreRecorder`; progress is drawn by
:class:`SearchProgress`, TensorBoard files by :class:`TensorBoardLogger`, and each cell's
Optuna study lives in an Optuna storage (``optuna-dashboard``).

A search's record (``searches/NAME.json``) says where it stands (``SearchState``): running
(its driver holds the search's lease in the store and heartbeats), finished, interrupted
(SIGINT or SIGTERM: the running trials stop, the finished ones are kept, and
``launch --resume NAME`` continues) or crashed (with the reason). One driver per search:
a second one is refused while the lease's holder lives. ``--resume`` rebuilds the search
from the store's rows (``_replay``): nothing pickled is read, and Ray Tune's own experiment
folder lives outside the store, in a scratch folder deleted after the session.
"""

from __future__ import annotations

import errno
import logging
import os
import shlex
import shutil
import signal
import socket
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orthotune.core import (
    OBJECTIVE,
    ConfigError,
    OrthotuneError,
    SearchCrashed,
    SearchInterrupted,
    SearchState,
    check,
    check_memory,
)
from orthotune.search._algorithms import SCHEDULERS, SEARCHERS, grid_search, shuffled_grid
from orthotune.search._cells import CellSearcher
from orthotune.search._gpu_share import gpu_share_record, session_fits, trial_resources
from orthotune.search._grouping import GroupSearcher, RungBoard, group_points
from orthotune.search._guards import (
    NodeWatch,
    credentials_kept_from_trials,
    node_wait_s,
    ray_dumps_kept_in_logs,
    refuse_password_in_url,
)
from orthotune.search._live import (
    TensorBoardLogger,
    optuna_storage,
    optuna_storage_location,
    tensorboard_folder,
)
from orthotune.search._options import MODES, LaunchOptions, SearchOutcome
from orthotune.search._progress import SearchProgress
from orthotune.search._recorder import StoreRecorder
from orthotune.search._replay import (
    StoredTrial,
    by_cell,
    config_canon,
    objective_curves,
    remaining_points,
    replay_points,
    replay_rungs,
    stored_trials,
)
from orthotune.search._requeue import Requeue, RetryLedger
from orthotune.search._startup import callback_usage_by_name, trials_on_started_workers
from orthotune.search._trackers import check_trackers, tracker_callbacks
from orthotune.search._trainable import TIMINGS_ENV as TIMINGS_ENV  # public through orthotune.search
from orthotune.search._trainable import TrialContext, error_line, train_trial
from orthotune.spaces import SearchSpace
from orthotune.store import Lease, Store, now
from orthotune.training import DataRoot, check_dataset_files

log = logging.getLogger(__name__)

#: Stored trials' objective curves: trial id -> [(epoch, objective)] (``objective_curves``).
Curves = dict[str, list[tuple[int, float]]]


#: For ``bench/throughput.py --breakdown``: the driver's parts of a search, each with the
#: class and the methods that do it (the benchmark times around them); ``TRIAL_END``: the
#: callback every ended trial passes through (its last result holds the worker's timings
#: when ``TIMINGS_ENV`` is set, ``train_trial``).
DRIVER_PARTS: dict[str, tuple[type, tuple[str, ...]]] = {
    "searcher": (Requeue, ("suggest", "on_trial_result", "on_trial_complete")),
    "store writes (recorder)": (StoreRecorder, ("_write",)),
    "history kept per report (recorder)": (StoreRecorder, ("on_trial_result",)),
    "TensorBoard event files": (TensorBoardLogger,
                                ("on_trial_result", "on_trial_complete", "on_trial_error", "on_experiment_end")),
    "progress display": (SearchProgress, ("on_step_end", "on_trial_complete", "on_trial_error", "on_experiment_end")),
}
TRIAL_END = (StoreRecorder, "on_trial_complete")


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
    check_inputs(options)  # missing data fails here, not in every trial
    store = Store.open(options.store, create=True)
    _refuse_taken_name(store, options)
    with Lease.acquire(store, options.name) as lease:
        lease.start_heartbeat()  # from now on: Ray's start may take longer than a lease stays fresh
        _refuse_taken_name(store, options)  # a driver that won a race for the name wrote its record first
        with tune_settings():
            fits = _start_ray(options)
            tuner, planned = _tuner(options, store, progress, options.concurrency or fits)
            started = now().isoformat()
            store.save_search_meta(options.name, {"options": options.to_meta(), "state": SearchState.RUNNING.value,
                                                  "created_at": started, "session_started_at": started,
                                                  "elapsed_s": 0.0, **gpu_share_record(options)})
            return _fit(tuner, store, options)


def _refuse_taken_name(store: Store, options: LaunchOptions) -> None:
    if store.exists(f"searches/{options.name}.json"):
        raise OrthotuneError(f"search {options.name!r} already exists in store {options.store!r}; "
                             f"resume it with --resume {options.name} or pick another --name")


def _resumable(store: Store, name: str) -> dict[str, Any]:
    """The options search ``name`` was launched with, as its record holds them. A search that
    finished, or whose record another orthotune version wrote, is refused."""
    meta = store.search_meta(name)
    if meta.get("state") == SearchState.FINISHED:
        raise OrthotuneError(f"search {name!r} finished with {_counts_text(_stored_counts(store, name))}; "
                             f"nothing to resume")
    LaunchOptions.check_meta(meta["options"])
    return meta["options"]


def resume(store_uri: str, name: str, address: str | None = None, progress: bool | str = True) -> SearchOutcome:
    """Continue a search whose driver stopped (interrupted, crashed or killed): its stored
    trials are kept and replayed into its searchers and schedulers, the rest of each cell's
    budget runs, over the space its record holds."""
    store = Store.open(store_uri)
    stored = _resumable(store, name)
    options = LaunchOptions.from_meta({**stored, "store": store_uri, "address": address or stored.get("address")})
    check_inputs(options)  # its files may have gone since
    with Lease.acquire(store, name) as lease:
        lease.start_heartbeat()
        meta = store.search_meta(name)  # as the last holder left it
        stored = stored_trials(store, name)
        with tune_settings():
            fits = _start_ray(options)
            elapsed = prior_elapsed(meta, store)
            tuner, planned = _tuner(options, store, progress, options.concurrency or fits, stored, elapsed)
            started = now().isoformat()
            store.save_search_meta(name, {**meta, "state": SearchState.RUNNING.value, "resumed_at": started,
                                          "session_started_at": started, "elapsed_s": elapsed,
                                          "reason": None, **gpu_share_record(options)})
            if planned.num_samples == 0:  # every config was stored before the driver stopped
                return _finish(store, options, meta | {"session_started_at": started})
            return _fit(tuner, store, options)


def prior_elapsed(meta: dict[str, Any], store: Store) -> float:
    """Seconds the search ran before this session: the sessions that ended cleanly, plus,
    for one whose driver died, the time until its last stored trial."""
    elapsed = float(meta.get("elapsed_s") or 0.0)
    started = meta.get("session_started_at") or meta.get("created_at")
    if meta.get("state") != SearchState.RUNNING or not started:
        return elapsed  # the last session recorded its time when it ended
    rows = store.read("trials", search=meta["options"]["name"]).column("finished_at").to_pylist()
    last = max((t for t in rows if t is not None), default=None)
    if last is None:
        return elapsed
    return elapsed + max(0.0, (last - datetime.fromisoformat(started)).total_seconds())


def _fit(tuner, store: Store, options: LaunchOptions) -> SearchOutcome:
    """Run the Tuner (under the search's lease, held by the caller); record how the session ended."""
    meta = store.search_meta(options.name)
    with stop_on_signals() as received, _quiet_tune_errors():
        try:
            tuner.fit()
        except KeyboardInterrupt:  # a second signal, or one before Tune could stop gracefully
            received.append(received[0] if received else signal.SIGINT)
        except Exception as error:
            reason = crash_reason(error)
            unwritable = storage_failure(error)
            try:
                _record(store, options.name, meta, SearchState.CRASHED, reason=reason)
            except OSError as failed:  # the store cannot take its record either: that is the cause
                unwritable = unwritable or failed
            if unwritable is not None:
                raise SearchCrashed(_unwritable_text(store, options, unwritable)) from error
            raise SearchCrashed(f"search {options.name!r} crashed: {reason}; "
                                f"{_counts_text(_stored_counts(store, options.name))} "
                                f"stored; once the cause is fixed, continue it with: {resume_command(options)}") \
                from error
    if received:
        return _interrupted(store, options, meta, received[0])
    return _finish(store, options, meta)


def _finish(store: Store, options: LaunchOptions, meta: dict[str, Any]) -> SearchOutcome:
    outcome = outcome_from_store(store, options.name)
    _record(store, options.name, meta, SearchState.FINISHED, finished_at=now().isoformat(), counts=outcome.counts)
    return outcome


def _interrupted(store: Store, options: LaunchOptions, meta: dict[str, Any], signum: int) -> SearchOutcome:
    """Record the interruption (counts from the store) and raise it with the resume command."""
    outcome = outcome_from_store(store, options.name)
    name = signal.Signals(signum).name
    _record(store, options.name, meta, SearchState.INTERRUPTED, interrupted_at=now().isoformat(),
            counts=outcome.counts, reason=f"{name} received")
    planned = planned_configs(options)
    raise SearchInterrupted(
        f"search {options.name!r} interrupted by {name}: {_counts_text(outcome.counts)} of {planned} "
        f"configs stored; continue it with: {resume_command(options)}", signum)


#: What a filesystem says when it cannot take a write: full, over quota, read-only, failing.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def storage_failure(error: BaseException) -> OSError | None:
    """The full, read-only or failing disk behind ``error`` (it or one of its causes), if any."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in STORAGE_ERRNOS:
            return error
        error = error.__cause__ or error.__context__
    return None


def _unwritable_text(store: Store, options: LaunchOptions, failure: OSError) -> str:
    """One line: the search stopped because its store cannot be written, what is kept, what next.
    Every stored row was written whole (a temporary moved into place), so all of them read."""
    cause = failure.strerror or error_line(failure)
    return (f"search {options.name!r} stopped: store {options.store!r} cannot be written ({cause}); "
            f"{_counts_text(_stored_counts(store, options.name))} stored, each one whole; once the store "
            f"can be written again, continue it with: {resume_command(options)}")


def resume_command(options: LaunchOptions) -> str:
    """The command that continues the search, quoted for a POSIX shell (a store URI's ``&``
    or a path's space stays one word)."""
    return shlex.join(["orthotune", "launch", "--resume", options.name, "--store", options.store])


def _record(store: Store, name: str, meta: dict[str, Any], state: SearchState, **extra: Any) -> None:
    """The search's record at the end of a session: its state and the time it has run."""
    started = datetime.fromisoformat(meta.get("session_started_at") or now().isoformat())
    ran = (now() - started).total_seconds()
    store.save_search_meta(name, {**meta, "state": state.value,
                                  "elapsed_s": float(meta.get("elapsed_s") or 0.0) + ran, **extra})


def _stored_counts(store: Store, name: str) -> Counter:
    return Counter(t.status.value for t in stored_trials(store, name))


def _counts_text(counts: Mapping[str, int]) -> str:
    """``3 trials (2 completed, 1 failed)``."""
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    total = sum(counts.values())
    return f"{total} trial{'' if total == 1 else 's'}" + (f" ({parts})" if parts else "")


@contextmanager
def _quiet_tune_errors() -> Iterator[None]:
    """Ray Tune logs each trial's error and its own failures with tracebacks on stderr; here
    every trial's failure is stored with its reason and the driver's ends as one line, so
    those logs stay off (``ORTHOTUNE_DEBUG=1`` keeps them)."""
    if os.environ.get("ORTHOTUNE_DEBUG", "") not in ("", "0"):
        yield
        return
    tune_log = logging.getLogger("ray.tune")
    level = tune_log.level
    tune_log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        tune_log.setLevel(level)


def crash_reason(error: BaseException) -> str:
    """One line for why the driver failed: the innermost cause, and where Ray Tune wraps a
    formatted traceback in its own error, that traceback's last line."""
    while error.__cause__ is not None:
        error = error.__cause__
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        return lines[-1][:500]
    return error_line(error)


@contextmanager
def stop_on_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM end the search gracefully: running trials stop, finished ones are
    kept, and the caller sees which signal came (the yielded list). Ray Tune's own graceful
    stop is its SIGUSR1 handler, which this triggers; a second signal stops at once
    (KeyboardInterrupt). Only the main thread can take signals; elsewhere nothing changes."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handler(signum: int, frame: Any) -> None:
        first = not received
        received.append(signum)
        tune_stop = signal.getsignal(signal.SIGUSR1)
        if first and callable(tune_stop):  # Tune's loop is running: let it stop and save
            tune_stop(signum, frame)
        else:
            raise KeyboardInterrupt

    previous = {number: signal.signal(number, handler) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def outcome_from_store(store: Store, name: str) -> SearchOutcome:
    """Counts by status and each cell's validation-best config, read from the store (the
    record; a resumed search's earlier sessions included). Failed configs are never best."""
    trials = stored_trials(store, name)
    counts = Counter(t.status.value for t in trials)
    best: dict[str, tuple[float, dict[str, Any]]] = {}
    for trial in trials:
        if trial.failed:
            continue
        if trial.cell not in best or trial.objective > best[trial.cell][0]:
            best[trial.cell] = (trial.objective, {**trial.config, "trial_id": trial.trial_id})
    outcome = SearchOutcome(name, dict(counts), best_by_cell=dict(sorted(best.items())))
    if best:
        outcome.best_objective, outcome.best_config = max(best.values(), key=lambda entry: entry[0])
    return outcome


def _callbacks(options: LaunchOptions, store: Store, progress: bool | str, configs: int, ledger: RetryLedger,
               elapsed_before: float = 0.0, stored: list[StoredTrial] | None = None) -> list:
    """The retry ledger, the recorder (the store), the live views, the progress display and
    the trackers."""
    callbacks: list = [ledger, StoreRecorder(options.store, options.name, ledger), NodeWatch(node_wait_s())]
    folder = tensorboard_folder(store, options.name) if options.tensorboard else None
    if folder is not None:
        callbacks.append(TensorBoardLogger(folder))
    if progress and progress != "off":
        mode = "auto" if progress is True else str(progress)
        check(mode in MODES, f"progress={progress!r} must be one of {', '.join(MODES)} or true/false")
        stored = stored or []  # an earlier session's configs: the counter goes on from them
        callbacks.append(SearchProgress(configs + len(stored), mode=mode, elapsed_before=elapsed_before, ledger=ledger,
                                        earlier=Counter(str(t.status) for t in stored),
                                        earlier_seconds=[t.seconds for t in stored if t.seconds is not None]))
    return callbacks + tracker_callbacks(options)


def _tuner(options: LaunchOptions, store: Store, progress: bool | str, concurrency: int,
           stored: list[StoredTrial] | None = None, elapsed_before: float = 0.0):
    """The Tuner of a session; ``stored``: the trials earlier sessions stored (``--resume``)."""
    from ray import tune

    stored = stored or []
    storage = None
    if options.searcher != "grid":  # the grid has no Optuna study
        location = optuna_storage_location(options.optuna_storage, store, options.name)
        storage = optuna_storage(location)
        if stored:
            _drop_studies(storage, options)  # rebuilt from the rows, not doubled
    curves = objective_curves(store, options.name, stored, options.report_every) \
        if stored and options.scheduler == "asha" else None
    planned = plan(options, storage, stored, curves)
    ledger = RetryLedger(options.retries)
    callbacks = _callbacks(options, store, progress, planned.configs, ledger, elapsed_before, stored)
    tuner = tune.Tuner(
        _trainable(options, stored, curves),
        tune_config=tune.TuneConfig(
            # a config whose worker died before its trial ran is trained again (``Requeue``):
            # each Tune trial may come back up to ``retries`` times
            search_alg=Requeue(planned.search_alg, ledger, metric=OBJECTIVE, mode="max"),
            scheduler=planned.scheduler, num_samples=max(1, planned.num_samples * (1 + options.retries)),
            max_concurrent_trials=concurrency,
            reuse_actors=True,  # a fresh worker spends seconds importing torch and PyG
        ),
        run_config=tune.RunConfig(
            name=options.name, storage_path=_scratch_folder(), callbacks=callbacks, verbose=0,
            # a trial whose worker died (SIGKILL, node lost) trains again; a trial that raises
            # does not reach Tune (it is stored as failed, see train_trial)
            failure_config=tune.FailureConfig(max_failures=options.retries),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        ),
    )
    return tuner, planned


def _drop_studies(storage: Any, options: LaunchOptions) -> None:
    """A resumed search's Optuna studies are replayed from the store's rows: the previous
    session's studies (with its trials left running when the driver died) go first."""
    if storage is None:
        return
    import optuna

    for cell in options.space.cells():
        try:
            optuna.delete_study(study_name=f"{options.name}/{cell.key}", storage=storage)
        except KeyError:
            pass


_SCRATCH: list[str] = []


#: Prefix of a session's scratch folder in the temporary directory; the driver's pid and
#: host follow (a temporary directory shared by containers holds other hosts' pids).
SCRATCH_PREFIX = "orthotune-tune-"


def _scratch_folder() -> str:
    """Where Ray Tune keeps its experiment state for this session: outside the store (Tune
    pickles its trials and searchers there, and orthotune resumes from rows), and deleted
    when the driver exits. A killed driver cannot delete its own: the next session on the
    host deletes the folders whose driver is gone (their pid is in the name)."""
    _sweep_dead_scratch()
    folder = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-{socket.gethostname()}-")
    if not _SCRATCH:
        import atexit

        atexit.register(lambda: [shutil.rmtree(path, ignore_errors=True) for path in _SCRATCH])
    _SCRATCH.append(folder)
    return folder


def _sweep_dead_scratch() -> None:
    import psutil

    host = socket.gethostname()
    for entry in os.scandir(tempfile.gettempdir()):
        pid, _, rest = entry.name.removeprefix(SCRATCH_PREFIX).partition("-")
        mine = entry.name.startswith(SCRATCH_PREFIX) and pid.isdigit() and rest.startswith(f"{host}-")
        if mine and not psutil.pid_exists(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True)


def plan(options: LaunchOptions, storage: Any = None, stored: list[StoredTrial] | None = None,
         curves: Curves | None = None) -> SearchPlan:
    """Search algorithm, Tune-level scheduler and number of Tune trials.

    Sampled searches get one searcher per cell (``samples`` trainings each); ``storage`` is
    the Optuna storage their studies are written to (one study per cell, named
    ``SEARCH/cell``). With several configs per trial (a trial group, trained as one packed
    model), Tune runs the groups FIFO and ASHA decides per config on the rung board (one
    ASHA per cell there too). ``stored``: trials an earlier session of the search stored,
    replayed into the searchers (and, with their ``curves``, into ASHA), never trained again.
    """
    space, group, stored = options.space, options.configs_per_trial, stored or []
    if options.searcher == "grid":
        # the space's grid in a seeded random order (``shuffled_grid``); given points as given
        points = list(options.points) if options.points is not None else shuffled_grid(space.grid(), options.seed)
        points = remaining_points(points, stored)
        if group == 1:
            scheduler = _replayed(SCHEDULERS.get(options.scheduler)(space), stored, curves)
            return SearchPlan(grid_search(points), scheduler, len(points), len(points))
        groups = group_points(points, group)
        return SearchPlan(grid_search(groups), SCHEDULERS.get("fifo")(space), len(groups), len(points))
    cells = space.cells()
    samples = options.samples or space.samples
    make = SEARCHERS.get(options.searcher)
    mine = by_cell(stored)
    searchers = {cell.key: make(cell, options.seed + index, storage=storage, study_name=f"{options.name}/{cell.key}",
                                replay=replay_points(mine.get(cell.key, [])))
                 for index, cell in enumerate(cells)}
    sizes = {cell.key: _grid_size(cell) for cell in cells}
    searcher = CellSearcher(searchers, samples, sizes, metric=OBJECTIVE, mode="max")
    for cell, trials in mine.items():
        if cell in searchers:
            _replay_cell(searcher, cell, trials)
    configs = max(0, planned_configs(options) - len(stored))
    if group == 1:
        scheduler = _replayed(SCHEDULERS.get(options.scheduler)(space), stored, curves)
        return SearchPlan(searcher, scheduler, configs, configs)
    grouped = GroupSearcher(searcher, group, configs, metric=OBJECTIVE, mode="max")
    return SearchPlan(grouped, SCHEDULERS.get("fifo")(space), configs, configs)


def _replay_cell(searcher: CellSearcher, cell: str, trials: list[StoredTrial]) -> None:
    """Ask the cell's searcher for its enqueued stored points and tell it their results."""
    for trial in trials:
        inner_id = f"stored-{trial.trial_id}"
        config = searcher.searchers[cell].suggest(inner_id)
        if not isinstance(config, dict):
            raise OrthotuneError(f"cannot resume: the searcher of cell {cell} did not take back stored trial "
                                 f"{trial.trial_id}")
        if config_canon(config) != config_canon(trial.config):
            log.warning("stored trial %s of cell %s is not a config of the search's space; its result is told "
                        "to the searcher for the config it proposed in its place", trial.trial_id, cell)
        searcher.tell_stored(cell, inner_id, config, trial.objective, trial.failed)


def _replayed(scheduler: Any, stored: list[StoredTrial], curves: Curves | None) -> Any:
    """A per-cell scheduler (ASHA) given the stored trials' reports (their rungs)."""
    if stored and curves and hasattr(scheduler, "schedulers"):  # a CellScheduler, not FIFO
        replay_rungs(scheduler, stored, curves)
    return scheduler


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


def _trainable(options: LaunchOptions, stored: list[StoredTrial] | None = None, curves: Curves | None = None):
    from ray import tune

    threads = max(1, int(options.cpus_per_trial))
    board = None
    if options.configs_per_trial > 1 and options.scheduler == "asha":  # one ASHA per cell, on the board
        board = RungBoard.remote(_replayed(SCHEDULERS.get("asha")(options.space), stored or [], curves))
    context = TrialContext(_data_root(options.data_root, options.download), options.report_every, threads,
                           rung_board=board, download=options.download)
    # a dict, or with --gpus-per-trial auto each trial's cell's GPU share (a callable of its config)
    resources = trial_resources(options)
    return tune.with_resources(tune.with_parameters(train_trial, context=context), resources)


#: Settings Ray Tune reads only from the environment (it has no API for them): our progress
#: display replaces Tune's tables; the store and our TensorBoard logger replace Tune's own
#: JSON/CSV/TBX loggers; Tune's experiment state is never read back (a search resumes from
#: the store), so it is saved rarely; SIGINT is ours (:func:`stop_on_signals`, which hands
#: it to Tune's graceful stop and records the interruption). Set only while a search runs
#: (a value the user set wins), then restored.
TUNE_SETTINGS = {"RAY_AIR_NEW_OUTPUT": "0", "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
                 "TUNE_GLOBAL_CHECKPOINT_S": "300", "TUNE_DISABLE_SIGINT_HANDLER": "1"}


@contextmanager
def tune_settings() -> Iterator[None]:
    """:data:`TUNE_SETTINGS` in the environment for the duration of a search only."""
    saved = {key: os.environ.get(key) for key in TUNE_SETTINGS}
    for key, value in TUNE_SETTINGS.items():
        os.environ.setdefault(key, value)
    try:
        # the store's keys stay in the driver (and out of Ray's logs); a dead raylet's debug
        # dump stays in its log (and out of the user's terminal); the first trials start
        # about 1.5 s sooner (_startup)
        with credentials_kept_from_trials(), ray_dumps_kept_in_logs(), trials_on_started_workers(), \
                callback_usage_by_name():
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

    from orthotune.search._local_ray import is_loopback_address, local_ray_options, loopback_ray, starts_local_ray

    # Without Tune's JSON/CSV loggers (the store is the record) its result grid warns once
    # per trial that it found no metrics files: thousands of lines for a large search.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    if not ray.is_initialized() and not starts_local_ray(options.address):
        # a cluster: --address, or $RAY_ADDRESS (a Ray job's driver on the head node)
        with loopback_ray() if is_loopback_address(options.address) else nullcontext():
            ray.init(address=options.address, log_to_driver=False)
    elif not ray.is_initialized():
        with loopback_ray():  # every Ray server and worker listens on 127.0.0.1 only
            ray.init(**local_ray_options(), log_to_driver=False, configure_logging=True,
                     logging_level="ERROR")
    resources = ray.cluster_resources()
    if options.gpus_per_trial and not resources.get("GPU"):
        raise OrthotuneError(f"gpus_per_trial={options.gpus_per_trial} but the Ray cluster has no GPU")
    fits = int(resources.get("CPU", 1) // options.cpus_per_trial)
    if options.gpus_per_trial:
        fits = min(fits, int(resources.get("GPU", 0) // options.gpus_per_trial))
    return max(1, session_fits(options, fits))  # --gpus-per-trial auto: measures each cell, caps by GPUs


def _data_root(option: str | None, download: bool = False) -> str:
    """The data root the workers read (absolute)."""
    return str(DataRoot.resolve(option, download).path)


def check_inputs(options: LaunchOptions) -> None:
    """What a search needs beyond valid values, checked before the store is touched and Ray
    starts: every dataset of every cell has its files in the data root (fetched first with
    ``download``), and on a local Ray each cell's largest config fits this machine's memory
    (a cluster's workers have memory of their own)."""
    node_wait_s()  # a bad $ORTHOTUNE_NODE_WAIT_S fails here, not once Ray runs
    check_trackers(options)
    refuse_password_in_url(options.optuna_storage, "--optuna-storage")
    root = DataRoot.resolve(options.data_root, options.download)
    configs = options.space.largest_configs()
    if options.address is None:
        for config in configs:
            check_memory(config)
    for dataset, setting in dict.fromkeys((config.dataset, config.setting) for config in configs):
        check_dataset_files(dataset, setting, root)
