"""Start a search, or continue it where the store holds it: the one idempotent entry that a
batch job runs however many times Slurm requeues it or its user resubmits it
(``orthotune launch --start-or-resume``, which ``orthotune slurm``'s script runs).

- The store holds no record of the search: :func:`launch` starts it.
- The record was made with other options: refused in one line (continuing would silently
  run the stored options, not the given ones).
- The record says finished (checked again once the lease is taken: another driver may have
  finished it meanwhile): its outcome, read from the store; no Ray starts, nothing trains.
  A driver killed after it recorded the search finished left its end undone: its dead lease
  is taken over, the trial files compacted, the lease released.
- Otherwise (interrupted, crashed, or its driver died): :func:`resume` continues it once the
  previous driver's lease is free. A driver that was killed on another node holds the lease
  until its heartbeat is stale, so this waits for that (:data:`LEASE_WAIT_MARGIN_S` beyond it) instead of
  failing at once; a live driver still holding it after that is refused, as ``--resume`` is.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from orthotune.core import OrthotuneError, SearchState
from orthotune.search._ending import outcome_from_store
from orthotune.search._launch import SearchFinished, launch, resume
from orthotune.search._options import LaunchOptions, SearchOutcome
from orthotune.search._recorder import compact_finished
from orthotune.search._tuner import sweep_dead_scratch
from orthotune.store import Lease, LeaseHeld, Store, lease_info, lease_stale_s
from orthotune.training import EXECUTION_SWITCHES

#: Options not compared with the record: where the store is seen from and which cluster runs
#: the session may change; the data root and download are the first session's, as ``--resume``
#: keeps them.
SESSION_OPTIONS = frozenset({"store", "address", "data_root", "download"})
#: Beyond the time a lease takes to go stale (60 s without a heartbeat, or
#: ``ORTHOTUNE_LEASE_STALE_S``: ``store.Lease``).
LEASE_WAIT_MARGIN_S = 15.0
LEASE_POLL_S = 3.0


def start_or_resume(options: LaunchOptions, progress: bool | str = True) -> SearchOutcome:
    """Start search ``options.name``, continue it, or return its outcome if it finished."""
    store = _holding(options.store, options.name)
    if store is None:  # launch checks the inputs before it creates the store
        return launch(options, progress=progress)
    meta = store.search_meta(options.name)
    LaunchOptions.check_meta(meta.get("options", {}))
    _refuse_other_options(meta["options"], options)
    if meta.get("state") == SearchState.FINISHED:
        return _finished(store, options.name)
    _wait_for_lease(store, options.name)
    try:
        return resume(options.store, options.name, options.address, progress=progress)
    except SearchFinished:  # another driver finished it while this one waited (issue 51)
        return _finished(store, options.name)


def _finished(store: Store, name: str) -> SearchOutcome:
    """A finished search's outcome, its end completed first where its driver died after it
    recorded the search finished (issue 51's nemesis: a SIGKILL there left the dead driver's
    lease held, the trial files uncompacted and Ray Tune's scratch folder behind): the dead
    lease is taken over, the files compacted and the lease given back."""
    sweep_dead_scratch()
    held = lease_info(store, name)
    if held is not None and not held.alive:
        try:
            with Lease.acquire(store, name) as lease:
                compact_finished(store.fenced(lease.check), name)
        except (LeaseHeld, OSError):  # another driver took it first (it completes the end), or
            pass  # the store cannot be written now (read-only): the outcome all the same
    return outcome_from_store(store, name)


def _holding(uri: str, name: str) -> Store | None:
    """The store at ``uri`` if it holds a record of search ``name``; None if it does not, or if
    there is no store there yet (or one that is not ours: :func:`launch` says which)."""
    try:
        store = Store.open(uri)
    except OrthotuneError:
        return None
    return store if store.exists(f"searches/{name}.json") else None


def _refuse_other_options(stored: dict[str, Any], options: LaunchOptions) -> None:
    """Refuse to continue a search with options other than its own. An option its record does
    not hold (a later version added it, as ``--budget``) stands at its default there, as a
    resumed search reads it."""
    given = json.loads(json.dumps(options.to_meta()))  # as the record holds them (JSON)
    defaults = json.loads(json.dumps({f.name: f.default for f in dataclasses.fields(LaunchOptions)
                                      if f.default is not dataclasses.MISSING}, default=str))
    # a record from before the GPU switches: its resumed search resolves them (its space's, else the defaults)
    defaults.update(dataclasses.replace(options, **dict.fromkeys(EXECUTION_SWITCHES)).execution())
    stored = {**{key: defaults[key] for key in set(given) - set(stored) if key in defaults}, **stored}
    differ = [key for key in sorted((set(given) | set(stored)) - SESSION_OPTIONS) if given.get(key) != stored.get(key)]
    if not differ:
        return
    shown = ", ".join("space (its contents)" if key == "space" else f"{key}: stored {stored.get(key)!r}, given "
                      f"{given.get(key)!r}" for key in differ)
    raise OrthotuneError(f"search {options.name!r} in store {options.store!r} was started with other options "
                         f"({shown}); continue it with the options it was started with, or pick another --name")


def _wait_for_lease(store: Store, name: str) -> None:
    """Until the lease on ``name`` is free or its holder judged dead: at most the lease's
    staleness and :data:`LEASE_WAIT_MARGIN_S`."""
    deadline = time.monotonic() + lease_stale_s() + LEASE_WAIT_MARGIN_S
    while time.monotonic() < deadline:
        held = lease_info(store, name)
        if held is None or not held.alive:
            return
        time.sleep(LEASE_POLL_S)
