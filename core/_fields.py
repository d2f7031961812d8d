"""Config fields declared once: type, default, rule and documentation in one place.

Each field of :class:`~orthotune.core.TrainConfig` (and of the Ortho-GConv settings it
shares with :class:`~orthotune.core.OrthoSettings`) is a dataclass field made by
:func:`option`. Its metadata carries a :class:`Rule` (what values are valid, stated in
the error message), its documentation and its *group*, from which the rest of the
product derives what it needs: the space parser (which keys a space may search), the
store schema (one typed column per field), the CLI options (help, default, choices) and
the report's cell key (fields that tell variants apart). A field read by some backbones
only says which (``backbones``: ``core.Readers``, by name or by the capabilities the
backbones declare): a winner's config shows the fields its backbone reads.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from orthotune.core._errors import ConfigError


class Group(StrEnum):
    """What a field is, which decides where it appears."""

    CELL = "cell"  # names the experiment cell: dataset, setting, backbone, depth, arm
    ORTHO = "ortho"  # Ortho-GConv's searched values (null for the original arm)
    VARIANT = "variant"  # structural switches: part of the cell key, fixed within a pack
    TRAIN = "train"  # training hyperparameters, searched or fixed
    REPEATS = "repeats"  # splits and seeds: the repeats of one config


@dataclass(frozen=True)
class Rule:
    """A value rule: a kind (``int``, ``float``, ``bool``, ``str``, ``ints``) and bounds."""

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[Any, ...] | None = None
    optional: bool = False  # None allowed after defaults are applied

    def check(self, name: str, value: Any) -> None:
        if value is None and self.optional:
            return
        if not self._type_ok(value):
            raise ConfigError(f"{name}={value!r} must be {self.describe()}")
        if self.kind == "ints":
            for item in value:
                self._check_bounds(name, item, value)
            return
        self._check_bounds(name, value, value)

    def _type_ok(self, value: Any) -> bool:
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "int":
            return _is_int(value)
        if self.kind == "float":
            return _is_number(value) and math.isfinite(value)
        if self.kind == "str":
            return isinstance(value, str)
        if self.kind == "ints":
            return isinstance(value, tuple) and len(value) >= 1 and all(_is_int(v) for v in value)
        raise AssertionError(self.kind)

    def _check_bounds(self, name: str, item: Any, shown: Any) -> None:
        if self.choices is not None and item not in self.choices:
            raise ConfigError(f"{name}={shown!r} must be {self.describe()}")
        too_low = self.low is not None and (item <= self.low if self.low_open else item < self.low)
        too_high = self.high is not None and (item >= self.high if self.high_open else item > self.high)
        if too_low or too_high:
            raise ConfigError(f"{name}={shown!r} must be {self.describe()}")

    def describe(self) -> str:
        """The rule in words, as error messages and ``--help`` state it."""
        noun = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
                "ints": "a non-empty list of integers"}[self.kind]
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"{noun} in {left}{_num(self.low)}, {_num(self.high)}{right}"
        if self.low is not None:
            return f"{noun} {'>' if self.low_open else '>='} {_num(self.low)}"
        return noun


def option(default: Any, rule: Rule, doc: str, group: Group, *, column: str | None = None,
           backbones: Collection[str] | None = None) -> Any:
    """A dataclass field carrying its rule, documentation and group (see module docstring).

    ``column`` renames the field's store column (``epochs`` is stored as ``max_epochs``,
    since the trials table also records the epochs a trial actually ran). ``backbones``: the
    backbones that read the field, as the models and the training loop do (a ``core.Readers``:
    by name or by declared capability, users' factories among them or not); None: every backbone.
    """
    metadata = {"rule": rule, "doc": doc, "group": group, "column": column, "backbones": backbones}
    return dataclasses.field(default=default, metadata=metadata)


def declared(cls: type) -> list[dataclasses.Field]:
    """The declared fields of a config dataclass, in declaration order."""
    return [f for f in dataclasses.fields(cls) if "rule" in f.metadata]


def by_group(cls: type, *groups: Group) -> list[dataclasses.Field]:
    return [f for f in declared(cls) if f.metadata["group"] in groups]


def validate_fields(instance: Any) -> None:
    """Apply every field's rule to ``instance``; the first broken rule raises."""
    for f in declared(type(instance)):
        f.metadata["rule"].check(f.name, getattr(instance, f.name))


def column_name(f: dataclasses.Field) -> str:
    return f.metadata.get("column") or f.name


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e6 else repr(value)
