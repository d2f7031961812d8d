"""`orthotune plan` against reality: the plan's estimate, then the real search, for two spaces.

For each space (``quick``, and a 2-dataset x 2-depth space with ASHA: Cora and CiteSeer, GCN
at depths 2 and 4, both arms), in fresh processes:

1. ``orthotune plan --space S --json`` (measures the shapes not cached yet);
2. ``orthotune launch --space S`` on a new store (its plan is then cached: it prints the
   total at once; the plan measures with launch's own ``--measure-epochs``, the default, or
   launch would measure its shapes again inside the timed wall), timed from the command's
   start to its end;

and prints estimated against actual: the wall time (the plan's ``wall_s`` against the launch
command's wall) and the trials' core-seconds (the plan's ``core_s`` against the sum of the
store's ``seconds``, each trial's training on one core), then where the error comes from: the
mean epochs per trial (the plan's ASHA expectation against the store's ``epochs``) and the
seconds per epoch-trial (the plan's measured pack cost against each trial's seconds over its
epochs), and the launch's wall in three parts: before its first trial trained (the fixed start
the plan estimates), the trials' span (first training start to last end, from the store's
``finished_at`` and ``seconds``), and after the last trial (results printed, Ray stopped).

    .venv/bin/python bench/plan.py --data-root ../shared/data [--json]

The stores are temporary folders, removed afterwards; the measured shapes stay in orthotune's
cache ($ORTHOTUNE_CACHE), as a plan's do.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from orthotune.plan import MEASURE_EPOCHS
from orthotune.store import Store

ROOT = Path(__file__).resolve().parents[1]
#: The second space: two datasets x two depths, both arms, ASHA per cell; small budgets.
GRID_2X2 = {
    "name": "plan-2x2", "datasets": ["cora", "citeseer"], "setting": "full", "repeats": [0, 1, 2],
    "backbones": ["gcn"], "depths": [2, 4], "original": True,
    "ortho": {"T": {"low": 1, "high": 6}, "beta": {"low": 0.1, "high": 1.0, "step": 0.1}, "lam": [1.0e-4, 5.0e-4]},
    "train": {"lr": [0.005, 0.01, 0.02], "weight_decay": [5.0e-5, 5.0e-4], "epochs": 60, "patience": 60},
    "asha": {"grace_period": 10, "reduction_factor": 3}, "samples": 3,
}


def orthotune(*words: str, env: dict[str, str]) -> tuple[str, float]:
    """stdout and wall seconds of one ``orthotune`` command in a fresh process."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "orthotune.cli", *words], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"orthotune {' '.join(words)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout, wall


def compare(space: str, store: Path, env: dict[str, str], measure_epochs: int) -> dict:
    plan_out, plan_wall = orthotune("plan", "--space", space, "--json", "--measure-epochs", str(measure_epochs),
                                    env=env)
    plan = json.loads(plan_out)
    name = f"bench-{Path(space).stem}"
    launched = time.time()
    launch_out, launch_wall = orthotune("launch", "--space", space, "--store", str(store), "--name", name,
                                        "--progress", "off", env=env)
    trials = Store.open(str(store)).read("trials", search=name).to_pylist()
    first_start = min(t["finished_at"].timestamp() - (t["seconds"] or 0.0) for t in trials)
    last_end = max(t["finished_at"].timestamp() for t in trials)
    seconds = sum(t["seconds"] or 0.0 for t in trials)
    epochs = [t["epochs"] for t in trials if t["epochs"]]
    cells = plan["cells"]
    planned_epochs = sum(c["expected_epochs"] * c["trials"] for c in cells) / sum(c["trials"] for c in cells)
    per_epoch_planned = sum(c["seconds_per_epoch"] * c["trials"] for c in cells) / sum(c["trials"] for c in cells)
    per_epoch_actual = sum((t["seconds"] or 0.0) for t in trials) / max(1, sum(epochs))
    totals = plan["totals"]
    return {
        "space": plan["space"], "trials": len(trials), "planned_trials": totals["trials"],
        "plan_command_s": plan_wall, "shapes_measured_now": sum(1 for c in cells if not c["cached"]),
        "launch_printed": next((line for line in launch_out.splitlines() if line.startswith("plan: ")), None),
        "wall_estimated_s": totals["wall_s"], "wall_actual_s": launch_wall,
        "core_estimated_s": totals["core_s"], "core_actual_s": seconds,
        "start_estimated_s": totals["start_s"], "before_first_trial_s": first_start - launched,
        "trials_span_s": last_end - first_start, "trials_span_estimated_s": totals["wall_s"] - totals["start_s"],
        "after_last_trial_s": launched + launch_wall - last_end,
        "epochs_per_trial_estimated": planned_epochs, "epochs_per_trial_actual": sum(epochs) / max(1, len(epochs)),
        "s_per_epoch_estimated": per_epoch_planned, "s_per_epoch_actual": per_epoch_actual,
        "load_average": os.getloadavg(),
    }


def error(estimated: float | None, actual: float) -> str:
    return "?" if estimated is None or not actual else f"{100 * (estimated - actual) / actual:+.0f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", help="the raw data folder (default: $ORTHOTUNE_DATA_ROOT)")
    parser.add_argument("--measure-epochs", type=int, default=MEASURE_EPOCHS,
                        help=f"plan's epochs timed per shape (default: {MEASURE_EPOCHS}, launch's own; another "
                             "value makes launch measure its shapes again, inside the wall it is compared with)")
    parser.add_argument("--spaces", nargs="+", choices=("quick", "2x2"), default=["quick", "2x2"],
                        help="which of the two spaces to run (default: both)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if args.data_root:
        env["ORTHOTUNE_DATA_ROOT"] = str(Path(args.data_root).resolve())
    env.setdefault("ORTHOTUNE_CACHE", str(ROOT / "runs" / "cache"))  # the Makefile's default
    rows = []
    if not args.json:
        print("| space | trials | wall estimated | wall actual | error | core-s estimated | core-s actual | error | "
              "epochs/trial est. / actual | s per epoch-trial est. / actual |")
        print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory(prefix="orthotune-bench-plan-") as scratch:
        space = Path(scratch) / "plan-2x2.yaml"
        space.write_text(yaml.safe_dump(GRID_2X2))
        for index, name in enumerate(args.spaces):
            rows.append(compare("quick" if name == "quick" else str(space), Path(scratch) / f"store{index}", env,
                                args.measure_epochs))
            if not args.json:  # each row as soon as it is measured
                print(row_text(rows[-1]), flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        print(f"{r['space']}: plan command {r['plan_command_s']:.1f} s ({r['shapes_measured_now']} shapes measured), "
              f"start estimated {r['start_estimated_s']:.1f} s, actual {r['before_first_trial_s']:.1f} s before "
              f"the first trial trained and {r['after_last_trial_s']:.1f} s after the last; trials' span "
              f"estimated {r['trials_span_estimated_s']:.1f} s, actual {r['trials_span_s']:.1f} s; "
              f"load average at the end "
              f"{', '.join(f'{v:.1f}' for v in r['load_average'])}; launch printed: {r['launch_printed']}")


def row_text(r: dict) -> str:
    return (f"| {r['space']} | {r['trials']} | {r['wall_estimated_s']:.1f} s | {r['wall_actual_s']:.1f} s | "
            f"{error(r['wall_estimated_s'], r['wall_actual_s'])} | {r['core_estimated_s']:.1f} | "
            f"{r['core_actual_s']:.1f} | {error(r['core_estimated_s'], r['core_actual_s'])} | "
            f"{r['epochs_per_trial_estimated']:.1f} / {r['epochs_per_trial_actual']:.1f} | "
            f"{r['s_per_epoch_estimated']:.4f} / {r['s_per_epoch_actual']:.4f} |")


if __name__ == "__main__":
    main()
