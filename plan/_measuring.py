"""How the plan measures one shape, in this process or in a measuring process of its own
(``_costing`` deals the shapes out): one warm-up per dataset, a timed run of the whole pack,
or of one run scaled by the pack's runs on a large graph or a large model. Loads torch when
it measures."""

from __future__ import annotations

import atexit
import dataclasses
import gc
from dataclasses import replace
from typing import Any

from orthotune.core import DATASETS, TrainConfig, memory_estimate

#: Epochs timed per shape (after the first epoch of the timed run): one, so that `paper-full`'s
#: 78 shapes and the search's start are measured within a minute on 2 cores. A second timed
#: epoch cost 5-6 s there and did not narrow the spread between plans, which the host's own
#: speed sets (``docs/plan.md``); ``--measure-epochs`` times more.
MEASURE_EPOCHS = 1
#: A node-classification graph of at least this many nodes has its packs measured on one run,
#: the figures scaled by the pack's runs: there an epoch is its runs' work side by side, linear
#: in them (PubMed, ogbn-arxiv). On smaller graphs an epoch's fixed cost (the launches, the
#: optimiser's steps) weighs as much as the work, so a pack is trained whole (and cheaply). A
#: rule on the data, not on a timing, so a busy host does not change how a shape is measured.
SCALE_FROM_NODES = 10_000
#: A pack whose runs' memory estimates (``core.memory_estimate``) add up to at least this many
#: bytes is measured on one run too, whatever the graph: its epoch is work, not fixed cost, and
#: trained whole it would hold that memory in a measuring process beside the others (10 seeds of
#: the 64-layer Cora IncepGCN: about 156 GiB). Also a rule on the config, not on a timing.
SCALE_FROM_BYTES = 2 * 2**30
#: Timed seconds enough: a shape is timed on ``measure_epochs`` epochs, fewer where they would
#: take longer than this (its dataset's one run's epoch times the runs timed; at least one).
ENOUGH_TIMED_S = 0.5


@dataclasses.dataclass(frozen=True)
class Method:
    """How a shape is measured (a worker process gets it with each chunk)."""

    epochs: int = MEASURE_EPOCHS
    full_packs: bool = False
    device: str = "cpu"
    data_root: str | None = None
    download: bool = False
    pack: int = 1  # configs per trial
    threads: int = 1  # a trial's torch threads
    report_every: int = 10
    execution: tuple[tuple[str, bool], ...] = ()  # the search's GPU switches (LaunchOptions.execution)

    def train_options(self) -> Any:
        """The ``TrainOptions`` a shape is measured with: a trial's report cadence and switches."""
        from orthotune.training import TrainOptions

        return TrainOptions(**dict(self.execution), report_every=self.report_every,
                            grad_norms_every=self.report_every)


def start_worker(threads: int, preload: bool = True) -> None:
    """A measuring process set up as a trial's worker: its threads, the allocator's policy,
    torch loaded (``preload``; not in the process that measures the search's start first,
    whose imports are timed)."""
    # its exit spared the last full garbage collection (1.2 s with torch and PyG loaded): the
    # plan waits for it, and the process writes nothing that a collection would close
    atexit.register(gc.freeze)
    if not preload:
        return
    import torch

    from orthotune.training import retain_freed_memory

    torch.set_num_threads(threads)
    retain_freed_memory()


#: Each dataset a measuring process has warmed up, with one run's seconds per epoch there.
_WARM: dict[tuple[str, str | None], float] = {}


def measure_shapes(job: list[tuple[str, dict[str, Any]]], method: Method,
                   warm: dict[tuple[str, str | None], float] | None = None) -> dict[str, dict[str, Any] | str]:
    """Each ``(shape, config)`` of ``job`` measured (its cost as a mapping), or why it was not;
    one warm-up per dataset not in ``warm`` (updated; default: this process's)."""
    import torch

    from orthotune.training import retain_freed_memory

    warm = _WARM if warm is None else warm
    threads = torch.get_num_threads()
    torch.set_num_threads(method.threads)
    retain_freed_memory()  # as a trial's worker does
    results: dict[str, dict[str, Any] | str] = {}
    try:
        for shape, values in job:
            config = TrainConfig.from_dict(values)
            data = (config.dataset, config.setting)
            try:
                if data not in warm:
                    warm[data] = warm_up(config, method)
                info = DATASETS.get(config.dataset)
                one_run = not method.full_packs and info.task == "node" and (
                    info.nodes >= SCALE_FROM_NODES or pack_bytes(config, method) >= SCALE_FROM_BYTES)
                timed_runs = method.pack * (1 if one_run or info.task == "graph" else len(config.runs()))
                epochs = timed_epochs(warm[data] * timed_runs, method)  # one run's epoch times the runs timed
                results[shape] = measure(config, replace(method, epochs=epochs), one_run).to_dict()
            except Exception as error:  # noqa: BLE001 - the cell's trials would raise it too: they fail and are stored
                first = (str(error).strip().splitlines() or [""])[0]
                results[shape] = f"not measured: training it raised {type(error).__name__}: {first}"
    finally:
        torch.set_num_threads(threads)
    return results


