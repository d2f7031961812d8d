"""Launch and resume searches with Ray Tune's Tuner, its schedulers and Optuna's samplers.

Trials run on a local embedded Ray by default, or on a cluster given its address. A search
over several cells (dataset, backbone, depth, arm) gives each cell its own searcher and
``samples`` trainings (:class:`CellSearcher`) and its own ASHA (:class:`CellScheduler`).
Every trial is written to the store by :class:`StoreRecorder`; progress is drawn by
:class:`SearchProgress`, TensorBoard files by :class:`TensorBoardLogger`, and each cell's
Optuna study lives in an Optuna storage (``optuna-dashboard``).

A session runs in stages, each a module read top to bottom:

1. ``_inputs``: what the search needs beyond valid options (data files, memory, trackers),
   checked before the store is touched (the options and the space were validated when
   they were made: ``_options``, the spaces layer);
2. this module: the store, the search's lease and record;
3. ``_ray_start``: Tune's settings for the session, a local Ray or the cluster;
4. ``_strategy``: the searchers and schedulers per cell (``_budget``: how many configs;
   ``_reference``: the structure-agnostic reference cells another search already trained);
5. ``_tuner``: the Tuner, its trainable and its callbacks;
6. ``_ending``: the Tuner's run under the signals, and the record of how the session ended.

A search's record (``searches/NAME.json``) says where it stands (``SearchState``): running
(its driver holds the search's lease in the store and heartbeats), finished, interrupted
(SIGINT or SIGTERM: the running trials stop, the finished ones are kept, and
``launch --resume NAME`` continues) or crashed (with the reason). One driver per search:
a second one is refused while the lease's holder lives. ``--resume`` rebuilds the search
from the store's rows (``_replay``): nothing pickled is read, and Ray Tune's own experiment
folder lives outside the store, in a scratch folder deleted after the session.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from orthotune.core import OrthotuneError, SearchState
from orthotune.search._ending import counts_text, finish, fit, stored_counts
from orthotune.search._gpu_share import gpu_share_record
from orthotune.search._inputs import check_inputs
from orthotune.search._options import LaunchOptions, SearchOutcome
from orthotune.search._ray_start import start_ray, tune_settings
from orthotune.search._reference import reused_references, with_reused_references
from orthotune.search._replay import stored_trials
from orthotune.search._tuner import tuner_of
from orthotune.store import Lease, Store, now


def launch(options: LaunchOptions, progress: bool | str = True, estimate_s: float | None = None) -> SearchOutcome:
    """Run a new search. ``progress``: True (a bar on a terminal, plain lines elsewhere),
    ``"bar"``, ``"plain"``, or False (nothing); ``estimate_s``: the cost plan's expected seconds
    of trials (``plan_search``), the progress ETA's start."""
    check_inputs(options)  # missing data fails here, not in every trial
    store = Store.open(options.store, create=True)
    _refuse_taken_name(store, options)
    with Lease.acquire(store, options.name) as lease:
        lease.start_heartbeat()  # from now on: Ray's start may take longer than a lease stays fresh
        store = store.fenced(lease.check)  # once taken over, this driver writes nothing more
        _refuse_taken_name(store, options)  # a driver that won a race for the name wrote its record first
        reused = reused_references(store, options)  # trained by another search with the same budget
        options = with_reused_references(options, reused)
        with tune_settings():
            fits = start_ray(options)
            tuner, chosen = tuner_of(options, store, progress, options.concurrency or fits, estimate_s=estimate_s)
            started = now().isoformat()
            store.save_search_meta(options.name, {"options": options.to_meta(), "state": SearchState.RUNNING.value,
                                                  "created_at": started, "session_started_at": started,
                                                  "elapsed_s": 0.0, "references": reused,
                                                  **gpu_share_record(options)})
            return fit(tuner, store, options)


def check_store(options: LaunchOptions) -> None:
    """The store a new search writes to: refused when it is not ours (a file, a foreign
    folder) or already holds a search of this name, before anything is measured or trained."""
    _refuse_taken_name(Store.open(options.store, create=True), options)


def _refuse_taken_name(store: Store, options: LaunchOptions) -> None:
    if store.exists(f"searches/{options.name}.json"):
        raise OrthotuneError(f"search {options.name!r} already exists in store {options.store!r}; "
                             f"resume it with --resume {options.name} or pick another --name")


class SearchFinished(OrthotuneError):
    """The search to resume is finished (perhaps by another driver while this one waited)."""


def _resumable(store: Store, name: str) -> dict[str, Any]:
    """The options search ``name`` was launched with, as its record holds them. A search that
    finished, or whose record another orthotune version wrote, is refused."""
    meta = store.search_meta(name)
    if meta.get("state") == SearchState.FINISHED:
        raise SearchFinished(f"search {name!r} finished with {counts_text(stored_counts(store, name))}; "
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
        store = store.fenced(lease.check)
        # as the last holder left it: it may have finished the search while this driver
        # waited for the lease (issue 51's nemesis: a driver paused before it took the lease)
        _resumable(store, name)
        meta = store.search_meta(name)
        # the reference cells it reuses stay those its first session chose (the record's)
        reused = meta.get("references")
        options = with_reused_references(options, reused if isinstance(reused, dict) else
                                         reused_references(store, options))
        stored = stored_trials(store, name)
        with tune_settings():
            fits = start_ray(options)
            elapsed = prior_elapsed(meta, store)
            tuner, chosen = tuner_of(options, store, progress, options.concurrency or fits, stored, elapsed)
            started = now().isoformat()
            store.save_search_meta(name, {**meta, "state": SearchState.RUNNING.value, "resumed_at": started,
                                          "session_started_at": started, "elapsed_s": elapsed,
                                          "reason": None, **gpu_share_record(options)})
            if chosen.num_samples == 0:  # every config was stored before the driver stopped
                return finish(store, options, meta | {"session_started_at": started})
            return fit(tuner, store, options)


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
