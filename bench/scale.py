"""Scale on paper: the store and the read commands at 10^4 to 10^5 trial rows (and an
estimate at 10^6), compacted and not, and what one trial's write costs the driver.

1. For each ``--trials`` size, generates a store of that many trial rows over ``--searches``
   searches (default one search, as a lab's big search), laid out exactly as a search writes
   it (``trials/search=NAME/trial-ID.parquet`` and ``epochs/...``: one file per trial per
   table, the declared schemas, ``--epochs`` epoch rows per trial, the search's summary),
   with configs spread over cells as real searches spread them (Cora/CiteSeer/PubMed,
   GCN/JKNet, depths 2-32, both arms; 70% completed, 25% stopped by ASHA, 5% failed). The
   files are written straight with pyarrow (the store's own write path fsyncs every file,
   which takes hours at this size: ``scale_store``), so the generation is not a figure.
2. Runs ``orthotune status``, ``best --search scale-00``, ``report --search scale-00`` (md,
   with plots) and, with ``--check``, ``store check`` on it as a user would (a fresh process
   each) and prints each one's wall time, CPU time and peak memory (the child's, from
   ``wait4``) and the load average; then ``orthotune store compact`` (timed likewise) and the same commands on the
   compacted store. A store found compacted already is measured compacted only.
3. From the two largest sizes, each command's growth (``t(big) / t(small)`` over the size
   ratio, as an exponent: 1 is linear in trials, 0 constant; of the wall and of the CPU time,
   which other jobs on the machine disturb less), what it is linear in (trials and files, as
   per-trial files grow together, or trials alone, or nothing) and its time at 10^6 trials
   extrapolated with that exponent: an estimate, not a measurement.
4. Times the driver's own store write per trial (``Store.write_trial``: two Parquet files
   written durably and the folder fsync'ed, then the search's summary) over ``--writes``
   trials on the same disk.
5. Optuna's side: one cell's study in a journal file (``JournalStorage``, as a search keeps
   it) told ``--optuna-trials`` trials, then the seconds of one TPE ask (what the driver
   spends per new trial of that cell), of reopening the journal (what ``--resume`` and
   optuna-dashboard do) and the journal's size.
6. The same trial write to an S3 API (moto's threaded server on 127.0.0.1, from the test
   extra): HTTP requests per trial (the trial's files, and the summary) and seconds per trial
   on loopback (a real bucket adds its round-trip time to each request).

    .venv/bin/python bench/scale.py --store runs/scale [--trials 10000 100000] [--json]
    .venv/bin/python bench/scale.py --growth-of run-1e4.json run-1e5.json   # sizes measured apart

Each size's store goes to ``STORE/N`` and is kept (compacted) for the next run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from scale_store import generate, trial_rows  # bench/: this script's folder

from orthotune.store import Store

#: Runs a command and writes its own rusage as JSON to the file named first. The command is
#: forked from this small process, not from the bench: Linux carries a forked process's peak
#: RSS over ``exec``, so a child of the bench would report at least the bench's own memory.
RUSAGE_SHIM = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"exit": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime,
               "peak_rss_mib": usage.ru_maxrss / 1024}, out)
"""


def measure(argv: list[str], max_rss_gib: float) -> dict:
    """Wall seconds, CPU seconds (user and system: on a machine shared with other jobs they
    move less than the wall), the 1-minute load average at its end and peak RSS (MiB) of one
    orthotune command in a fresh process (:data:`RUSAGE_SHIM`); a command whose memory passes
    ``max_rss_gib`` is killed there (``killed_at_gib``), so the bench never takes the machine down."""
    import psutil

    with tempfile.NamedTemporaryFile(suffix=".json") as usage_file:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-c", RUSAGE_SHIM, usage_file.name, sys.executable, "-m",
                                    "orthotune.cli", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        killed = None
        while process.poll() is None:
            try:
                command = psutil.Process(process.pid).children()
                rss = sum(c.memory_info().rss for c in command) / 2**30
            except psutil.Error:
                command, rss = [], 0.0
            if rss > max_rss_gib and killed is None:
                killed = round(rss, 1)
                for child in command:
                    child.kill()
            time.sleep(0.2)
        seconds = time.perf_counter() - started
        err = process.stderr.read().decode()
        process.stderr.close()
        usage = json.loads(Path(usage_file.name).read_text() or "{}")
    return {"command": "orthotune " + " ".join(argv), "seconds": round(seconds, 2),
            "cpu_s": round(usage.get("cpu_s", 0.0), 2), "load": round(os.getloadavg()[0], 1),
            "peak_rss_mib": round(usage.get("peak_rss_mib", 0.0), 1), "exit": usage.get("exit", process.returncode),
            "killed_at_gib": killed, "stderr": err.strip().splitlines()[-1:] if err.strip() else []}


