"""Read a store's trials into a data frame and apply the user's filters (validated here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from orthotune.core import DATASETS, SETTINGS, TASKS, ConfigError, Group, OrthotuneError, TrainConfig, by_group
from orthotune.search.store import Store

#: The selection cell: one winner per combination of these (the config's cell fields).
CELL = tuple(f.name for f in by_group(TrainConfig, Group.CELL))
#: Display names of the two arms.
ORIGINAL, ORTHO = "original", "Ortho-GConv"


@dataclass(frozen=True)
class Filters:
    """Which trials take part. Empty tuples and ``None`` mean "all"."""

    searches: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    backbones: tuple[str, ...] = ()
    depths: tuple[int, ...] = ()
    ortho: bool | None = None

    def __post_init__(self) -> None:
        # names go through the same registries as training, so a typo fails listing valid ones
        set_ = object.__setattr__
        set_(self, "datasets", tuple(DATASETS.get(d).name for d in self.datasets))
        for setting in self.settings:
            if setting not in SETTINGS:
                raise ConfigError(f"unknown setting {setting!r}; valid: {', '.join(SETTINGS)}")
        set_(self, "backbones", tuple(_check_backbone(b) for b in self.backbones))
        for depth in self.depths:
            if not isinstance(depth, int) or depth < 2:
                raise ConfigError(f"depth={depth!r} must be an integer >= 2")

    def describe(self) -> str:
        parts = [f"{name}={','.join(map(str, values))}" for name, values in (
            ("search", self.searches), ("dataset", self.datasets), ("setting", self.settings),
            ("backbone", self.backbones), ("depth", self.depths)) if values]
        if self.ortho is not None:
            parts.append(f"arm={ORTHO if self.ortho else ORIGINAL}")
        return " ".join(parts) or "none"


def _check_backbone(name: str) -> str:
    key = str(name).lower()
    known = [b for task in TASKS for b in TASKS.get(task).backbones]
    if key in known:
        return key
    valid = ", ".join(known)
    raise ConfigError(f"unknown backbone {name!r}; valid: {valid}")


def open_store(store: Store | str) -> Store:
    """A :class:`Store` from a store or its URI; never creates one (reports only read)."""
    return store if isinstance(store, Store) else Store.open(str(store))


def load_trials(store: Store | str, filters: Filters | None = None) -> pd.DataFrame:
    """The ``trials`` table of ``store`` as a data frame, restricted to ``filters``.

    Columns are the store's TRIALS_SCHEMA plus ``arm`` (``original``/``Ortho-GConv``).
    An unknown search name fails listing the searches the store holds.
    """
    store, filters = open_store(store), filters or Filters()
    table = store.read("trials")
    frame = table.to_pandas()
    _check_searches(store, frame, filters.searches)
    keep = pd.Series(True, index=frame.index)
    for column, values in (("search", filters.searches), ("dataset", filters.datasets),
                           ("setting", filters.settings), ("backbone", filters.backbones),
                           ("depth", filters.depths)):
        if values:
            keep &= frame[column].isin(values)
    if filters.ortho is not None:
        keep &= frame["ortho"] == filters.ortho
    frame = frame[keep].reset_index(drop=True)
    frame["arm"] = frame["ortho"].map({False: ORIGINAL, True: ORTHO})
    return frame


def known_searches(store: Store, frame: pd.DataFrame) -> list[str]:
    """Searches with metadata or with trials (a store written trial by trial has no metadata)."""
    return sorted(set(store.search_names()) | set(frame["search"].dropna().unique()))


def _check_searches(store: Store, frame: pd.DataFrame, wanted: Sequence[str]) -> None:
    known = known_searches(store, frame)
    for name in wanted:
        if name not in known:
            raise OrthotuneError(
                f"no search {name!r} in store {store.uri!r}; searches: {', '.join(known) or 'none'}"
            )
