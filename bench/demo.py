"""`make demo`, a newcomer's first search: its wall time, and how much of it is training.

Runs the demo's own recipe, as ``make -n demo`` prints it (the launch of the ``quick``
search on a local Ray, then its report), one command at a time in a fresh process each,
with a new store and search name, and prints:

- each command's wall time and the whole recipe's (the virtual environment already set up);
- the search's own time (its record's ``elapsed_s``: from the search's start in the driver,
  after Ray's start, to its end), and the launch command's time around it (the driver's
  imports and checks, Ray's start and shutdown);
- the training inside it: the trials' training seconds (each on one core), summed, as a
  share of the recipe's core-seconds (cores x wall) and of the search's.

    .venv/bin/python bench/demo.py --data-root ../shared/data [--json]

The reports it writes go where ``make demo`` writes them (``runs/NAME/``); the store is a
temporary folder, removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def recipe(store: str, search: str) -> list[list[str]]:
    """The demo's commands as make would run them (``make -n``: printed, not run), without
    its messages; the environment's setup is taken as done (``-o setup``)."""
    # a make inside make (`make test`) would pass its flags down and print its folder changes
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    printed = subprocess.run(["make", "--no-print-directory", "-n", "-o", "setup", "-o", ".venv/bin/orthotune",
                              "demo", f"STORE={store}", f"SEARCH={search}"], cwd=ROOT, env=env, capture_output=True,
                             text=True, check=True).stdout
    return [shlex.split(line) for line in printed.splitlines() if line.strip() and not line.startswith("echo")]


def timed(command: list[str], env: dict[str, str]) -> float:
    """The wall seconds of one command; its output is kept back unless it fails."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{shlex.join(command)} exited {done.returncode}:\n{done.stderr}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", help="the raw data folder (default: $ORTHOTUNE_DATA_ROOT)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.data_root:
        env["ORTHOTUNE_DATA_ROOT"] = str(Path(args.data_root).resolve())
    env.setdefault("ORTHOTUNE_CACHE", str(ROOT / "runs" / "cache"))  # the Makefile's default
    search = f"demo-bench-{datetime.now():%Y%m%d-%H%M%S}"
    with tempfile.TemporaryDirectory(prefix="demo-bench-") as folder:
        store = f"{folder}/store"
        commands = recipe(store, search)
        walls = [timed(command, env) for command in commands]
        figures = _figures(store, search, commands, walls)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    cores = figures["cores"]
    print(f"make demo's recipe on {cores} cores, {figures['trials']} trials of search {search}:")
    for command, wall in zip(figures["commands"], figures["walls"]):
        print(f"  {wall:7.2f} s  {command}")
    print(f"  {figures['total_s']:7.2f} s  in all")
    print(f"the search itself (its record's elapsed_s): {figures['search_s']:.2f} s; the launch command around it: "
          f"{figures['walls'][0] - figures['search_s']:.2f} s (imports, checks, Ray's start and shutdown)")
    print(f"training: {figures['training_core_s']:.2f} core-seconds = {figures['training_share']:.1%} of the "
          f"recipe's {cores} x {figures['total_s']:.2f} s, {figures['training_share_of_search']:.1%} of the search's "
          f"{cores} x {figures['search_s']:.2f} s")


def _figures(store: str, search: str, commands: list[list[str]], walls: list[float]) -> dict:
    from orthotune.store import Store

    opened = Store.open(store)
    trials = opened.read("trials", search=search)
    search_s = float(opened.search_meta(search)["elapsed_s"])
    training = float(sum(trials.column("seconds").to_pylist()))
    cores = os.cpu_count() or 1
    total = sum(walls)
    return {"cores": cores, "trials": trials.num_rows, "commands": [shlex.join(c[:3]) + " ..." for c in commands],
            "walls": walls, "total_s": total, "search_s": search_s, "training_core_s": training,
            "training_share": training / (cores * total), "training_share_of_search": training / (cores * search_s)}


if __name__ == "__main__":
    sys.exit(main())