def write_latency(folder: str, count: int) -> dict:
    """Mean and worst seconds of the driver's write of one ended trial: ``Store.write_trial``,
    then the search's summary (``Store.write_summary``), each timed."""
    store = Store.open(folder, create=True)
    trials, history = trial_rows("latency", 0, count, 20, seed=1)
    per_trial: dict[str, list[dict]] = {}
    for row in history:
        per_trial.setdefault(row["trial_id"], []).append(row)
    rows, summaries, statuses = [], [], Counter()
    for trial in trials:
        started = time.perf_counter()
        store.write_trial(trial, per_trial.get(trial["trial_id"], []))
        rows.append(time.perf_counter() - started)
        statuses[trial["status"]] += 1
        started = time.perf_counter()
        store.write_summary("latency", statuses)
        summaries.append(time.perf_counter() - started)
    both = [a + b for a, b in zip(rows, summaries)]
    return {"writes": count, "mean_ms": round(1000 * sum(rows) / count, 2), "max_ms": round(1000 * max(rows), 2),
            "summary_mean_ms": round(1000 * sum(summaries) / count, 2),
            "with_summary_mean_ms": round(1000 * sum(both) / count, 2),
            "with_summary_max_ms": round(1000 * max(both), 2)}


def optuna_scale(folder: str, trials: int) -> dict:
    """One cell's study with ``trials`` told trials in a journal file: TPE ask and reload times."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    path = f"{folder}/cell.journal"
    storage = optuna.storages.JournalStorage(JournalFileBackend(path))
    study = optuna.create_study(storage=storage, study_name="cell", direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=0))
    rng = random.Random(0)
    started = time.perf_counter()
    for _ in range(trials):  # told trials, as a search replays its stored rows
        study.enqueue_trial({"T": rng.choice((2, 4, 6)), "beta": rng.uniform(0.1, 1.0),
                             "lr": 10 ** rng.uniform(-3, -1)})
        trial = study.ask()
        trial.suggest_int("T", 2, 6, step=2)
        trial.suggest_float("beta", 0.1, 1.0)
        trial.suggest_float("lr", 1e-3, 1e-1, log=True)
        study.tell(trial, rng.uniform(0.3, 0.9))
    filled = time.perf_counter() - started
    started = time.perf_counter()
    trial = study.ask()
    trial.suggest_int("T", 2, 6, step=2)
    trial.suggest_float("beta", 0.1, 1.0)
    trial.suggest_float("lr", 1e-3, 1e-1, log=True)
    ask = time.perf_counter() - started
    started = time.perf_counter()
    reopened = optuna.load_study(storage=optuna.storages.JournalStorage(JournalFileBackend(path)), study_name="cell")
    count = len(reopened.trials)
    reload = time.perf_counter() - started
    return {"trials": trials, "fill_s": round(filled, 1), "tpe_ask_s": round(ask, 3), "reload_s": round(reload, 2),
            "journal_mib": round(os.path.getsize(path) / 2**20, 1), "reloaded_trials": count}


def s3_writes(count: int) -> dict | None:
    """Requests and seconds of ``Store.write_trial`` to a local S3 API; None without moto."""
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError:
        return None
    import logging

    requests: list[str] = []

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            requests.append(record.getMessage())

    log = logging.getLogger("werkzeug")  # moto's server logs one line per request: counted, not shown
    log.setLevel(logging.INFO)
    log.addHandler(Count())
    log.propagate = False
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=endpoint)
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="orthotune-bench")
    try:
        store = Store.open("s3://orthotune-bench/store", create=True)
        trials, history = trial_rows("s3", 0, count + 1, 20, seed=2)
        store.write_trial(trials[0], [])  # the store and the search exist from here on, as in a running search
        requests.clear()
        started = time.perf_counter()
        rows = 0
        for number, trial in enumerate(trials[1:], start=1):
            store.write_trial(trial, [row for row in history if row["trial_id"] == trial["trial_id"]])
            rows = rows or len(requests)
            store.write_summary("s3", {"completed": number})
        seconds = (time.perf_counter() - started) / count
    finally:
        server.stop()
    return {"writes": count, "requests_per_trial": len(requests) / count, "trial_files_requests": rows,
            "summary_requests": len(requests) / count - rows, "seconds_per_trial": round(seconds, 3)}


def growth(results: dict[int, dict[str, dict]]) -> dict[str, dict]:
    """Per command and layout, from the two largest sizes: the exponent of its growth in trials
    (``t(big) / t(small)`` over the size ratio; 1: linear, 0: constant), from the wall and from
    the CPU seconds, what it is linear in, and its wall, CPU and memory at 10^6 trials
    extrapolated with those exponents."""
    sizes = sorted(results)
    if len(sizes) < 2:
        return {}
    small, big = sizes[-2], sizes[-1]
    estimates = {}
    for key, measured in results[big].items():
        before = results[small].get(key)
        if before is None or before["exit"] or measured["exit"]:
            continue
        # a smaller figure at the larger size is noise around a constant: extrapolated as one
        exponents = {name: max(0.0, math.log(measured[name] / before[name]) / math.log(big / small))
                     for name in ("seconds", "cpu_s", "peak_rss_mib")}
        estimates[key] = {"exponent": round(exponents["seconds"], 2), "cpu_exponent": round(exponents["cpu_s"], 2),
                          "grows_with": _grows_with(key, exponents["cpu_s"]),
                          "at_1e6_s": round(measured["seconds"] * (1e6 / big) ** exponents["seconds"], 1),
                          "at_1e6_cpu_s": round(measured["cpu_s"] * (1e6 / big) ** exponents["cpu_s"], 1),
                          "memory_exponent": round(exponents["peak_rss_mib"], 2),
                          "at_1e6_mib": round(measured["peak_rss_mib"] * (1e6 / big) ** exponents["peak_rss_mib"])}
    return estimates


def _grows_with(key: str, exponent: float) -> str:
    """What a command's time follows, from its exponent in trials: a per-trial-files store has
    two files per trial (files and trials grow together), a compacted one two files in all."""
    if exponent < 0.1:
        return "constant"
    what = "trials (rows; the files stay 2)" if key.startswith("compacted") else "trials and files (2 per trial)"
    return what if exponent >= 0.8 else f"less than linearly in {what}: a fixed cost dominates at these sizes"


COMMANDS = {"status": ["status"], "best": ["best", "--search", "scale-00"],
            "report": ["report", "--search", "scale-00", "--format", "md", "-o", "{out}/report.md"],
            "check": ["store", "check"]}


def measure_store(path: str, trials: int, args: argparse.Namespace) -> dict:
    """Generate (or reuse) the store of ``trials`` rows; measure the commands on it, compact it
    and measure them again."""
    existing = Path(path, "trials")
    files = list(existing.rglob("*.parquet")) if existing.is_dir() else []
    compacted = any(f.name.startswith("compacted-") for f in files)
    generated = None
    if not files:
        generated = generate(path, trials, args.searches, args.epochs, args.jobs)
    elif not compacted and len(files) != trials:
        sys.exit(f"{path} holds {len(files)} trial files, not {trials}: remove it or pick another --store")
    store = Store.open(path)
    for name in store.search_names():  # a store generated before summaries existed
        if store.summary(name) is None:
            store.write_summary(name, Counter(store.trial_statuses(name).values()))
    names = [n for n in COMMANDS if n in args.commands]
    figures: dict = {"trials": trials, "generated_s": None if generated is None else round(generated, 1)}
    with tempfile.TemporaryDirectory(prefix="orthotune-report-", dir=Path(path).parent) as out:
        layouts = ["compacted"] if compacted else ["per-trial files", "compacted"]
        for layout in layouts:
            if layout == "compacted" and not compacted:
                figures["compact"] = measure(["store", "compact", "--store", path], args.max_rss_gib)
                print(json.dumps(figures["compact"]), file=sys.stderr, flush=True)
            figures[layout] = {"parquet_files": sum(1 for _ in Path(path).rglob("*.parquet")),
                               "parquet_mib": round(sum(p.stat().st_size for p in Path(path).rglob("*.parquet"))
                                                    / 2**20, 1)}
            before = args.per_trial_commands if args.per_trial_commands is not None else names
            for name in names if layout == "compacted" else [n for n in names if n in before]:
                argv = [part.format(out=out) for part in COMMANDS[name]]
                figures[layout][name] = measure([*argv, "--store", path], args.max_rss_gib)
                print(json.dumps(figures[layout][name]), file=sys.stderr, flush=True)  # each figure as it comes
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="runs/scale", help="where the generated stores go (STORE/N, kept)")
    parser.add_argument("--trials", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--searches", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=20, help="epoch rows per trial (one per report)")
    parser.add_argument("--commands", nargs="+", default=["status", "best", "report"], choices=list(COMMANDS),
                        help="the commands measured on each store (check reads every file: slow)")
    parser.add_argument("--per-trial-commands", nargs="*", choices=list(COMMANDS), metavar="COMMAND",
                        help="measure only these on the per-trial-files layout (default: --commands; at 10^5 "
                             "trials `best` and `report` take tens of minutes there)")
    parser.add_argument("--writes", type=int, default=300, help="trials written through Store.write_trial")
    parser.add_argument("--optuna-trials", type=int, default=10_000, help="trials in the Optuna study (0: skip)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes generating the store")
    parser.add_argument("--max-rss-gib", type=float, default=12.0,
                        help="kill a command whose memory passes this (half of a 24 GiB machine by default)")
    parser.add_argument("--only", nargs="+", metavar="PART", choices=["stores", "writes", "optuna", "s3"],
                        help="measure only these parts (default: all)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--growth-of", nargs="+", metavar="JSON",
                        help="print the growth and 10^6 estimate of earlier --json runs' stores taken together "
                             "(one size in each), measuring nothing")
    args = parser.parse_args()
    wanted = set(args.only or ["stores", "writes", "optuna", "s3"])

    if args.growth_of:  # earlier runs' stores together (one size each): their growth
        stores = {int(n): found for path in args.growth_of
                  for n, found in json.loads(Path(path).read_text())["stores"].items()}
        _print_growth(growth(by_size(stores)))
        return
    stores = {n: measure_store(f"{args.store}/{n}", n, args) for n in args.trials} if "stores" in wanted else {}
    Path(args.store).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="orthotune-writes-", dir=args.store) as folder:
        latency = write_latency(f"{folder}/store", args.writes) if "writes" in wanted else None
        study = optuna_scale(folder, args.optuna_trials) if args.optuna_trials and "optuna" in wanted else None
    s3 = s3_writes(50) if "s3" in wanted else None
    figures = {"searches": args.searches, "epoch_rows_per_trial": args.epochs, "stores": stores,
               "growth": growth(by_size(stores)), "store_write_per_trial": latency, "optuna": study,
               "s3_write_per_trial": s3}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for n, found in stores.items():
        print(f"store of {n} trials in {args.searches} search(es)"
              + (f" (generated in {found['generated_s']:.0f} s)" if found["generated_s"] else ""))
        for layout in ("per-trial files", "compacted"):
            if layout not in found:
                continue
            print(f"  {layout}: {found[layout]['parquet_files']} Parquet files, {found[layout]['parquet_mib']} MiB")
            if layout == "compacted" and "compact" in found:
                _print(found["compact"])
            for name in args.commands:
                if name in found[layout]:
                    _print(found[layout][name])
    _print_growth(figures["growth"])
    if latency:
        print(f"  Store.write_trial (durable, local disk): mean {latency['mean_ms']} ms, max {latency['max_ms']} ms; "
              f"with the summary: mean {latency['with_summary_mean_ms']} ms, max {latency['with_summary_max_ms']} ms "
              f"over {latency['writes']} trials")
    if s3:
        print(f"  a trial written to S3 (moto on 127.0.0.1): {s3['requests_per_trial']:g} requests "
              f"({s3['trial_files_requests']} for its files, {s3['summary_requests']:g} for the summary), "
              f"{s3['seconds_per_trial']} s per trial over {s3['writes']} trials")
    if study:
        print(f"  Optuna, one cell's journal study with {study['trials']} trials: one TPE ask {study['tpe_ask_s']} s, "
              f"reopening the journal {study['reload_s']} s, journal {study['journal_mib']} MiB "
              f"(filled in {study['fill_s']} s)")


def by_size(stores: dict[int, dict]) -> dict[int, dict[str, dict]]:
    """Each size's measured commands, keyed ``LAYOUT: COMMAND`` (and ``store compact``)."""
    return {n: {f"{layout}: {name}": figures[layout][name] for layout in ("per-trial files", "compacted")
                if layout in figures for name in COMMANDS if name in figures[layout]}
            | ({"store compact": figures["compact"]} if "compact" in figures else {})
            for n, figures in stores.items()}


def _print_growth(estimates: dict[str, dict]) -> None:
    for key, estimate in estimates.items():
        print(f"  {key:<32} wall ~ trials^{estimate['exponent']:<5} CPU ~ trials^{estimate['cpu_exponent']:<5} "
              f"({estimate['grows_with']}): about {estimate['at_1e6_s']} s wall, {estimate['at_1e6_cpu_s']} s CPU "
              f"and {estimate['at_1e6_mib']} MiB at 10^6 trials (extrapolated, not measured)")


def _print(result: dict) -> None:
    killed = f"  killed at {result['killed_at_gib']} GiB" if result["killed_at_gib"] else ""
    print(f"    {result['command'].split(' --store')[0]:<60} {result['seconds']:>8.2f} s  "
          f"(CPU {result['cpu_s']:.2f} s, load {result['load']})  {result['peak_rss_mib']:>8.1f} MiB  "
          f"exit {result['exit']}{killed}")


if __name__ == "__main__":
    main()
