"""What a search is asked to do, light enough for the CLI to import at once: the launch
options and the outcome. The heavy machinery lives in ``_launch``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from orthotune.core import OrthotuneError, check
from orthotune.search._algorithms import SCHEDULERS, SEARCHERS
from orthotune.search._space import Space
from orthotune.store import check_search_name

#: ``--optuna-storage`` value that turns the cells' Optuna studies off.
NO_STORAGE = "off"
#: Progress display modes (``--progress``): a bar on a terminal or plain lines elsewhere.
MODES = ("auto", "bar", "plain")
#: How trials get GPUs: ``fixed`` (``gpus_per_trial`` each) or ``auto`` (each cell's share of
#: a GPU decided from its measured cost on the cluster: ``_gpu_share``).
GPU_SHARES = ("fixed", "auto")


@dataclass(frozen=True)
class LaunchOptions:
    """How to run one search; validated here, typed afterwards."""

    store: str
    name: str
    space: Space
    samples: int | None = None  # trainings per cell and arm (default: the space's)
    searcher: str = "optuna"
    scheduler: str = "asha"
    address: str | None = None
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    concurrency: int | None = None
    data_root: str | None = None
    seed: int = 0
    report_every: int = 10
    configs_per_trial: int = 1
    points: tuple[dict[str, Any], ...] | None = None  # explicit configs for the grid searcher
    # Optuna storage of the cells' studies (optuna-dashboard): None for a journal file beside
    # a local store (<store>/optuna/NAME.journal), an RDB URL, a journal file path, or "off"
    optuna_storage: str | None = None
    tensorboard: bool = True  # TensorBoard event files per config under <store>/tensorboard/NAME
    download: bool = False  # fetch datasets missing from data_root into it (never without asking)
    # times Ray Tune restarts a trial whose worker died (killed, node lost); a trial that
    # raises is stored as failed at once instead (its error would only repeat)
    retries: int = 2
    # "auto": each cell's fraction of a GPU measured on the cluster before trials start
    # (gpus_per_trial stays 0; ``_gpu_share``); "fixed": gpus_per_trial for every trial
    gpu_share: str = "fixed"

    def __post_init__(self) -> None:
        check_search_name(self.name)
        SEARCHERS.get(self.searcher)
        SCHEDULERS.get(self.scheduler)
        check(self.samples is None or self.samples >= 1, f"samples={self.samples!r} must be >= 1")
        check(self.cpus_per_trial > 0, f"cpus_per_trial={self.cpus_per_trial!r} must be > 0")
        check(self.gpu_share in GPU_SHARES,
              f"gpu_share={self.gpu_share!r} must be one of {', '.join(GPU_SHARES)}")
        check(self.gpu_share == "fixed" or self.gpus_per_trial == 0,
              f"gpus_per_trial={self.gpus_per_trial!r} must be 0 with gpu_share='auto' (each cell's share is "
              f"measured)")
        check(self.gpus_per_trial >= 0, f"gpus_per_trial={self.gpus_per_trial!r} must be >= 0")
        check(self.gpus_per_trial <= 1 or float(self.gpus_per_trial).is_integer(),
              f"gpus_per_trial={self.gpus_per_trial!r} must be a fraction <= 1 or a whole number")
        check(self.concurrency is None or self.concurrency >= 1,
              f"concurrency={self.concurrency!r} must be >= 1")
        check(self.report_every >= 1, f"report_every={self.report_every!r} must be >= 1")
        check(isinstance(self.configs_per_trial, int) and self.configs_per_trial >= 1,
              f"configs_per_trial={self.configs_per_trial!r} must be an integer >= 1")
        check(self.points is None or self.searcher == "grid",
              f"explicit points need searcher='grid', got searcher={self.searcher!r}")
        check(self.optuna_storage is None or (isinstance(self.optuna_storage, str) and self.optuna_storage),
              f"optuna_storage={self.optuna_storage!r} must be an RDB URL, a journal file path or {NO_STORAGE!r}")
        check(isinstance(self.tensorboard, bool), f"tensorboard={self.tensorboard!r} must be true or false")
        check(isinstance(self.download, bool), f"download={self.download!r} must be true or false")
        check(isinstance(self.retries, int) and 0 <= self.retries <= 100,
              f"retries={self.retries!r} must be an integer from 0 to 100")
        if self.scheduler == "asha":  # Ray's ASHA asserts on this; say it in one line instead
            shortest = min(cell.max_epochs() for cell in self.space.cells())
            check(self.space.grace_period <= shortest,
                  f"asha.grace_period={self.space.grace_period} must be <= the fewest epochs a cell "
                  f"trains ({shortest}); lower it or use --scheduler fifo")

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
    def from_meta(cls, values: dict[str, Any], space: Space) -> LaunchOptions:
        """Options saved by :meth:`to_meta`, with ``space`` parsed from their ``space`` dict by
        the caller (the spaces layer, above this one)."""
        cls.check_meta(values)
        values = {**values, "space": space}
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


