"""The long nemesis (issue 51): many seeded schedules of combined faults against a tiny real
search on a real three-node Ray (a head and two worker nodes on loopback), its store local (a
small tmpfs of its own, so its disk can fill; root only, else those faults are left out and
said so) or on a real S3 API (moto's server behind a switch of errors, throttling and
latency), then every invariant checked (tests/checker.py). The schedules, faults and checks
are tests/nemesis.py's; this runs many and sums them up:

    N schedules, F faults (by kind), T trials checked, L lost, D duplicated, O over budget

then each anomaly with its seed; ``--seeds 17`` replays schedule 17 exactly (its faults and
their moments; the machine's timing aside). Exit 1 when any schedule found an anomaly.

    python bench/nemesis.py --seeds 0-49 --work /tmp/nemesis [--log FILE.jsonl]
    python bench/nemesis.py --summarize A.jsonl B.jsonl    (a run split over processes)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
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


def record(outcome: nemesis.Outcome) -> dict:
    """One schedule's figures, as a line of the JSON-lines log."""
    plan = outcome.schedule
    return {"seed": plan.seed, "store": plan.store, "faults": [f.kind for f in plan.faults],
            "injected": dict(outcome.injected), "trials": outcome.trials, "drivers": outcome.drivers,
            "problems": outcome.problems, "seconds": round(outcome.seconds, 1)}


def tally(records: list[dict]) -> dict:
    """The run's figures from its schedules' records."""
    faults = sum((Counter(r["injected"]) for r in records), Counter())
    problems = [p for r in records for p in r["problems"]]

    def total(pattern: str, size=lambda m: int(m.group(1))) -> int:
        return sum(size(m) for p in problems if (m := re.search(pattern, p)))

    return {"schedules": len(records), "faults": sum(faults.values()), "by_kind": dict(sorted(faults.items())),
            "trials": sum(r["trials"] for r in records), "drivers": sum(r["drivers"] for r in records),
            "lost": total(r": (\d+) lost$"),
            "duplicated": total(r"^trial ids stored twice: (\[.*\])$", lambda m: m.group(1).count(",") + 1)
            + total(r"^(\d+) config\(s\) trained twice"),
            "over_budget": total(r"^(\d+) trials stored, over the budget of (\d+)",
                                 lambda m: int(m.group(1)) - int(m.group(2))),
            "anomalies": [{"seed": r["seed"], "store": r["store"], "problem": p}
                          for r in records for p in r["problems"]],
            "seconds": sum(r["seconds"] for r in records)}


def summary(records: list[dict]) -> str:
    figures = tally(records)
    kinds = ", ".join(f"{kind} {n}" for kind, n in figures["by_kind"].items())
    lines = [f"{figures['schedules']} schedules, {figures['faults']} faults ({kinds}), {figures['trials']} trials "
             f"checked, {figures['lost']} lost, {figures['duplicated']} duplicated, {figures['over_budget']} over "
             f"budget; {len(figures['anomalies'])} anomalies; {figures['drivers']} driver sessions; "
             f"{figures['seconds']:.0f} s of schedules"]
    lines += [f"anomaly, seed {a['seed']} ({a['store']}): {a['problem']} (replay: python bench/nemesis.py --seeds "
              f"{a['seed']})" for a in figures["anomalies"]]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seeds, default=seeds("0-49"),
                        help="schedules to play: 0-49, 3,7 (default 0-49)")
    parser.add_argument("--work", type=Path, default=None, help="where the schedules' stores go (default: a temp dir)")
    parser.add_argument("--log", type=Path, default=None,
                        help="append each schedule's figures to this JSON-lines file (default: WORK/schedules.jsonl)")
    parser.add_argument("--summarize", type=Path, nargs="+", default=None,
                        help="play nothing: sum up these JSON-lines logs (runs split over several processes)")
    args = parser.parse_args()
    if args.summarize:
        records = [json.loads(line) for path in args.summarize for line in path.read_text().splitlines() if line]
        print(summary(records))
        return 1 if tally(records)["anomalies"] else 0
    work = args.work or Path(tempfile.mkdtemp(prefix="nemesis-"))
    work.mkdir(parents=True, exist_ok=True)
    log = args.log or work / "schedules.jsonl"
    world = World()
    if world.disk_reason:
        print(f"disk_full faults left out: {world.disk_reason}", flush=True)
    records = []
    try:
        for seed in args.seeds:
            found = record(nemesis.play(world, seed, work))
            records.append(found)
            with open(log, "a") as sink:
                print(json.dumps(found), file=sink)
            verdict = "ok" if not found["problems"] else f"{len(found['problems'])} ANOMALIES"
            print(f"seed {seed} ({found['store']}; {', '.join(found['faults'])}): {found['injected']} struck, "
                  f"{found['trials']} trials, {found['drivers']} drivers, {found['seconds']:.0f} s: {verdict}",
                  flush=True)
            for problem in found["problems"]:
                print(f"  seed {seed}: {problem}", flush=True)
    finally:
        world.shutdown()
    print(summary(records))
    return 1 if tally(records)["anomalies"] else 0


if __name__ == "__main__":
    sys.exit(main())
