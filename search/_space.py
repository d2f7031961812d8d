"""What a search needs of a space: the interface the spaces layer (above) implements."""

from __future__ import annotations

from typing import Any, Protocol


class SearchSpace(Protocol):
    """A search space as the Ray glue sees it (``orthotune.spaces.SearchSpace`` implements it)."""

    name: str
    datasets: tuple[str, ...]
    backbones: tuple[str, ...]
    depths: tuple[int, ...]
    ortho: Any  # the Ortho-GConv arm's dimensions, None without that arm
    samples: int
    grace_period: int
    reduction_factor: int

    def define_by_run(self, trial: Any) -> dict[str, Any]:
        """Optuna define-by-run: sample the trial's values, return the fixed ones."""

    def grid(self) -> list[dict[str, Any]]:
        """Every config of the space (the grid searcher's points)."""

    def max_epochs(self) -> int:
        """The longest a trial can train (ASHA's ``max_t``)."""

    def protocol(self, dataset: str) -> dict[str, Any]:
        """The setting and repeats a config of ``dataset`` trains with."""

    def largest_configs(self) -> list[Any]:
        """Per cell, the config that needs the most memory (``TrainConfig``s)."""

    def default_point(self) -> dict[str, Any]:
        """A one-cell space's default values of its searched dimensions (tried first)."""

    def cells(self) -> list[SearchSpace]:
        """One space per cell (dataset, backbone, depth, arm), each with ``samples`` trials."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form the spaces layer parses back (saved for ``--resume``)."""
