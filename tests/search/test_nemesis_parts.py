"""The nemesis's parts, each shown to catch or do what it claims (issue 51): the S3 fault
switch answers as S3 does, the corruptions corrupt, the schedules replay from their seed, and
the checker's new invariants fail on a store or a machine that breaks them."""

from __future__ import annotations

import random
import subprocess
import time

import pytest
from checker import anomalies, leftovers
from nemesis import COMMON, KINDS, ONLY, schedule
from nemesis_world import corrupt
from s3_faults import FaultySwitch

from orthotune.core import ConfigResult, RunResult, TrainConfig
from orthotune.store import Store, trial_row


def passed(environ, start_response):
    start_response("200 OK", [("Content-Length", "2")])
    return [b"ok"]


def call(app) -> tuple[str, bytes]:
    answered = []
    body = b"".join(app({"CONTENT_LENGTH": "0"}, lambda status, headers: answered.append(status)))
    return answered[0], body


def test_the_switch_refuses_throttles_and_delays_for_a_burst_only():
    switch = FaultySwitch(passed, seed=1)
    assert call(switch) == ("200 OK", b"ok")
    switch.burst("s3_throttle", 30)
    status, body = call(switch)
    assert status == "503 Slow Down" and b"<Code>SlowDown</Code>" in body
    switch.burst("s3_error", 30)
    status, body = call(switch)
    assert status.startswith("500") and b"<Code>InternalError</Code>" in body
    switch.burst("s3_latency", 30, delay_s=0.2)
    started = time.monotonic()
    assert call(switch) == ("200 OK", b"ok") and time.monotonic() - started >= 0.2
    switch.burst("s3_error", 0.01)
    time.sleep(0.02)
    assert call(switch) == ("200 OK", b"ok")  # the burst is over
    assert switch.served == {"s3_throttle": 1, "s3_error": 1, "s3_latency": 1}
    with pytest.raises(ValueError, match="'s3_down' is not one of"):
        switch.burst("s3_down", 1)


def test_corruption_tears_or_flips_bits():
    data, rng = bytes(range(256)) * 4, random.Random(0)
    torn = corrupt(data, "truncate", rng)
    assert len(torn) < len(data) and data.startswith(torn)
    for _ in range(20):
        flipped = corrupt(data, "flip", rng)
        changed = [i for i in range(len(data)) if data[i] != flipped[i]]
        assert len(flipped) == len(data) and 1 <= len(changed) <= 4
        assert all(bin(data[i] ^ flipped[i]).count("1") == 1 for i in changed)


def test_a_schedule_replays_from_its_seed_and_strikes_only_what_its_store_allows():
    assert schedule(7) == schedule(7) and schedule(7) != schedule(8)
    drawn = [schedule(seed) for seed in range(200)]
    assert {f.kind for s in drawn for f in s.faults} == set(KINDS)
    for plan in drawn:
        assert {f.kind for f in plan.faults} <= {*COMMON, *ONLY[plan.store]}
        assert [f.after_trials for f in plan.faults] == sorted(f.after_trials for f in plan.faults)


def test_leftovers_name_a_process_of_a_drivers_session_and_a_temporary_folder(tmp_path):
    left = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a driver's session, left running
    try:
        (tmp_path / "orthotune-tune-1-host-abc").mkdir()
        (tmp_path / "unrelated").mkdir()
        found = leftovers([left.pid], tmp_path)
        assert f"process {left.pid} (sleep) of driver {left.pid}'s session is left running" in found, found
        assert "temporary folder orthotune-tune-1-host-abc is left behind" in found and len(found) == 2, found
    finally:
        left.kill()
        left.wait()
    (tmp_path / "orthotune-tune-1-host-abc").rmdir()
    assert leftovers([left.pid], tmp_path) == []


@pytest.mark.slow
def test_the_checker_fails_a_search_whose_verdicts_cannot_be_computed(tmp_path):
    store = Store.open(str(tmp_path / "store"), create=True)
    config = TrainConfig(dataset="cora", depth=2, ortho=False, splits=(0,))
    result = ConfigResult(config, [RunResult(split, seed, val_acc=0.5, test_acc=0.5) for split, seed in config.runs()])
    store.write_trial(trial_row("s", "only", result, "completed"), [])
    store.write_summary("s", {"completed": 1})
    store.save_search_meta("s", {"state": "finished"})
    assert anomalies(tmp_path / "store", "s", budget=1) == []
    found = anomalies(tmp_path / "store", "s", budget=1, pairs=1)  # one arm alone: no pair to judge
    assert len(found) == 1 and found[0].startswith(
        "0 of 1 pairs judged (both arms' winners, their gain): ['cora full gcn depth 2 (default): no test (no "
        "Ortho-GConv winner)"), found
    found = anomalies(tmp_path / "store", "s", budget=1, grid={"lr": [0.5]})
    assert found == [f"trial only holds lr={config.lr!r}, not one of the space's [0.5]"], found
