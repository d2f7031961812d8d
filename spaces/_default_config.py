"""A cell's default config: the one config a cell stands for before any search, which the
cost planner measures and ``--gpus-per-trial auto`` trains to size a cell's GPU share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def default_config(cell: Any) -> dict[str, Any]:
    """A one-cell space's default config: its define-by-run answered with orthotune's
    defaults where the space can take them, else each dimension's first value."""
    trial = _DefaultTrial(cell.default_point())
    fixed = cell.define_by_run(trial)
    return {**trial.params, **fixed}


class _DefaultTrial:
    """Stands in for an Optuna trial: every suggestion is the default, or the first value."""

    def __init__(self, defaults: Mapping[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.params: dict[str, Any] = {}

    def _answer(self, name: str, value: Any) -> Any:
        self.params[name] = value
        return value

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        choices = list(choices)
        value = self.defaults.get(name)
        return self._answer(name, value if value in choices else choices[0])

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        value = self.defaults.get(name)
        inside = isinstance(value, int) and low <= value <= high
        return self._answer(name, value if inside else low)

    def suggest_float(self, name: str, low: float, high: float, step: float | None = None,
                      log: bool = False) -> float:
        value = self.defaults.get(name)
        inside = isinstance(value, (int, float)) and low <= value <= high
        return self._answer(name, float(value) if inside else low)
