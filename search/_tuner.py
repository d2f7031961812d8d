"""A session's Tuner: the trainable with its resources, the strategy's searcher and scheduler,
and the callbacks (the retry ledger, the store's recorder, the live views, the progress
display, the trackers). Ray Tune keeps its experiment state in a scratch folder outside the
store, deleted after the session."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections import Counter
from typing import Any

from orthotune.core import OBJECTIVE, check
from orthotune.search._algorithms import SCHEDULERS, SEARCHERS
from orthotune.search._allocation import AdaptiveBudget
from orthotune.search._gpu_share import trial_resources
from orthotune.search._grouping import RungBoard
from orthotune.search._guards import node_wait_s
from orthotune.search._inputs import data_root
from orthotune.search._live import (
    TensorBoardLogger,
    optuna_storage,
    optuna_storage_location,
    tensorboard_folder,
)
from orthotune.search._memory_request import TrialResources, cluster_node
from orthotune.search._node_watch import NodeWatch
from orthotune.search._options import MODES, LaunchOptions
from orthotune.search._progress import SearchProgress
from orthotune.search._recorder import StoreRecorder
from orthotune.search._replay import StoredTrial, objective_curves
from orthotune.search._requeue import Requeue, RetryLedger
from orthotune.search._strategy import Curves, Strategy, replayed, strategy
from orthotune.search._trackers import tracker_callbacks
from orthotune.search._trainable import TrialContext, train_trial
from orthotune.store import Store


def tuner_of(options: LaunchOptions, store: Store, progress: bool | str, concurrency: int,
             stored: list[StoredTrial] | None = None, elapsed_before: float = 0.0,
             estimate_s: float | None = None) -> tuple[Any, Strategy]:
    """The Tuner of a session and its strategy; ``stored``: the trials earlier sessions stored
    (``--resume``); ``estimate_s``: the cost plan's expected seconds of trials (the ETA's start)."""
    from ray import tune

    stored = stored or []
    storage = None
    if SEARCHERS.get(options.searcher).keeps_study:
        location = optuna_storage_location(options.optuna_storage, store, options.name)
        storage = optuna_storage(location)
        if stored:
            _drop_studies(storage, options)  # rebuilt from the rows, not doubled
    curves = objective_curves(store, options.name, stored, options.report_every) \
        if stored and SCHEDULERS.get(options.scheduler).stops_at_rungs else None
    chosen = strategy(options, storage, stored, curves)
    ledger = RetryLedger(options.retries)
    callbacks = callbacks_of(options, store, progress, chosen.configs, ledger, elapsed_before, stored, estimate_s,
                             chosen.budget)
    tuner = tune.Tuner(
        _trainable(options, stored, curves, concurrency),
        tune_config=tune.TuneConfig(
            # a config whose worker died before its trial ran is trained again (``Requeue``):
            # each Tune trial may come back up to ``retries`` times
            search_alg=Requeue(chosen.search_alg, ledger, metric=OBJECTIVE, mode="max"),
            scheduler=chosen.scheduler, num_samples=max(1, chosen.num_samples * (1 + options.retries)),
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
    return tuner, chosen


def callbacks_of(options: LaunchOptions, store: Store, progress: bool | str, configs: int, ledger: RetryLedger,
                 elapsed_before: float = 0.0, stored: list[StoredTrial] | None = None,
                 estimate_s: float | None = None, budget: AdaptiveBudget | None = None) -> list:
    """The retry ledger, the recorder (the store; with an adaptive ``budget``, its looks), the
    live views, the progress display (with the budget's stops) and the trackers."""
    recorder = StoreRecorder(options.store, options.name, ledger, store.fence, budget)  # fenced as the driver's
    callbacks: list = [ledger, recorder, NodeWatch(node_wait_s())]
    folder = tensorboard_folder(store, options.name) if options.tensorboard else None
    if folder is not None:
        callbacks.append(TensorBoardLogger(folder))
    if progress and progress != "off":
        mode = "auto" if progress is True else str(progress)
        check(mode in MODES, f"progress={progress!r} must be one of {', '.join(MODES)} or true/false")
        stored = stored or []  # an earlier session's configs: the counter goes on from them
        callbacks.append(SearchProgress(configs + len(stored), mode=mode, elapsed_before=elapsed_before, ledger=ledger,
                                        earlier=Counter(str(t.status) for t in stored),
                                        earlier_seconds=[t.seconds for t in stored if t.seconds is not None],
                                        estimate_s=estimate_s, budget=budget))
    return callbacks + tracker_callbacks(options)


def _trainable(options: LaunchOptions, stored: list[StoredTrial] | None = None, curves: Curves | None = None,
               concurrency: int | None = None):
    from ray import tune

    threads = max(1, int(options.cpus_per_trial))
    board = None
    scheduler = SCHEDULERS.get(options.scheduler)
    if options.configs_per_trial > 1 and scheduler.stops_at_rungs:  # one ASHA per cell, on the board
        board = RungBoard.remote(replayed(scheduler.make(options.space), stored or [], curves))
    context = TrialContext(data_root(options.data_root, options.download), options.report_every, threads,
                           rung_board=board, download=options.download, execution=options.execution())
    # the fixed {cpu, gpu}, or with --gpus-per-trial auto each trial's cell's GPU share; and for a
    # trial too large for a node full of its like, its memory (_memory_request)
    resources = TrialResources(trial_resources(options), cluster_node(options.cpus_per_trial),
                               context.train_options(), concurrency)
    return tune.with_resources(tune.with_parameters(train_trial, context=context), resources)


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
    sweep_dead_scratch()
    folder = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-{socket.gethostname()}-")
    if not _SCRATCH:
        import atexit

        atexit.register(lambda: [shutil.rmtree(path, ignore_errors=True) for path in _SCRATCH])
    _SCRATCH.append(folder)
    return folder


def sweep_dead_scratch() -> None:
    """Delete the scratch folders of this host's drivers that are gone (killed)."""
    import psutil

    host = socket.gethostname()
    for entry in os.scandir(tempfile.gettempdir()):
        pid, _, rest = entry.name.removeprefix(SCRATCH_PREFIX).partition("-")
        mine = entry.name.startswith(SCRATCH_PREFIX) and pid.isdigit() and rest.startswith(f"{host}-")
        if mine and not psutil.pid_exists(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True)

