"""How many configs a search trains: the grid's points, or per cell ``samples`` (fewer where
the cell has fewer distinct configs: nothing trains twice). Light to import (no Ray, no
torch): what a search will run is known before anything starts."""

from __future__ import annotations

from orthotune.core import ConfigError
from orthotune.search._options import LaunchOptions
from orthotune.spaces import SearchSpace


def planned_configs(options: LaunchOptions) -> int:
    """How many configs a search trains at most."""
    if options.searcher == "grid":
        return len(options.points) if options.points is not None else len(options.space.grid())
    samples = options.samples or options.space.samples
    return sum(min(samples, grid_size(cell) or samples) for cell in options.space.cells())


def grid_size(cell: SearchSpace) -> int | None:
    """How many distinct configs a cell has; None when a dimension is continuous."""
    try:
        return len(cell.grid())
    except ConfigError:
        return None
