"""The plan's measuring streams (``_costing`` plans, this module measures): this process and
measuring processes beside it, each taking the next chunk of a dataset's shapes; the first
measuring process measures the search's start before its first shape (``_start_probe``).
A cell is anything with ``shape``, ``config`` and ``estimate_bytes`` (``_costing._Cell``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from orthotune.core import DATASETS, available_memory
from orthotune.plan._cache import StartProbe, cached_cost, save_cost
from orthotune.plan._measuring import Method, measure_shapes, start_worker
from orthotune.plan._start_probe import measure_start_quietly


class Meter:
    """Measures shapes, each once (then cached), in ``workers`` streams side by side: this
    process (torch loaded already) and ``workers - 1`` measuring processes, each dataset's
    shapes dealt out in chunks that the streams take in turn (a dataset loads, and warms up,
    once per stream)."""

    def __init__(self, method: Method, remeasure: bool, note: Callable[[str], None] | None, workers: int) -> None:
        self.method, self.remeasure, self.note, self.workers = method, remeasure, note, workers
        self.warm: dict[tuple[str, str | None], float] = {}
        self.pool: Any = None  # the measuring processes, once started
        self.probing: Any = None  # the future of the start probe a measuring process runs
        self.lock = threading.Lock()

    def costs(self, cells: list[Any], probe: StartProbe) -> dict[str, tuple[Any, bool] | str]:
        """``(cost, cached)`` of each cell's shape, or why it was not measured, by shape."""
        found: dict[str, tuple[Any, bool] | str] = {}
        pending: dict[str, Any] = {}
        alone: dict[str, Any] = {}  # over a stream's share of the memory: measured after the others, alone
        available = available_memory()
        # each of the streams measures beside the others, as the search's trials run at once
        share = None if available is None else available / self.workers
        for cell in cells:
            if available is not None and cell.estimate_bytes > available:  # training it here would run out
                found[cell.shape] = (f"not measured: one repeat needs about {cell.estimate_bytes / 2**30:.1f} GiB "
                                     f"(estimated), more than the {available / 2**30:.1f} GiB available here")
            elif (cost := None if self.remeasure else cached_cost(cell.shape)) is not None:
                found[cell.shape] = (cost, True)
            else:
                (alone if share is not None and cell.estimate_bytes > share else pending).setdefault(cell.shape, cell)
        found.update(self._measured(pending, probe))
        if alone and self.note is not None:
            self.note(f"measuring {len(alone)} shape(s) alone (each needs more than a stream's share of the memory)")
        found.update(self._measured(alone, probe, side_by_side=False))
        return found

    def _measured(self, pending: dict[str, Any], probe: StartProbe, side_by_side: bool = True
                  ) -> dict[str, tuple[Any, bool] | str]:
        """``(cost, False)`` of each pending shape measured now (then cached), or why it was not:
        in the streams side by side, or (``side_by_side`` False) one after another here."""
        found: dict[str, tuple[Any, bool] | str] = {}
        if not pending:
            return found
        workers = max(1, min(self.workers if side_by_side else 1, len(pending)))
        chunks = _chunks(list(pending.values()), workers)
        for label, chunk in chunks:
            if self.note is not None:
                self.note(f"measuring {len(chunk)} shape(s) of {label} ({self.method.epochs} epochs each"
                          + (f", {workers} processes side by side)" if workers > 1 else ")"))
        jobs = [[(cell.shape, cell.config.to_dict()) for cell in chunk] for _, chunk in chunks]
        results = self._side_by_side(jobs, probe, workers - 1) if workers > 1 else self._here(jobs, probe)
        from orthotune.training import CellCost

        for shape, result in results.items():
            if isinstance(result, str):
                found[shape] = result
            else:
                cost = CellCost.from_dict(result)
                save_cost(shape, cost)
                found[shape] = (cost, False)
        return found

    def _here(self, jobs: list[list[tuple[str, dict[str, Any]]]], probe: StartProbe) -> dict[str, Any]:
        probe.wait()  # one trial at a time: its epochs are timed alone, as the search's will run
        results = {}
        for job in jobs:
            results.update(measure_shapes(job, self.method, self.warm))
        return results

    def open(self, probe: StartProbe | None = None) -> None:
        """Start the measuring processes: the streams but this process's. Where ``probe`` is
        to be measured by them, the first measures it first, in a fresh interpreter (nothing
        imported yet), and goes on to measure shapes; the others import torch at once."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        probing = probe is not None and probe.elsewhere
        with self.lock:
            if self.pool is not None or self.workers < 2:
                return
            context = multiprocessing.get_context("spawn")  # a fork would copy this process's torch threads
            self.pool = ProcessPoolExecutor(self.workers - 1, mp_context=context, initializer=start_worker,
                                            initargs=(self.method.threads, not probing))
            if probing:
                self.probing = self.pool.submit(measure_start_quietly)
                self.probing.add_done_callback(lambda done: probe.deliver(_parts(done)))
            for _ in range(self.workers - 1 - int(probing)):
                self.pool.submit(os.getpid)  # one task each: every process starts now, not on the first job

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def _side_by_side(self, jobs: list[list[tuple[str, dict[str, Any]]]], probe: StartProbe,
                      helpers: int) -> dict[str, Any]:
        """The jobs taken in turn by this process and ``helpers`` measuring processes (the
        largest datasets first, ``_chunks``). A measuring process that measures the start
        first takes its first job once that is done, so this process, measuring from the
        start, takes the jobs meanwhile (on 2 cores the probe's interpreter keeps about one
        busy: a stream's epochs are timed beside it as a search's are beside another trial)."""
        if not probe.elsewhere:
            probe.wait()  # its interpreter alone: processes importing beside it would lengthen the start it measures
        self.open(probe)
        queue = list(jobs)
        results: dict[str, Any] = {}

        def take() -> list[tuple[str, dict[str, Any]]] | None:
            with self.lock:
                return queue.pop(0) if queue else None

        def feed(after: Any) -> None:  # one per measuring process: its next job once it is done with one
            from concurrent.futures import wait
            from concurrent.futures.process import BrokenProcessPool

            if after is not None:
                wait([after])
            while (job := take()) is not None:
                try:
                    measured = self.pool.submit(measure_shapes, job, self.method).result()
                except BrokenProcessPool as error:  # a process died (killed for memory): its shapes stay unmeasured
                    with self.lock:  # and the jobs left are this process's
                        results.update({shape: f"not measured: the measuring process died ({error})"
                                        for shape, _ in job})
                    return
                with self.lock:
                    results.update(measured)

        probing = self.probing if self.probing is not None and not self.probing.done() else None
        feeders = [threading.Thread(target=feed, args=(probing if index == 0 else None,), daemon=True)
                   for index in range(helpers)]
        for feeder in feeders:
            feeder.start()
        while (job := take()) is not None:
            measured = measure_shapes(job, self.method, self.warm)
            with self.lock:
                results.update(measured)
        for feeder in feeders:
            feeder.join()
        return results


def _parts(done: Any) -> dict[str, float] | None:
    """The start probe's parts from its finished future (None where it failed or was cancelled)."""
    if done.cancelled() or done.exception() is not None:
        return None
    return done.result()


def _chunks(cells: list[Any], workers: int) -> list[tuple[str, list[Any]]]:
    """Each dataset's cells dealt round-robin into ``workers`` chunks, the largest datasets
    first (a process starts on the longest work while the others fill in around it)."""
    by_data: dict[tuple[str, str | None], list[Any]] = {}
    for cell in cells:
        by_data.setdefault((cell.config.dataset, cell.config.setting), []).append(cell)
    order = sorted(by_data, key=lambda data: -_data_size(data[0]))
    chunks = []
    for data in order:
        group = by_data[data]
        for start in range(min(workers, len(group))):
            chunks.append((data[0], group[start::workers]))
    return chunks


def _data_size(dataset: str) -> int:
    info = DATASETS.get(dataset)
    return info.nodes * max(1, info.features)
