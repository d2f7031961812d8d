"""Write a report (paper-style table, paired comparison, plots) from a store: md, csv, latex, html."""

from __future__ import annotations

import argparse

from orthotune.cli.best import add_filter_arguments, filters_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from orthotune.reports import FORMATS  # only when `report` is the command: its names are the choices

    add_filter_arguments(parser)
    parser.add_argument("--format", default="md", metavar="FORMAT",
                        help=f"one of: {', '.join(FORMATS.names())} (default: %(default)s)")
    parser.add_argument("-o", "--output", metavar="OUT",
                        help="file to write (md/latex put the plots beside it; html embeds them); "
                             "default: print to stdout")


def run(args: argparse.Namespace) -> int:
    from orthotune.reports import FORMATS, build_report, write_report

    fmt = FORMATS.get(args.format)  # a bad format fails before any work
    report = build_report(args.store, filters_from_args(args), plots=fmt.wants_figures(args.output))
    text = write_report(report, args.format, args.output)
    if text is not None:
        print(text, end="" if text.endswith("\n") else "\n")
    return 0
