"""A plan made elsewhere (``orthotune plan --json``, e.g. on a GPU host without Ray), priced
again with the service's overhead measured on a machine with Ray (``bench/service_overhead.py``'s
JSON): every Ray trial pays ``per_trial_s`` once and ``per_report_s`` per expected report.

The plan's own figures (seconds per epoch, set-up, expected epochs) are kept as measured; the
expected reports come from the space's ASHA rungs and ``--report-every`` (the launch default
unless given), as ``orthotune plan`` computes them.

    python bench/plan_reprice.py bench/h200/plan-full-1gpu-cpt8.json --service-overhead bench/service-overhead-cpu.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from orthotune.plan import (
    CellEstimate,
    PlanEstimate,
    Resources,
    ServiceOverhead,
    expected_epochs,
    read_service_overhead,
)
from orthotune.search import SCHEDULERS, LaunchOptions
from orthotune.spaces import resolve_space


def reprice(plan: dict, overhead: ServiceOverhead, report_every: int) -> PlanEstimate:
    space = resolve_space(plan["space"])
    rungs = SCHEDULERS.get(plan["scheduler"]).stops_at_rungs
    names = {f.name for f in dataclasses.fields(CellEstimate)}
    cells = []
    for row in plan["cells"]:
        values = {k: v for k, v in row.items() if k in names}
        values["sources"] = tuple(values.get("sources", ()))
        values["expected_reports"] = expected_epochs(rungs, row["trials"], row["epochs"], space.grace_period,
                                                     space.reduction_factor, report_every, count_reports=True)
        cells.append(CellEstimate(**values))
    resources = Resources(**plan["resources"])
    estimate = PlanEstimate(plan["space"], plan["scheduler"], plan["searcher"], tuple(cells), resources,
                            plan["cpus_per_trial"], plan["gpus_per_trial"], plan["concurrency"],
                            plan["totals"].get("start_s", 0.0), plan.get("machine", {}))
    about = {"source": overhead.source, "measured": overhead.measured}  # as orthotune plan says it
    return estimate.with_service(overhead.per_trial_s, overhead.per_report_s, about)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="+", type=Path)
    parser.add_argument("--service-overhead", required=True)
    parser.add_argument("--report-every", type=int, default=LaunchOptions.__dataclass_fields__["report_every"].default)
    args = parser.parse_args()
    overhead = read_service_overhead(args.service_overhead)  # the plan's own reader, checks included
    print("| plan | Ray trials | trainer s | service s | service share | wall s | wall h |")
    print("|---|---|---|---|---|---|---|")
    for path in args.plans:
        priced = reprice(json.loads(path.read_text()), overhead, args.report_every)
        t = priced.totals()
        trainer = sum(c.trainer_s * c.tune_trials for c in priced.cells)
        print(f"| {path.name} | {t['tune_trials']} | {trainer:.0f} | {t['service_s']:.0f} | "
              f"{100 * t['service_share']:.2f}% | {t['wall_s']:.0f} | {t['wall_s'] / 3600:.2f} |")


if __name__ == "__main__":
    main()
