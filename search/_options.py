"""What a search is asked to do, light enough for the CLI to import at once: the launch
options (validated here, with the space in them, before Ray or torch load) and the outcome.
The heavy machinery lives in ``_launch`` and the stages it runs.
"""

from __future__ import annotations

import math
from argparse import ArgumentTypeError
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from orthotune.core import OrthotuneError, check
from orthotune.search._algorithms import SCHEDULERS, SEARCHERS
from orthotune.search._stopping import FEW_TRIALS, LOOK_STEP, STOPPING_RULES, budget_looks
from orthotune.spaces import SearchSpace, parse_space
from orthotune.store import check_search_name
from orthotune.training import EXECUTION_SWITCHES

#: ``--optuna-storage`` value that turns the cells' Optuna studies off.
NO_STORAGE = "off"
#: Progress display modes (``--progress``): a bar on a terminal or plain lines elsewhere.
MODES = ("auto", "bar", "plain")
#: How trials get GPUs: ``fixed`` (``gpus_per_trial`` each) or ``auto`` (each cell's share of
#: a GPU decided from its measured cost on the cluster: ``_gpu_share``).
GPU_SHARES = ("fixed", "auto")
#: Trial budgets (``--budget``): ``fixed`` (every cell and arm trains ``samples``) or
#: ``adaptive`` (each pair stops when its stopping rule finds both arms settled, at most
#: ``samples`` per arm: ``_stopping``, ``_allocation``).
BUDGETS = ("fixed", "adaptive")


#: The help's sections of ``orthotune launch`` the options go in (``launch_option``'s ``cli``).
SECTIONS = ("search", "cluster", "GPU execution", "progress and live views")


def launch_option(default: Any, doc: str, cli: str | None = "search", *, metavar: str | None = None,
                  parse: Callable[[str], Any] | None = None, names: Callable[[], list[str]] | None = None) -> Any:
    """A :class:`LaunchOptions` field declared once: its default, its documentation and how
    ``orthotune launch`` offers it. ``cli``: the help section of its flag ``--NAME`` (None:
    none of its own), ``metavar``, ``parse`` (the flag's type; default: the field's) and
    ``names`` (the valid values, listed in the help). The doc ends in ``(default: ...)``
    where the default needs words."""
    metadata = {"doc": doc, "cli": cli, "metavar": metavar, "parse": parse, "names": names}
    return field(default=default, metadata=metadata)


def execution_switch(name: str) -> Any:
    """The launch option of ``TrainOptions``' GPU switch ``name``: its doc from that declaration;
    None (no flag given) until :class:`LaunchOptions` resolves it (:meth:`~LaunchOptions.execution`)."""
    declared = EXECUTION_SWITCHES[name]
    default = "on" if declared.default else "off"
    return launch_option(None, f"{declared.metadata['switch']} (default: the space's execution.{name}, else "
                               f"{default})", "GPU execution")


def gpus_or_auto(value: str) -> float | str:
    """``--gpus-per-trial``: a number of GPUs, or ``auto``."""
    if value == "auto":
        return value
    try:
        return float(value)
    except ValueError:
        raise ArgumentTypeError(f"{value!r} must be a number of GPUs or 'auto'") from None


