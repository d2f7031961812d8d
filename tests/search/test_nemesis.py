"""The short nemesis (issue 51): a few seeded schedules of combined faults (tests/nemesis.py)
against a tiny real search on a real three-node Ray, with its store on a real S3 API behind a
switch of faults or on a small disk of its own; each fault followed by ``launch
--start-or-resume`` as an operator runs it, then every invariant checked (tests/checker.py):
every planned trial stored once, none over the budget, no config trained twice, failed rows
with their reason, ``store check`` clean, the summary equal to the rows, the verdicts
computed, no lease held, no process or temporary folder of the search's drivers left, no
trial worker left on the cluster, and every driver ending in one line.

The seeds below strike with nine kinds of fault between them (all but ``flip`` and
``s3_latency``, which the long run strikes with).
``NEMESIS_SEEDS=7,8`` replays those schedules exactly (``bench/nemesis.py --seeds 7,8`` too);
``bench/nemesis.py`` runs the long one (50 schedules and more)."""

from __future__ import annotations

import os

import pytest
from nemesis import BUDGET, play, schedule
from nemesis_world import World
from required import skip_or_fail

pytestmark = pytest.mark.slow  # a three-node Ray, drivers that start, die and resume, real training

#: Seed 10: local store, SIGTERM, the disk filled and freed, a node cycled; 12: S3, bursts of
#: errors and throttling, a trial's worker killed; 46: local, SIGKILL, a pause past the lease
#: and a takeover, a trial file torn (``nemesis.schedule(seed)`` lists them).
SEEDS = [int(s) for s in os.environ.get("NEMESIS_SEEDS", "10,12,46").split(",")]
REQUIRE_ENV = "ORTHOTUNE_REQUIRE_FULL_DISK"


@pytest.fixture(scope="module")
def world():
    built = World()
    yield built
    built.shutdown()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seeded_schedule_of_faults_loses_duplicates_and_leaves_nothing(world, tmp_path, seed):
    plan = schedule(seed)
    if world.disk_reason and any(f.kind == "disk_full" for f in plan.faults):
        skip_or_fail(f"schedule {seed} fills a disk: {world.disk_reason}", REQUIRE_ENV)
    outcome = play(world, seed, tmp_path)
    kinds = [f.kind for f in plan.faults]
    assert outcome.problems == [], (f"nemesis schedule seed {seed} ({plan.store}; {kinds}) found anomalies (replay: "
                                    f"NEMESIS_SEEDS={seed}): {outcome.problems}")
    assert sum(outcome.injected.values()) >= 1, outcome  # a schedule that struck nothing checked nothing
    assert outcome.trials == BUDGET
