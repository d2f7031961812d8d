"""How many configs a search trains: the grid's points, or per cell ``samples`` (fewer where
the cell has fewer distinct configs: nothing trains twice). Light to import (no Ray, no
torch): what a search will run is known before anything starts."""

from __future__ import annotations

from collections import Counter

from orthotune.core import ConfigError
from orthotune.search._algorithms import SEARCHERS
from orthotune.search._cell_key import cell_key
from orthotune.search._options import LaunchOptions
from orthotune.spaces import SearchSpace


def budgeted_configs(options: LaunchOptions) -> int:
    """How many configs a search trains at most."""
    if options.points is not None:
        return len(options.points)  # explicit points may lie outside the space's cells
    return sum(cell_trials(options).values())


def cell_trials(options: LaunchOptions) -> dict[str, int]:
    """How many configs each cell trains at most (cell key -> configs): the grid's points in
    the cell, or ``samples`` (fewer where the cell has fewer distinct configs)."""
    cells = options.space.cells()
    if options.points is not None:  # only a finite searcher takes them (``LaunchOptions``)
        return dict(Counter(cell_key(point) for point in options.points))
    searcher = SEARCHERS.get(options.searcher)
    if searcher.finite:
        return {cell.key: searcher.size(cell) for cell in cells}
    samples = options.samples or options.space.samples
    return {cell.key: min(samples, grid_size(cell) or samples) for cell in cells}


def grid_size(cell: SearchSpace) -> int | None:
    """How many distinct configs a cell has; None when a dimension is continuous."""
    try:
        return cell.grid_size()
    except ConfigError:
        return None
