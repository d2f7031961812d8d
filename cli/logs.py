"""Follow the logs of a search submitted with `orthotune launch --submit` until it ends."""

from __future__ import annotations

import argparse
import sys

from orthotune.cli._common import INTERRUPTED, OK, RUN_FAILED


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOB", help="the job id `orthotune launch --submit` printed")
    parser.add_argument("--address", metavar="URL",
                        help="the Ray cluster's dashboard address, http://HEAD:8265 "
                             "(default: $RAY_API_SERVER_ADDRESS, else $RAY_ADDRESS)")
    parser.add_argument("--no-follow", dest="follow", action="store_false",
                        help="print the logs so far and return (default: follow until the job ends)")


def run(args: argparse.Namespace) -> int:
    from orthotune.cli import jobs

    client = jobs.connect(args.address)
    try:
        state = jobs.follow_logs(client, args.job) if args.follow else jobs.print_logs(client, args.job)
    except KeyboardInterrupt:  # only the client stops: say so, since Ctrl-C usually ends the work
        print(f"orthotune logs: stopped following; job {args.job} goes on "
              f"(`orthotune status {args.job} --address ...` shows its state)", file=sys.stderr)
        return INTERRUPTED
    print(f"job {args.job}: {state}", file=sys.stderr)
    return RUN_FAILED if state in ("FAILED", "STOPPED") else OK
