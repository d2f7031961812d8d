"""Replay an adaptive budget on stored fixed-budget searches (issue 47, item 5b).

For every pair of the searches, the stopping rule is applied to the first-k prefixes of
each arm's stored trials (in the tuning curve's start order) at looks k = first, first +
step, ..., the maximum; the pair's verdict at its stop (sign and Holm significance, the
pairs' p-values at their stops as one family) is compared with the fixed budget's (the
whole search, its own family). Prints one row per pair and the totals: the share of pairs
that kept their verdict, the trials and the training seconds the stops would have spent
against the fixed budget's. Nothing trains: the stored rows are read.

    python bench/adaptive_replay.py --store runs/store --search replay-webkb replay-semi

The corpus: ``bench/replay-webkb.yaml`` and ``bench/replay-semi.yaml`` (their headers say how
to run them); measured figures: docs/adaptive.md.
"""

from __future__ import annotations

import argparse
import json

from orthotune.cli import default_store, run_script
from orthotune.reports import Filters, adaptive_replay
from orthotune.search import FEW_TRIALS, LOOK_STEP, STOPPING_RULES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=default_store(),
                        help="the results store (default: $ORTHOTUNE_STORE, else runs/store)")
    parser.add_argument("--search", nargs="+", required=True, help="the fixed-budget searches to replay")
    parser.add_argument("--rule", default="flat", help=f"stopping rule, one of: {', '.join(STOPPING_RULES.names())}")
    parser.add_argument("--first", type=int, default=FEW_TRIALS, help=f"first look (default: {FEW_TRIALS})")
    parser.add_argument("--step", type=int, default=LOOK_STEP, help=f"trials between looks (default: {LOOK_STEP})")
    parser.add_argument("--maximum", type=int, help="trials per arm at the last look (default: the fewest stored)")
    parser.add_argument("--json", action="store_true", help="the table as JSON lines")
    args = parser.parse_args(argv)
    replay = adaptive_replay(args.store, Filters(searches=tuple(args.search)), rule=args.rule, first=args.first,
                             step=args.step, maximum=args.maximum)
    table = replay.table
    if args.json:
        for row in table.to_dict("records"):
            print(json.dumps(row, default=str))
        return 0
    print(f"rule {replay.rule}, looks {', '.join(map(str, replay.looks))} trials per arm")
    print(f"{'pair':<40} {'fixed verdict':<32} {'adaptive verdict':<32} {'stop':>5} {'trials':>7}")
    for row in table.to_dict("records"):
        fixed = f"{row['fixed_verdict']} ({100 * row['fixed_gain']:+.2f})"
        adaptive = f"{row['adaptive_verdict']} ({100 * row['adaptive_gain']:+.2f})"
        share = f"{row['stop'] / row['trials']:.0%}" if row["stop"] else "open"
        print(f"{row['pair']:<40} {fixed:<32} {adaptive:<32} {row['stop'] or '-':>5} {share:>7}"
              + ("" if row["kept"] else "   changed"))
    kept = int(table["kept"].sum())
    print(f"kept the fixed budget's verdict: {kept} of {len(table)} pairs ({kept / len(table):.0%}); "
          f"trials: {replay.trial_fraction:.1%} of the fixed budget's; training seconds: "
          f"{replay.seconds_fraction:.1%} ({table['seconds'].sum():.0f} of {table['seconds_fixed'].sum():.0f} s)")
    return 0


if __name__ == "__main__":
    run_script(main)  # a store or search that is not there: one line and exit 2, as the CLI's
