"""A session's run and end: the Tuner runs under the search's signal handlers, and the
search's record says how the session ended (finished, interrupted with the command that
resumes it, or crashed with the reason), with its counts read from the store."""

from __future__ import annotations

import errno
import logging
import os
import shlex
import signal
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from orthotune.core import SearchCrashed, SearchInterrupted, SearchState
from orthotune.search._budget import budgeted_configs
from orthotune.search._options import LaunchOptions, SearchOutcome
from orthotune.search._recorder import compact_finished
from orthotune.search._replay import stored_trials
from orthotune.search._trainable import error_line
from orthotune.store import Store, now


def fit(tuner, store: Store, options: LaunchOptions) -> SearchOutcome:
    """Run the Tuner (under the search's lease, held by the caller); record how the session ended."""
    meta = store.search_meta(options.name)
    with stop_on_signals() as received, _quiet_tune_errors():
        try:
            tuner.fit()
        except KeyboardInterrupt:  # a second signal, or one before Tune could stop gracefully
            received.append(received[0] if received else signal.SIGINT)
        except Exception as error:
            if store.fence is not None:
                store.fence()  # a driver whose lease was taken over says so, and records nothing
            reason = crash_reason(error)
            unwritable = storage_failure(error)
            try:
                _record(store, options.name, meta, SearchState.CRASHED, reason=reason)
            except OSError as failed:  # the store cannot take its record either: that is the cause
                unwritable = unwritable or failed
            if unwritable is not None:
                raise SearchCrashed(_unwritable_text(store, options, unwritable)) from error
            raise SearchCrashed(f"search {options.name!r} crashed: {reason}; "
                                f"{counts_text(stored_counts(store, options.name))} "
                                f"stored; once the cause is fixed, continue it with: {resume_command(options)}") \
                from error
    if received:
        return _interrupted(store, options, meta, received[0])
    return finish(store, options, meta)


def finish(store: Store, options: LaunchOptions, meta: dict[str, Any]) -> SearchOutcome:
    """Record the search finished (counts from the store) and return its outcome."""
    outcome = outcome_from_store(store, options.name)
    _record(store, options.name, meta, SearchState.FINISHED, finished_at=now().isoformat(), counts=outcome.counts)
    compact_finished(store, options.name)  # its trial files merged, under the lease still held
    return outcome


def _interrupted(store: Store, options: LaunchOptions, meta: dict[str, Any], signum: int) -> SearchOutcome:
    """Record the interruption (counts from the store) and raise it with the resume command."""
    outcome = outcome_from_store(store, options.name)
    name = signal.Signals(signum).name
    _record(store, options.name, meta, SearchState.INTERRUPTED, interrupted_at=now().isoformat(),
            counts=outcome.counts, reason=f"{name} received")
    budgeted = budgeted_configs(options)
    raise SearchInterrupted(
        f"search {options.name!r} interrupted by {name}: {counts_text(outcome.counts)} of {budgeted} "
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
            f"{counts_text(stored_counts(store, options.name))} stored, each one whole; once the store "
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


def stored_counts(store: Store, name: str) -> Counter:
    """Search ``name``'s stored trials by status."""
    return Counter(t.status.value for t in stored_trials(store, name))


def counts_text(counts: Mapping[str, int]) -> str:
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
