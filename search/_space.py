"""What a search runs over, as this layer consumes it: a :class:`Space` of cells, and the cell
of a config (:func:`cell_key`). The spaces layer above builds them: its ``SearchSpace`` is a
:class:`Space`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from orthotune.core import Cell, TrainConfig


def cell_key(config: Mapping[str, Any]) -> str:
    """A config's cell key (``core.Cell.key``): ``dataset/backbone/depth/arm`` (arm ``ortho``
    or ``original``), with ``/VARIANT`` before the arm for any variant label but ``default``.

    It names Optuna studies and stored searchers, so it never changes for a cell (``--resume``
    of an older search finds its studies by it). The variant label is part of it, so the
    variants of one space (profiles, ablations) get their own searchers, budgets and ASHA
    brackets (as the spaces layer names them).
    """
    return Cell.of(config).key


class Space(ABC):
    """A search space split into cells: each cell (one of :meth:`cells`) gets its own
    searcher over :meth:`define_by_run` (or :meth:`grid`), ``samples`` trainings and its own
    ASHA (``grace_period``, ``reduction_factor``, ``max_t`` = :meth:`max_epochs`)."""

    samples: int
    grace_period: int
    reduction_factor: int

    @abstractmethod
    def cells(self) -> list[Space]:
        """One space per cell (dataset, backbone, depth, variant, arm)."""

    @property
    @abstractmethod
    def key(self) -> str:
        """A one-cell space's cell: the :func:`cell_key` of each of its configs."""

    @abstractmethod
    def define_by_run(self, trial: Any) -> dict[str, Any]:
        """Optuna define-by-run: sample the trial's values, return the fixed ones."""

    @abstractmethod
    def default_point(self) -> dict[str, Any]:
        """A one-cell space's default values of its searched dimensions (tried first)."""

    @abstractmethod
    def grid(self) -> list[dict[str, Any]]:
        """Every config of the space (the grid searcher's points)."""

    @abstractmethod
    def max_epochs(self) -> int:
        """The longest a trial can train (ASHA's ``max_t``)."""

    @abstractmethod
    def largest_configs(self) -> list[TrainConfig]:
        """Per cell, the config that needs the most memory (checked before a search starts)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form, saved in the search's record (``--resume`` parses it back)."""