@dataclass(frozen=True)
class LaunchOptions:
    """How to run one search; validated here, typed afterwards. Each field is a
    :func:`launch_option`: the CLI's flags, the search's record (:meth:`to_meta`) and
    ``--resume`` (:meth:`from_meta`) derive from these declarations."""

    store: str = launch_option(MISSING, "the results store (the CLI's --store)", cli=None)
    name: str = launch_option(MISSING, "search name (default: the space's name and the time)")
    space: SearchSpace = launch_option(MISSING, "what to search (the CLI's --space or --resume)", cli=None)
    samples: int | None = launch_option(None, "trainings per cell and arm (default: the space's)", metavar="N")
    searcher: str = launch_option("optuna", "search algorithm", metavar="NAME", names=SEARCHERS.names)
    scheduler: str = launch_option("asha", "trial scheduler", metavar="NAME", names=SCHEDULERS.names)
    seed: int = launch_option(0, "the search algorithm's seed")
    budget: str = launch_option(
        "fixed", "fixed: every cell and arm trains its samples; adaptive: a pair stops at the first look where the "
                 "stopping rule finds both arms settled on validation, samples its maximum per arm (docs: Adaptive "
                 "budgets)", metavar="KIND", names=lambda: list(BUDGETS))
    stopping_rule: str = launch_option("flat", "with --budget adaptive: the stopping rule", metavar="NAME",
                                       names=STOPPING_RULES.names)
    first_look: int = launch_option(FEW_TRIALS, "with --budget adaptive: trials per arm at a pair's first look",
                                    metavar="N")
    look_step: int = launch_option(LOOK_STEP, "with --budget adaptive: trials per arm between two looks",
                                   metavar="N")
    address: str | None = launch_option(
        None, "Ray cluster: ray://HEAD:10001 or auto (the driver runs here), or with --submit the dashboard's "
              "http://HEAD:8265 (default: a local Ray)", "cluster", metavar="ADDRESS")
    cpus_per_trial: float = launch_option(1.0, "CPUs each trial reserves", "cluster", metavar="N")
    # "auto" is shorthand for gpu_share="auto" (gpus_per_trial is then 0)
    gpus_per_trial: float = launch_option(
        0.0, "GPUs each trial reserves; fractions share a GPU; auto: each cell's fraction from its pack's "
             "measured GPU use, so packs too small to keep a GPU busy share one", "cluster", metavar="N|auto",
        parse=gpus_or_auto)
    gpu_share: str = launch_option(
        "fixed", "auto: each cell's fraction of a GPU measured on the cluster before trials start "
                 "(gpus_per_trial stays 0; _gpu_share); fixed: gpus_per_trial for every trial", cli=None)
    concurrency: int | None = launch_option(None, "most trials at once (default: what the cluster's resources fit)",
                                            "cluster", metavar="N")
    configs_per_trial: int = launch_option(
        1, "a trial group: configs trained together in one trial as one packed model, each still selected and "
           "stopped on its own", "cluster", metavar="N")
    report_every: int = launch_option(10, "epochs between reports to Tune", "cluster", metavar="EPOCHS")
    retries: int = launch_option(
        2, "times a trial whose Ray worker died (killed, node lost) trains again; a trial that raises is stored "
           "as failed at once", "cluster", metavar="N")
    # the GPU switches, one line per TrainOptions switch (execution() reads each): a flag given wins
    # over the space's ``execution`` section, which wins over TrainOptions' default; resolved when
    # the options are made, so the record holds the values used
    tf32: bool | None = execution_switch("tf32")
    deterministic: bool | None = execution_switch("deterministic")
    cuda_graph: bool | None = execution_switch("cuda_graph")
    data_root: str | None = launch_option(None, "raw data folder (the CLI's --data-root)", cli=None)
    download: bool = launch_option(False, "fetch datasets missing from data_root into it (the CLI's --download)",
                                   cli=None)
    points: tuple[dict[str, Any], ...] | None = launch_option(None, "explicit configs for the grid searcher",
                                                              cli=None)
    optuna_storage: str | None = launch_option(
        None, f"Optuna storage for optuna-dashboard: an RDB URL, a journal file, or {NO_STORAGE} (default: a "
              f"journal file beside a local store, <store>/optuna/NAME.journal)", "progress and live views",
        metavar="URL|FILE")
    tensorboard: bool = launch_option(True, "write TensorBoard event files under <store>/tensorboard/NAME",
                                      "progress and live views")
    mlflow: str | None = launch_option(
        None, "log each trial to MLflow at this tracking URI (a folder for a local file store, or a server's "
              "http(s)://...), one run per trial in the experiment NAME; needs pip install 'orthotune[mlflow]' "
              "(default: off)", "progress and live views", metavar="URI")
    wandb: str | None = launch_option(
        None, "log each trial to this Weights & Biases project, one run per trial in the group NAME "
              "(WANDB_MODE=offline keeps them local); needs pip install 'orthotune[wandb]' (default: off)",
        "progress and live views", metavar="PROJECT")

    def __post_init__(self) -> None:
        if self.gpus_per_trial == "auto":
            object.__setattr__(self, "gpus_per_trial", 0.0)
            object.__setattr__(self, "gpu_share", "auto")
        check_search_name(self.name)
        for name, value in self.execution().items():
            check(isinstance(value, bool), f"{name}={value!r} must be true or false")
            object.__setattr__(self, name, value)
        SEARCHERS.get(self.searcher)
        SCHEDULERS.get(self.scheduler)
        check(self.samples is None or self.samples >= 1, f"samples={self.samples!r} must be >= 1")
        self._check_budget()
        # each cell's sampler is seeded seed + its index, and NumPy takes seeds below 2**32
        check(isinstance(self.seed, int) and 0 <= self.seed < 2**31,
              f"seed={self.seed!r} must be an integer in [0, {2**31 - 1}]")
        check(self.cpus_per_trial > 0, f"cpus_per_trial={self.cpus_per_trial!r} must be > 0")
        check(math.isfinite(self.cpus_per_trial), f"cpus_per_trial={self.cpus_per_trial!r} must be a finite number")
        check(self.gpu_share in GPU_SHARES,
              f"gpu_share={self.gpu_share!r} must be one of {', '.join(GPU_SHARES)}")
        check(self.gpu_share == "fixed" or self.gpus_per_trial == 0,
              f"gpus_per_trial={self.gpus_per_trial!r} must be 0 with gpu_share='auto' (each cell's share is "
              f"measured)")
        check(self.gpus_per_trial >= 0, f"gpus_per_trial={self.gpus_per_trial!r} must be >= 0")
        check(math.isfinite(self.gpus_per_trial), f"gpus_per_trial={self.gpus_per_trial!r} must be a finite number")
        check(self.gpus_per_trial <= 1 or float(self.gpus_per_trial).is_integer(),
              f"gpus_per_trial={self.gpus_per_trial!r} must be a fraction <= 1 or a whole number")
        check(self.concurrency is None or self.concurrency >= 1,
              f"concurrency={self.concurrency!r} must be >= 1")
        check(self.report_every >= 1, f"report_every={self.report_every!r} must be >= 1")
        check(isinstance(self.configs_per_trial, int) and self.configs_per_trial >= 1,
              f"configs_per_trial={self.configs_per_trial!r} must be an integer >= 1")
        finite = [name for name in SEARCHERS.names() if SEARCHERS.get(name).finite]
        check(self.points is None or SEARCHERS.get(self.searcher).finite,
              f"explicit points need a searcher that trains given points ({', '.join(finite)}), "
              f"got searcher={self.searcher!r}")
        # a NUL byte is in no path or URL (the OS refuses it with a ValueError deep in a library)
        check(self.optuna_storage is None or (isinstance(self.optuna_storage, str) and self.optuna_storage
                                              and "\x00" not in self.optuna_storage),
              f"optuna_storage={self.optuna_storage!r} must be an RDB URL, a journal file path or {NO_STORAGE!r}")
        check(isinstance(self.tensorboard, bool), f"tensorboard={self.tensorboard!r} must be true or false")
        for tracker, what in (("mlflow", "a tracking URI or folder"), ("wandb", "a project name")):
            value = getattr(self, tracker)
            check(value is None or (isinstance(value, str) and value.strip() != "" and "\x00" not in value),
                  f"{tracker}={value!r} must be {what} (a non-empty string without NUL bytes)")
        check(isinstance(self.download, bool), f"download={self.download!r} must be true or false")
        check(isinstance(self.retries, int) and 0 <= self.retries <= 100,
              f"retries={self.retries!r} must be an integer from 0 to 100")
        if SCHEDULERS.get(self.scheduler).stops_at_rungs:  # Ray's ASHA asserts on this; say it in one line
            shortest = min(cell.max_epochs() for cell in self.space.cells())
            check(self.space.grace_period <= shortest,
                  f"asha.grace_period={self.space.grace_period} must be <= the fewest epochs a cell "
                  f"trains ({shortest}); lower it or use --scheduler fifo")

    def _check_budget(self) -> None:
        check(self.budget in BUDGETS, f"budget={self.budget!r} must be one of {', '.join(BUDGETS)}")
        if self.budget == "adaptive":
            STOPPING_RULES.get(self.stopping_rule)
            check(not SEARCHERS.get(self.searcher).finite,
                  f"budget adaptive: the {self.searcher} searcher trains a fixed set of points; use a sampling "
                  f"searcher ({', '.join(n for n in SEARCHERS.names() if not SEARCHERS.get(n).finite)})")
            budget_looks(self.samples or self.space.samples, self.first_look, self.look_step)

    def execution(self) -> dict[str, bool]:
        """The GPU switches every trial trains with (``TrainOptions``' fields): each one's flag
        where given, else the space's ``execution`` section, else TrainOptions' default."""
        chosen = {name: getattr(self, name) for name in EXECUTION_SWITCHES}
        return {name: self.space.execution.get(name, EXECUTION_SWITCHES[name].default) if value is None else value
                for name, value in chosen.items()}

    def looks(self):
        """The looks of an adaptive budget (``_stopping.Looks``)."""
        return budget_looks(self.samples or self.space.samples, self.first_look, self.look_step)

    def to_meta(self) -> dict[str, Any]:
        values = asdict(self)
        values["space"] = self.space.to_dict()
        return values

    @classmethod
    def check_meta(cls, values: dict[str, Any]) -> None:
        """Refuse options saved by another orthotune version (unknown options, or no space)."""
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown or "space" not in values:
            what = f"unknown option(s) {', '.join(unknown)}" if unknown else "no space"
            raise OrthotuneError(f"search {values.get('name')!r} was launched by an orthotune whose record this "
                                 f"version cannot read ({what}); resume it with that version, or launch it again "
                                 f"under a new name")

    @classmethod
    def from_meta(cls, values: dict[str, Any]) -> LaunchOptions:
        """Options saved by :meth:`to_meta`, their ``space`` parsed back."""
        cls.check_meta(values)
        values = {**values, "space": parse_space(values["space"])}
        if values.get("points") is not None:
            values["points"] = tuple(values["points"])
        return cls(**values)


@dataclass
class SearchOutcome:
    """What a finished (or interrupted) search left: counts by status and the best trials.

    ``best_by_cell`` maps each cell (``dataset/backbone/depth/arm``) to its best objective and
    config; ``best_config``/``best_objective`` are the best over all cells.
    """

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    best_config: dict[str, Any] | None = None
    best_objective: float | None = None
    best_by_cell: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)


