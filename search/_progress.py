"""The search's progress display, fed from Tune's trial events (the store is written elsewhere).

Drawn with tqdm: it is already installed with Optuna (no new dependency in practice),
well kept, draws one bar that fits the terminal's width, and its ``tqdm.write`` prints
lines above the bar without breaking it. rich draws richer tables but would be one more
library for one bar.

What it shows, counted per config (a packed Ray trial holds several): the total planned,
done (completed / stopped / failed), running, queued, the elapsed time and an ETA, and a
line whenever a cell's best objective improves. On a terminal it is a bar refreshed every
``every_s`` seconds; elsewhere (logs, CI, a pipe) plain lines, one whenever a config ends
and at least every ``plain_every_s`` seconds. After ``--resume`` the counts go on from the
store's (``earlier``: the statuses of the configs earlier sessions stored, so 2/24, not 0/22)
and the elapsed time continues from what earlier sessions ran (``elapsed_before``).

The ETA comes from measured trial times: the configs left times the mean time of a trial
(the store's ``seconds`` of earlier sessions' trials and Tune's ``time_total_s`` of this
session's) over the configs running at once. Before any trial time is known it falls back
to this session's rate (configs ended per second since it started), and says ``?`` before
any config has ended. Given the plan's estimate (``orthotune plan``: the search's expected
seconds of trials, measured on this machine before it started), the ETA counts down from it
until :data:`ESTIMATE_TRUSTED_S` have passed and a few trials' times are measured.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

from ray.tune import Callback

from orthotune.core import OBJECTIVE, Status
from orthotune.search._cell_key import cell_key, member_configs
from orthotune.search._recorder import trial_statuses
from orthotune.search._requeue import RetryLedger

#: How long the plan's estimate stands as the ETA (seconds into the session) ...
ESTIMATE_TRUSTED_S = 120.0
#: ... and how many trial times must be measured before their mean replaces it.
ESTIMATE_TRIALS = 3


@dataclass
class Snapshot:
    """The search at one moment, per config."""

    counts: Counter = field(default_factory=Counter)  # completed/stopped/failed/running/pending
    best: dict[str, tuple[float, str]] = field(default_factory=dict)  # cell -> (objective, trial id)

    @property
    def done(self) -> int:
        return sum(self.counts[s] for s in Status)


def snapshot(trials, ended: set[str] | None = None) -> Snapshot:
    """Counts by status and each cell's best objective so far (failed configs excluded).

    ``ended``: the ids of the trials Tune reported as ended. On Ctrl-C Tune stops the running
    trials without reporting them (they have no rows and train again on ``--resume``), yet
    marks them terminated; given ``ended``, such trials count as ``interrupted``, not done.
    """
    shot = Snapshot()
    for trial in trials:
        members = member_configs(trial.config)
        statuses = trial_statuses(trial)
        if statuses is not None and ended is not None and trial.trial_id not in ended:
            statuses = ["interrupted"] * len(members)
        if statuses is None:
            waiting = "running" if trial.status == "RUNNING" else "pending"
            statuses = [waiting] * len(members)
        shot.counts.update(str(s) for s in statuses)
        values = (trial.last_result or {}).get("member_val_acc") or []
        for config, status, value in zip(members, statuses, values):
            if status in (Status.FAILED, "interrupted") or value is None or not math.isfinite(value):
                continue
            cell = cell_key(config)
            if cell not in shot.best or value > shot.best[cell][0]:
                shot.best[cell] = (float(value), trial.trial_id)
    return shot


def duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``42s``; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class SearchProgress(Callback):
    """Progress of one search: a tqdm bar on a terminal, plain lines elsewhere.

    Args:
        total: configs the search plans to train (cells x samples, or the grid's points).
        mode: ``bar``, ``plain`` or ``auto`` (a bar when the stream is a terminal).
        elapsed_before: seconds earlier sessions of this search ran (``--resume``).
        estimate_s: the plan's expected seconds of this session's trials (the ETA's start).
    """

    def __init__(self, total: int, mode: str = "auto", every_s: float = 2.0, plain_every_s: float = 15.0,
                 elapsed_before: float = 0.0, stream: TextIO | None = None, earlier: Counter | None = None,
                 earlier_seconds: list[float] | None = None, ledger: RetryLedger | None = None,
                 estimate_s: float | None = None, budget: Any = None) -> None:
        self.total, self.mode, self.every_s, self.plain_every_s = total, mode, every_s, plain_every_s
        self.budget = budget  # ``--budget adaptive``'s (``_allocation``): its stops are shown as they happen
        self.estimate_s = estimate_s
        self.ledger = ledger
        self.elapsed_before, self.stream = elapsed_before, stream
        self.earlier = Counter(earlier or {})
        self.earlier_seconds = [float(s) for s in earlier_seconds or [] if s is not None and math.isfinite(s)]
        self._reset()

    def _reset(self) -> None:
        self._start = time.monotonic()
        self._last_draw = self._last_line = -math.inf
        self._last_done: int | None = None
        self._done_at_start: int | None = None
        self._best: dict[str, float] = {}
        self._stops_shown: set[str] = set()
        self._ended: set[str] = set()
        self._seconds: list[float] = []  # this session's ended trials' times (Tune's time_total_s)
        self._bar: Any = None

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles callbacks with its state
        return {"total": self.total, "mode": self.mode, "every_s": self.every_s,
                "plain_every_s": self.plain_every_s, "elapsed_before": self.elapsed_before, "stream": None,
                "earlier": self.earlier, "earlier_seconds": self.earlier_seconds, "ledger": None,
                "estimate_s": self.estimate_s, "budget": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    @property
    def out(self) -> TextIO:
        return self.stream or sys.stdout

    def bar_mode(self) -> bool:
        if self.mode == "auto":
            return bool(getattr(self.out, "isatty", lambda: False)())
        return self.mode == "bar"

    def _counted(self, trials: list) -> list:
        """The trials that stand for a config: not one whose config trains again (``Requeue``)."""
        requeued = self.ledger.requeued if self.ledger is not None else set()
        return [trial for trial in trials if trial.trial_id not in requeued]

    # -- Tune's callback hooks --------------------------------------------------------------

    def on_step_end(self, iteration, trials, **info) -> None:
        now = time.monotonic()
        if now - self._last_draw < self.every_s:
            return
        self.update(snapshot(self._counted(trials), self._ended), now)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self._ended.add(trial.trial_id)
        seconds = (trial.last_result or {}).get("time_total_s")
        if isinstance(seconds, (int, float)) and math.isfinite(seconds):
            self._seconds.append(float(seconds))

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._ended.add(trial.trial_id)

    def on_experiment_end(self, trials, **info) -> None:
        self.update(snapshot(self._counted(trials), self._ended), time.monotonic(), force=True)
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    # -- drawing ----------------------------------------------------------------------------

    def update(self, shot: Snapshot, now: float, force: bool = False) -> None:
        """Draw ``shot``: the bar (or a plain line) and any cell whose best improved."""
        self._last_draw = now
        if self.earlier:  # what earlier sessions stored counts as done (--resume)
            shot = Snapshot(shot.counts + self.earlier, shot.best)
        if self._done_at_start is None:
            self._done_at_start = shot.done  # restored trials already done (--resume)
        for cell, (value, trial_id) in sorted(shot.best.items()):
            if value > self._best.get(cell, -math.inf):
                self._best[cell] = value
                self._write(f"best {OBJECTIVE} {cell}: {value:.4f} (trial {trial_id})")
        self._show_stops()
        status = self.status(shot, now - self._start)
        if self.bar_mode():
            self._draw_bar(shot, status)
        elif force or shot.done != self._last_done or now - self._last_line >= self.plain_every_s:
            self._write(f"[{duration(self.elapsed_before + now - self._start)}] {status}")
            self._last_line = now
        self._last_done = shot.done

    def _show_stops(self) -> None:
        """One line per pair the adaptive budget stopped since the last draw."""
        if self.budget is None:
            return
        for pair, stop in sorted(self.budget.stops().items()):
            if pair not in self._stops_shown:
                self._stops_shown.add(pair)
                self._write(f"stopped {pair}: {stop.k} of {self.budget.looks.maximum} trials per arm; {stop.reason}")

    def status(self, shot: Snapshot, session_s: float) -> str:
        """``3/12 configs done: 2 completed, 1 stopped, 0 failed; 2 running, 7 queued; ETA 1m20s; best ...``"""
        counts, done = shot.counts, shot.done
        running, interrupted = counts["running"], counts["interrupted"]
        queued = max(0, self.total - done - running - interrupted)
        best = max((value for value, _ in shot.best.values()), default=None)
        best_text = f"{best:.4f}" if best is not None else "-"
        cut = f"{interrupted} interrupted (not stored; --resume trains them), " if interrupted else ""
        return (f"{done}/{self.total} configs done: {counts[Status.COMPLETED]} completed, "
                f"{counts[Status.STOPPED]} stopped, {counts[Status.FAILED]} failed; {cut}{running} running, "
                f"{queued} queued; ETA {duration(self.eta(done, session_s, running))}; best {OBJECTIVE} {best_text}")

    def eta(self, done: int, session_s: float, running: int = 0) -> float | None:
        """The configs left times the mean measured trial time over the configs running at
        once; without trial times, at this session's rate; None before any config ends. In
        the session's first minutes (:data:`ESTIMATE_TRUSTED_S`, and until
        :data:`ESTIMATE_TRIALS` trial times are measured) the plan's estimate counts down."""
        if done >= self.total:
            return 0.0
        measured = self.earlier_seconds + self._seconds
        early = session_s < ESTIMATE_TRUSTED_S or len(measured) < ESTIMATE_TRIALS
        if self.estimate_s is not None and early and self.estimate_s > session_s:  # not once overrun
            return self.estimate_s - session_s
        if measured:
            return (self.total - done) * (sum(measured) / len(measured)) / max(1, running)
        finished_here = done - (self._done_at_start or 0)
        if finished_here <= 0 or session_s <= 0:
            return None
        return (self.total - done) * session_s / finished_here

    def _draw_bar(self, shot: Snapshot, status: str) -> None:
        from tqdm import tqdm

        if self._bar is None:
            # a terminal that reports no width (some ptys, CI consoles) would get an empty bar
            sized = _terminal_columns(self.out) > 0
            self._bar = tqdm(total=self.total, initial=shot.done, file=self.out, unit="config",
                             dynamic_ncols=sized, ncols=None if sized else 160, nrows=None if sized else 24,
                             bar_format="{percentage:3.0f}%|{bar:20}| {desc}")
        self._bar.n = shot.done
        elapsed = self.elapsed_before + time.monotonic() - self._start
        self._bar.set_description_str(f"[{duration(elapsed)}] {status}", refresh=False)
        self._bar.refresh()

    def _write(self, line: str) -> None:
        if self._bar is not None:
            from tqdm import tqdm

            tqdm.write(line, file=self.out)
        else:
            print(line, file=self.out, flush=True)


def _terminal_columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0
