"""What the lease's fence costs a driver's writes on S3 (issue 51): before each write of a
fenced store (a trial's epochs, its row, the summary) the driver reads its lease back (a HEAD
and a GET of ``leases/NAME.json``). This writes the same trials to a real S3 API (moto's
server on 127.0.0.1, tests/s3_faults.py) unfenced and fenced, alternating, and prints the
requests and seconds per trial of each; ``--latency-ms`` adds that many milliseconds to every
request (a modelled round trip to a remote bucket; moto on loopback answers in about one).

    python bench/fence_cost.py [--trials 40] [--latency-ms 0 20]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the S3 server with its switch

from s3_faults import FaultyS3  # noqa: E402

from orthotune.core import ConfigResult, RunResult, TrainConfig  # noqa: E402
from orthotune.store import Lease, Store, trial_row  # noqa: E402


def rows(search: str, trial_id: str, epochs: int = 20) -> tuple[dict, list[dict]]:
    """A trial's row and its per-epoch rows, as a driver writes them."""
    config = TrainConfig(dataset="cora", depth=2, ortho=False, splits=(0,))
    result = ConfigResult(config, [RunResult(split, seed, val_acc=0.5) for split, seed in config.runs()])
    history = [{"member": 0, "repeat": 0, "epoch": e + 1, "train_loss": 1.0 / (e + 1), "val_acc": 0.5, "test_acc": 0.5}
               for e in range(epochs)]
    return trial_row(search, trial_id, result, "completed"), history


def measure(store: Store, count: int, label: str, requests: list[str]) -> dict:
    """``count`` trials written as a driver writes them (rows, then the summary)."""
    requests.clear()
    started = time.perf_counter()
    for number in range(count):
        trial, history = rows("fence", f"{label}-{number}")
        store.write_trial(trial, history)
        store.write_summary("fence", {"completed": number + 1})
    seconds = time.perf_counter() - started
    return {"requests_per_trial": len(requests) / count, "seconds_per_trial": seconds / count}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40, help="trials written per block (default 40)")
    parser.add_argument("--blocks", type=int, default=3, help="alternations of unfenced and fenced (default 3)")
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 20.0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    requests: list[str] = []

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            requests.append(record.getMessage())

    s3 = FaultyS3()
    log = logging.getLogger("werkzeug")  # one line per request: counted, not shown
    log.setLevel(logging.INFO)
    log.addHandler(Count())
    log.propagate = False
    import os

    os.environ.update(s3.environment())
    figures = {}
    try:
        store = Store.open(s3.create_bucket("fence-cost"), create=True)
        lease = Lease.acquire(store, "fence")
        fenced = store.fenced(lease.check)
        for latency in args.latency_ms:
            if latency:
                s3.switch.burst("s3_latency", 1e9, delay_s=latency / 1000)
            else:
                s3.switch.calm()
            for label, target in (("unfenced", store), ("fenced", fenced)):  # warm: connections, first writes
                measure(target, 5, f"{latency:g}-warm-{label}", requests)
            runs = {"unfenced": [], "fenced": []}
            for block in range(args.blocks):
                for label, target in (("unfenced", store), ("fenced", fenced)):
                    runs[label].append(measure(target, args.trials, f"{latency:g}-{block}-{label}", requests))
            figures[f"{latency:g} ms"] = {
                label: {"requests_per_trial": found[0]["requests_per_trial"],
                        "seconds_per_trial": round(statistics.median(r["seconds_per_trial"] for r in found), 4),
                        "blocks_s": [round(r["seconds_per_trial"], 4) for r in found]}
                for label, found in runs.items()}
        lease.release()
    finally:
        s3.stop()
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    for latency, found in figures.items():
        plain, fence = found["unfenced"], found["fenced"]
        extra = fence["seconds_per_trial"] - plain["seconds_per_trial"]
        print(f"added latency {latency}: unfenced {plain['requests_per_trial']:g} requests, "
              f"{plain['seconds_per_trial'] * 1e3:.1f} ms per trial; fenced {fence['requests_per_trial']:g} requests, "
              f"{fence['seconds_per_trial'] * 1e3:.1f} ms per trial (+{extra * 1e3:.1f} ms, "
              f"{extra / plain['seconds_per_trial']:+.0%}); medians of {args.blocks} blocks of {args.trials} trials")
    return 0


if __name__ == "__main__":
    sys.exit(main())
