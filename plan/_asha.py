"""ASHA's expected epochs per trial: the rungs of Ray's one-bracket ASHA, the chance a trial
continues at each, and the mean epochs (or reports to Tune) of a cell's trials. Part of the
plan's arithmetic (``_estimate``): it imports nothing of orthotune, nor anything heavy."""

from __future__ import annotations

import math
from functools import lru_cache


def asha_rungs(grace_period: int, max_t: int, reduction_factor: int) -> list[int]:
    """The epochs at which Ray's ASHA (one bracket) compares trials, ascending: ``grace x rf^k``
    for as many ``k`` as Ray's ``_Bracket`` makes (``int(log(max_t/grace)/log(rf) + 1)``)."""
    count = int(math.log(max_t / grace_period) / math.log(reduction_factor) + 1)
    return [grace_period * reduction_factor**k for k in range(count)]


def continue_probability(recorded: int, reduction_factor: int) -> float:
    """The chance that a trial continues at a rung where ``recorded`` trials were recorded
    before it, scores independent and continuous: Ray stops it below the ``q = 1 - 1/rf``
    percentile of those (numpy's linear interpolation), whose expectation over ``j`` uniform
    scores is ``(q (j - 1) + 1) / (j + 1)``; the first trial (``j = 0``) always continues."""
    if recorded <= 0:
        return 1.0
    q = 1.0 - 1.0 / reduction_factor
    return 1.0 - (q * (recorded - 1) + 1.0) / (recorded + 1)


def survivors(arrivals: float, reduction_factor: int) -> float:
    """The expected number of ``arrivals`` trials (possibly fractional: an expectation) that
    continue past one rung, each compared with those recorded before it."""
    whole = math.floor(arrivals)
    expected = sum(continue_probability(j, reduction_factor) for j in range(whole))
    return expected + (arrivals - whole) * continue_probability(whole, reduction_factor)


def stop_epoch(milestone: int, report_every: int) -> int:
    """The epoch a trial stopped at rung ``milestone`` has trained: ASHA decides on reports,
    which come every ``report_every`` epochs."""
    return math.ceil(milestone / report_every) * report_every


def reports(epochs: int, report_every: int) -> int:
    """The reports to Tune of a trial that trained ``epochs``: one every ``report_every``
    epochs, the last with the final report (``search._trainable``)."""
    return math.ceil(epochs / report_every)


@lru_cache(maxsize=256)
def asha_expected_epochs(trials: int, max_t: int, grace_period: int, reduction_factor: int,
                         report_every: int = 1, count_reports: bool = False) -> float:
    """The mean epochs of a cell's ``trials`` under ASHA with the cap ``max_t``: all train to
    the first rung; the expected survivors of each rung (:func:`survivors`) train on to the
    next one, and the last rung's survivors to the cap. ``count_reports``: the mean reports
    to Tune instead (:func:`reports` of the epoch each trial stops at)."""
    if trials <= 0:
        return 0.0
    count = (lambda epoch: reports(epoch, report_every)) if count_reports else (lambda epoch: epoch)
    rungs = [min(stop_epoch(r, report_every), max_t) for r in asha_rungs(grace_period, max_t, reduction_factor)]
    arriving, total, previous = float(trials), 0.0, 0
    for rung in rungs:
        total += arriving * (count(rung) - count(previous))
        arriving, previous = survivors(arriving, reduction_factor), rung
    total += arriving * (count(max_t) - count(previous))
    return total / trials


def expected_epochs(stops_at_rungs: bool, trials: int, max_t: int, grace_period: int, reduction_factor: int,
                    report_every: int = 1, count_reports: bool = False) -> float:
    """Mean epochs per trial of a cell: ASHA's expectation under a scheduler that stops trials
    at rungs, else the cap (patience not modelled: see the module's note). ``count_reports``:
    the mean reports to Tune per trial instead."""
    if stops_at_rungs and grace_period < max_t:
        return asha_expected_epochs(trials, max_t, grace_period, reduction_factor, report_every, count_reports)
    return float(reports(max_t, report_every) if count_reports else max_t)
