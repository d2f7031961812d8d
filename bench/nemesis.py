"""The long nemesis (issue 51): many seeded schedules of combined faults against a tiny real
search on a real three-node Ray (a head and two worker nodes on loopback), its store local (a
small tmpfs of its own, so its disk can fill; root only, else those faults are left out and
said so) or on a real S3 API (moto's server behind a switch of errors, throttling and
latency), then every invariant checked (tests/checker.py). The schedules, faults and checks
are tests/nemesis.py's; this runs many and sums them up:

    N schedules, F faults (by kind), T trials checked, L lost, D duplicated, O over budget

then each anomaly with its seed; ``--seeds 17`` replays schedule 17 exactly (its faults and
their moments; the machine's timing aside). Exit 1 when any schedule found an anomaly.

    python bench/nemesis.py --seeds 0-49 --work /tmp/nemesis [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the nemesis and its checker

import nemesis  # noqa: E402
from nemesis_world import World  # noqa: E402


def seeds(text: str) -> list[int]:
    """``0-49``, ``3,7,9`` or a mix (``0-4,17``)."""
    found = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        found += list(range(int(low), int(high or low) + 1))
    return found


def tally(outcomes: list[nemesis.Outcome]) -> dict:
    faults = sum((o.injected for o in outcomes), Counter())
    problems = [p for o in outcomes for p in o.problems]

    def count(pattern: str) -> int:
        return sum(int(m.group(1)) for p in problems if (m := re.search(pattern, p)))

    return {"schedules": len(outcomes), "faults": sum(faults.values()), "by_kind": dict(sorted(faults.items())),
            "trials": sum(o.trials for o in outcomes), "drivers": sum(o.drivers for o in outcomes),
            "lost": count(r": (\d+) lost$"),
            "duplicated": count(r"stored twice: \[(\d+)") + count(r"(\d+) config\(s\)"),
            "over_budget": count(r"^(\d+) trials stored, over"),
            "anomalies": [{"seed": o.schedule.seed, "store": o.schedule.store, "problem": p}
                          for o in outcomes for p in o.problems],
            "seconds": [round(o.seconds, 1) for o in outcomes]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seeds, default=seeds("0-49"),
                        help="schedules to play: 0-49, 3,7 (default 0-49)")
    parser.add_argument("--work", type=Path, default=None, help="where the schedules' stores go (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="nemesis-"))
    work.mkdir(parents=True, exist_ok=True)
    world = World()
    if world.disk_reason:
        print(f"disk_full faults left out: {world.disk_reason}", flush=True)
    outcomes = []
    started = time.monotonic()
    try:
        for seed in args.seeds:
            outcome = nemesis.play(world, seed, work)
            outcomes.append(outcome)
            kinds = ", ".join(f.kind for f in outcome.schedule.faults)
            verdict = "ok" if not outcome.problems else f"{len(outcome.problems)} ANOMALIES"
            print(f"seed {seed} ({outcome.schedule.store}; {kinds}): {dict(outcome.injected)} struck, "
                  f"{outcome.trials} trials, {outcome.drivers} drivers, {outcome.seconds:.0f} s: {verdict}", flush=True)
            for problem in outcome.problems:
                print(f"  seed {seed}: {problem} (replay: python bench/nemesis.py --seeds {seed})", flush=True)
    finally:
        world.shutdown()
    figures = tally(outcomes)
    figures["wall_s"] = round(time.monotonic() - started, 1)
    kinds = ", ".join(f"{kind} {n}" for kind, n in figures["by_kind"].items())
    print(f"{figures['schedules']} schedules, {figures['faults']} faults ({kinds}), "
          f"{figures['trials']} trials checked, "
          f"{figures['lost']} lost, {figures['duplicated']} duplicated, {figures['over_budget']} over budget; "
          f"{len(figures['anomalies'])} anomalies; {figures['drivers']} driver sessions; {figures['wall_s']:.0f} s")
    for anomaly in figures["anomalies"]:
        print(f"anomaly, seed {anomaly['seed']} ({anomaly['store']}): {anomaly['problem']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 1 if figures["anomalies"] else 0


if __name__ == "__main__":
    sys.exit(main())
