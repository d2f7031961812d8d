"""The scale benchmark's stores (``bench/scale.py``): trial and epoch rows as a real search
stores them, with configs spread over cells as real searches spread them, written one file
per trial per table straight with pyarrow (the store's own write path fsyncs every file,
which takes hours at 10^5 trials), and each search's record and summary as its driver leaves
them."""

from __future__ import annotations

import random
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from orthotune.core import TrainConfig
from orthotune.store import EPOCHS_SCHEMA, TRIAL_FILE_OPTIONS, TRIALS_SCHEMA, Store, config_columns

DATASETS, BACKBONES, DEPTHS = ("cora", "citeseer", "pubmed"), ("gcn", "jknet"), (2, 4, 8, 16, 32)
STATUSES = ("completed",) * 14 + ("stopped",) * 5 + ("failed",)


def trial_rows(search: str, first: int, count: int, epochs: int, seed: int) -> tuple[list[dict], list[dict]]:
    """``count`` trial rows of ``search`` and their epoch rows, as a real search stores them."""
    rng = random.Random(seed)
    trials, history = [], []
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for number in range(first, first + count):
        ortho = rng.random() < 0.5
        values = {"dataset": rng.choice(DATASETS), "backbone": rng.choice(BACKBONES), "depth": rng.choice(DEPTHS),
                  "ortho": ortho, "lr": rng.choice((0.1, 0.03, 0.01, 0.003)), "hidden": rng.choice((16, 64)),
                  "dropout": rng.choice((0.0, 0.5)), "splits": [0, 1, 2, 3, 4], "seeds": [0, 1, 2, 3, 4]}
        if ortho:
            values.update(T=rng.choice((2, 4, 6)), beta=rng.choice((0.2, 0.6, 1.0)), lam=5e-4)
        config = TrainConfig.from_dict(values)
        status = rng.choice(STATUSES)
        trial_id = f"{search}-{number:07d}"
        val = [rng.uniform(0.3, 0.9) for _ in range(5)]
        test = [v - rng.uniform(0, 0.05) for v in val]
        trained = epochs if status != "stopped" else max(1, epochs // 3)
        trials.append({
            "search": search, "trial_id": trial_id, "tune_trial_id": trial_id, "status": status,
            "reason": "ValueError: diverged" if status == "failed" else None, **config_columns(config),
            "val_acc": sum(val) / 5, "val_acc_std": 0.01, "test_acc": sum(test) / 5, "test_acc_std": 0.01,
            "repeat_split": [0, 1, 2, 3, 4], "repeat_seed": [0, 1, 2, 3, 4], "repeat_status": [status] * 5,
            "repeat_val_acc": val, "repeat_test_acc": test, "repeat_val_loss": [1.0 - v for v in val],
            "repeat_best_epoch": [trained * 10] * 5, "repeat_epochs": [trained * 10] * 5, "epochs": trained * 10,
            "best_epoch": trained * 10, "m_sig": rng.uniform(0, 1), "smoothness": rng.uniform(0, 1),
            "grad_norms": [rng.uniform(0, 1) for _ in range(config.depth)], "grad_norm_ratio": 1.0,
            "seconds": 30.0, "seconds_per_epoch": 0.01, "device": "cpu", "orthotune_version": "0.2.0",
            "torch_version": "2.13.0", "pyg_version": "2.8.0", "ray_version": "2.60.0", "optuna_version": "5.0.0",
            "finished_at": start + timedelta(seconds=number)})
        for epoch in range(1, trained + 1):  # one row per report (every 10 epochs), repeat 0
            history.append({"search": search, "trial_id": trial_id, "repeat": 0, "split": 0, "seed": 0,
                            "epoch": epoch * 10, "train_loss": 1.0 / epoch, "val_acc": val[0], "test_acc": test[0],
                            "val_loss": 1.0 / epoch, "grad_norms": None})
    return trials, history


def write_files(root: str, search: str, first: int, count: int, epochs: int) -> Counter:
    """Write one file per trial per table (the store's layout); returns the trials' statuses."""
    trials, history = trial_rows(search, first, count, epochs, seed=first)
    for table, rows, schema in (("epochs", history, EPOCHS_SCHEMA), ("trials", trials, TRIALS_SCHEMA)):
        data = pa.Table.from_pylist(rows, schema=schema).drop_columns(["search"])
        data = data.cast(data.schema.with_metadata(schema.metadata))
        ids = data.column("trial_id").to_pylist()
        folder = Path(root, table, f"search={search}")
        folder.mkdir(parents=True, exist_ok=True)
        start = 0
        while start < len(ids):  # rows of one trial are contiguous
            end = start
            while end < len(ids) and ids[end] == ids[start]:
                end += 1
            pq.write_table(data.slice(start, end - start), folder / f"trial-{ids[start]}.parquet", **TRIAL_FILE_OPTIONS)
            start = end
    return Counter(row["status"] for row in trials)


def generate(store_path: str, trials: int, searches: int, epochs: int, jobs: int) -> float:
    store = Store.open(store_path, create=True)
    per_search = trials // searches
    started = time.perf_counter()
    chunks = [(store.root, f"scale-{s:02d}", s * per_search + first, min(2000, per_search - first), epochs)
              for s in range(searches) for first in range(0, per_search, 2000)]
    counts: dict[str, Counter] = {}
    with ProcessPoolExecutor(jobs) as pool:
        for chunk, statuses in zip(chunks, pool.map(write_files, *zip(*chunks))):
            counts.setdefault(chunk[1], Counter()).update(statuses)
    for s in range(searches):
        name = f"scale-{s:02d}"
        store.save_search_meta(name, {"state": "finished", "options": {"name": name},
                                      "created_at": "2026-11-01T00:00:00+00:00"})
        store.write_summary(name, counts[name])  # as the search's driver leaves it
    assert sum(sum(c.values()) for c in counts.values()) == per_search * searches
    return time.perf_counter() - started
