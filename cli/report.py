"""Write a report (paper-style table, paired comparison, plots) from a store: md, csv, latex, html."""

from __future__ import annotations

import argparse

from orthotune.cli.best import add_filter_arguments, filters_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from orthotune.reports import FORMATS  # only when `report` is the command: its names are the choices

    add_filter_arguments(parser)
    parser.add_argument("--format", metavar="FORMAT",
                        help=f"one of: {', '.join(FORMATS.names())} (default: each -o file's by its suffix, "
                             f"else md)")
    parser.add_argument("-o", "--output", metavar="OUT", action="append",
                        help="file to write (md/latex put the plots beside it; html embeds them); repeat it to "
                             "write several formats of one report (-o report.md -o report.html); default: print "
                             "to stdout")


def run(args: argparse.Namespace) -> int:
    from orthotune.reports import FORMATS, build_report, format_of, write_report

    outputs = [(args.format or format_of(out), out) for out in args.output or [None]]
    wanted = [(FORMATS.get(name), out) for name, out in outputs]  # a bad format fails before any work
    # one report (selection, tests, figures) for every output: each format renders the same one
    report = build_report(args.store, filters_from_args(args), plots=any(f.wants_figures(out) for f, out in wanted))
    for name, out in outputs:
        text = write_report(report, name, out)
        if text is not None:
            print(text, end="" if text.endswith("\n") else "\n")
    return 0
