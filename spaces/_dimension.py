"""One searchable value of a space: fixed, a choice, or an int/float range."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from orthotune.core import PASS_SELECTION, ConfigError

RANGE_KEYS = {"low", "high", "step", "log"}


#: Field values ``orthotune train`` takes that a search refuses, with the reason. A resumed
#: search replays each trial's selection from its stored epochs (ASHA's rungs), and those hold
#: the evaluation's validation loss, not the training pass's.
NOT_IN_SEARCHES = {("selection", PASS_SELECTION): "a resumed search replays selection from stored "
                   "epochs, which hold the evaluation's validation loss only (use it with orthotune train)"}


@dataclass(frozen=True)
class Dimension:
    """``kind`` is ``fixed`` (one value), ``choice`` (a list) or ``int``/``float`` (a range)."""

    name: str
    kind: str
    values: tuple[Any, ...] = ()
    low: float = 0.0
    high: float = 0.0
    step: float | None = None
    log: bool = False

    @classmethod
    def parse(cls, name: str, spec: Any) -> Dimension:
        """From YAML: a scalar, a non-empty list, or ``{low, high, step?, log?}``."""
        for value in spec if isinstance(spec, list) else [spec]:
            reason = NOT_IN_SEARCHES.get((name, value)) if isinstance(value, str) else None
            if reason:
                raise ConfigError(f"{name}={value!r} cannot be searched: {reason}")
        if isinstance(spec, list):
            if not spec:
                raise ConfigError(f"{name}: the list of values is empty; give at least one value")
            return cls(name, "choice", tuple(spec))
        if isinstance(spec, dict):
            return cls._parse_range(name, spec)
        return cls(name, "fixed", (spec,))

    @classmethod
    def _parse_range(cls, name: str, spec: dict) -> Dimension:
        unknown = sorted(set(spec) - RANGE_KEYS, key=str)
        if unknown:
            raise ConfigError(f"{name}: unknown range key {unknown[0]!r}; valid: {', '.join(sorted(RANGE_KEYS))}")
        if "low" not in spec or "high" not in spec:
            raise ConfigError(f"{name}: a range needs both 'low' and 'high'")
        low, high, step, log = spec["low"], spec["high"], spec.get("step"), spec.get("log", False)
        for key, value in (("low", low), ("high", high), ("step", step)):
            if value is not None and not _number(value):
                raise ConfigError(f"{name}.{key}={value!r} must be a finite number")
        if not isinstance(log, bool):
            raise ConfigError(f"{name}.log={log!r} must be true or false")
        if low > high:
            raise ConfigError(f"{name}: range low={low!r} > high={high!r}; low must be <= high")
        if step is not None and step <= 0:
            raise ConfigError(f"{name}.step={step!r} must be > 0")
        if log and (low <= 0 or step is not None):
            raise ConfigError(f"{name}: a log range needs low > 0 and no step (low={low!r}, step={step!r})")
        integer = all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high, step or 1))
        return cls(name, "int" if integer else "float", (), low, high, step, log)

    def grid(self) -> list[Any]:
        """Every value, for grid search; a continuous range has none."""
        if self.kind in ("fixed", "choice"):
            return list(self.values)
        if self.kind == "int":
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        if self.step is None:
            raise ConfigError(f"{self.name}: grid search needs a 'step' or a list of values for a float range")
        count = int(math.floor((self.high - self.low) / self.step + 1e-9)) + 1
        return [round(self.low + i * self.step, 12) for i in range(count)]

    def corners(self) -> list[Any]:
        """The values whose validity implies every value's (ends of ranges, all choices)."""
        if self.kind in ("fixed", "choice"):
            return list(self.values)
        return [self.low, self.high]

    def suggest(self, trial: Any) -> Any:
        """Sample with an Optuna trial (define-by-run), under this dimension's name."""
        if self.kind == "fixed":
            return self.values[0]
        if self.kind == "choice":
            return trial.suggest_categorical(self.name, list(self.values))
        if self.kind == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one this dimension can take (on a range's step, if any)."""
        if self.kind in ("fixed", "choice"):
            return value in self.values
        if not _number(value) or not self.low <= value <= self.high:
            return False
        if self.step is None:
            return self.kind == "float" or float(value).is_integer()
        steps = (value - self.low) / self.step
        return abs(steps - round(steps)) < 1e-9

    def searched(self) -> bool:
        return self.kind != "fixed" and not (self.kind == "choice" and len(self.values) == 1)

    def to_yaml(self) -> Any:
        """The space-file form :meth:`parse` reads back to an equal dimension."""
        if self.kind == "fixed":
            return self.values[0]
        if self.kind == "choice":
            return list(self.values)
        out: dict[str, Any] = {"low": self.low, "high": self.high}
        if self.step is not None:
            out["step"] = self.step
        if self.log:
            out["log"] = True
        return out


def pick(trial: Any, dimension: Dimension) -> dict[str, Any]:
    """Fixed values are returned; searched ones are suggested (Optuna records them)."""
    value = dimension.suggest(trial) if dimension.searched() else dimension.values[0]
    return {} if dimension.searched() else {dimension.name: value}


def grid_product(dimensions: Iterable[Dimension], **extra: Any) -> list[dict[str, Any]]:
    """Every combination of the dimensions' grid values, each with ``extra``."""
    dimensions = list(dimensions)
    grids = [d.grid() for d in dimensions]
    return [{**extra, **{d.name: v for d, v in zip(dimensions, combo)}} for combo in itertools.product(*grids)]


def grid_count(dimensions: Iterable[Dimension]) -> int:
    """``len(grid_product(dimensions))``."""
    return math.prod(len(d.grid()) for d in dimensions)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
