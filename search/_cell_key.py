"""The cell of a config, as the search names it: the key of its searcher, its Optuna study
and its ASHA bracket; and the configs a trial's config holds. Ray-free: the planner reads
these where Ray is not installed (a GPU machine without it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orthotune.core import Cell


def cell_key(config: Mapping[str, Any]) -> str:
    """A config's cell key (``core.Cell.key``): ``dataset/backbone/depth/arm`` (arm ``ortho``
    or ``original``; ``reference`` for the structure-agnostic reference's backbones), with
    ``/VARIANT`` before the arm for any variant label but ``default``.

    It names Optuna studies and stored searchers, so it never changes for a cell (``--resume``
    of an older search finds its studies by it). The variant label is part of it, so the
    variants of one space (profiles, ablations) get their own searchers, budgets and ASHA
    brackets (as the spaces layer names them).
    """
    return Cell.of(config).key


def member_configs(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The configs a trial trains: ``config["group"]`` when packed, else the config itself."""
    return list(config["group"]) if "group" in config else [config]