def pack_bytes(config: TrainConfig, method: Method) -> int:
    """The memory estimate of one trial's pack of ``config``: one run's, times its runs."""
    return memory_estimate(first_run(config)).total * len(config.runs()) * method.pack


def first_run(config: TrainConfig) -> TrainConfig:
    """``config`` with its first repeat only."""
    if len(config.runs()) == 1:
        return config
    return TrainConfig.from_dict({**config.to_dict(), "splits": config.splits[:1], "seeds": config.seeds[:1]})


def warm_up(config: TrainConfig, method: Method) -> float:
    """One run of ``config`` trained a few epochs (the dataset loads, the allocator and the
    kernels settle): its seconds per epoch."""
    from orthotune.training import measure_cell_cost

    return measure_cell_cost(first_run(config), method.device, method.data_root, 1, 1, method.train_options(),
                             method.download, warm_up=True, profile=False).seconds_per_epoch


def timed_epochs(epoch_s: float, method: Method) -> int:
    """Epochs timed of a pack whose epoch takes about ``epoch_s``: the method's, fewer where
    they would take more than ``ENOUGH_TIMED_S`` (at least one)."""
    return max(1, min(method.epochs, int(ENOUGH_TIMED_S / max(epoch_s, 1e-9))))


def measure(config: TrainConfig, method: Method, one_run: bool = False) -> Any:
    """One pack of ``config`` trained as a trial trains it (its threads, its report cadence),
    or (``one_run``) one run of it, its figures scaled by the pack's runs. Graph
    classification trains its repeats one after another: one is measured and scaled."""
    from orthotune.training import CellCost, measure_cell_cost

    options = method.train_options()
    # on a GPU the kernels' busy share too: trials sharing a GPU are bound by its work (_estimate)
    profile = method.device.startswith("cuda")
    repeats, one = len(config.runs()), first_run(config)
    if DATASETS.get(config.dataset).task == "graph":  # a pack of configs, its repeats in turn
        cost = measure_cell_cost(one, method.device, method.data_root, method.pack, method.epochs, options,
                                 method.download, warm_up=False, profile=profile)
        return scaled(cost, repeats, cost.runs * repeats, 0.0)
    runs = repeats * method.pack
    if not one_run or runs == 1:
        return measure_cell_cost(config, method.device, method.data_root, method.pack, method.epochs, options,
                                 method.download, warm_up=False, profile=profile)
    cost = measure_cell_cost(one, method.device, method.data_root, 1, method.epochs, options, method.download,
                             warm_up=False, profile=profile)
    return CellCost.from_dict({**scaled(cost, runs, runs, added_bytes(one, runs, method, options)).to_dict(),
                               "pack": method.pack, "measured_runs": 1})


def added_bytes(one: TrainConfig, runs: int, method: Method, options: Any) -> float:
    """Memory that ``runs - 1`` more runs of ``one`` add to one run's (estimated), as a trial
    holds them (``search.pack_memory_bytes``: on a CPU, where a large model's runs train in
    packs one after another, the runs of other packs only by their parameters)."""
    from orthotune.search import pack_memory_bytes

    on_gpu = method.device.startswith("cuda")
    return float(pack_memory_bytes(one, runs, options, on_gpu) - memory_estimate(one).total)


def scaled(cost: Any, factor: int, runs: int, added: float) -> Any:
    """``cost`` of ``cost.runs`` runs as ``runs`` (``factor`` times its work): seconds scaled,
    the process's peak memory raised by ``added`` bytes (estimated) for the runs added."""
    from orthotune.training import CellCost

    if factor == 1:
        return cost
    peak = None if cost.host_peak_bytes is None else cost.host_peak_bytes + added
    return CellCost.from_dict({**cost.to_dict(), "runs": runs, "seconds_per_epoch": cost.seconds_per_epoch * factor,
                               "setup_seconds": (cost.setup_seconds or 0.0) * factor, "host_peak_bytes": peak,
                               "measured_runs": cost.measured_runs or cost.runs})
