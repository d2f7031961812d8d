"""The service's own overhead per Ray trial and per report to Tune, on this machine.

Small real searches through orthotune's launch path on a private local Ray (Optuna and ASHA,
one trial at a time; Cora GCN-2, ``--epochs`` each, nothing stopped early), at several
``--configs-per-trial`` and ``--report-every``, each search's wall against the trainer's own
seconds for the same trial groups without Ray; the overheads fitted as ``fixed + Ray trials x
per_trial_s + reports x per_report_s`` (``orthotune.plan._overhead_probe``, which ``orthotune
plan`` runs once per environment too). Writes the JSON that ``orthotune plan
--service-overhead FILE`` reads (how a plan on a GPU host without Ray includes it) and
prints a table.

    .venv/bin/python bench/service_overhead.py --data-root ../shared/data --out service-overhead.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time

from orthotune.plan import measure_overhead


def table(result: dict) -> str:
    """Each search's figures, then the fit."""
    lines = ["| configs | per trial | report every | Ray trials | reports | search s | trainer s | overhead s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        lines.append(f"| {r['configs']} | {r['configs_per_trial']} | {r['report_every']} | {r['ray_trials']} | "
                     f"{r['reports']} | {r['search_s']:.2f} | {r['trainer_s']:.2f} | {r['overhead_s']:.2f} |")
    fit = result["fit"]
    lines += ["", f"per Ray trial: {result['per_trial_s']:.4f} s (fitted {fit['per_trial_s']:.4f})",
              f"per report:    {result['per_report_s']:.5f} s (fitted {fit['per_report_s']:.5f})",
              f"fixed per search: {fit['fixed_s']:.2f} s; with trial groups: {fit['fixed_grouped_s']:.2f} s; "
              f"residual rms {fit['residual_rms_s']:.3f} s",
              f"measured {result['measured']['date']} on {result['measured']['machine']} "
              f"({result['measured']['cores']} cores), load {result['load_before']} before, "
              f"{result['measured']['load']} after; Ray {result['measured']['ray']}; {result['wall_s']:.1f} s"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=os.environ.get("ORTHOTUNE_DATA_ROOT"))
    parser.add_argument("--epochs", type=int, help="epochs per config (default: the plan's probe's, 10)")
    parser.add_argument("--repeats", type=int, default=2, help="times each search runs (default: %(default)s)")
    parser.add_argument("--out", help="write the JSON here (what orthotune plan --service-overhead reads)")
    args = parser.parse_args(argv)
    load = [round(x, 2) for x in os.getloadavg()]
    start = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # Tune's lines; stdout is the table
        more = {} if args.epochs is None else {"epochs": args.epochs}
        result = measure_overhead(repeats=args.repeats, data_root=args.data_root, **more)
    result.update(load_before=load, wall_s=time.perf_counter() - start)
    result["measured"]["command"] = " ".join(["bench/service_overhead.py", *(argv if argv is not None else
                                                                              sys.argv[1:])])
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=1)
    print(table(result))


if __name__ == "__main__":
    main()
