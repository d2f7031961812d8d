"""The experiment cell, declared once: its coordinates and the arms.

A *cell* is one point of the comparison: a dataset under a protocol setting, a backbone at a
depth, a variant, in one arm. Each coordinate is a field of :class:`Cell` made by
:func:`coordinate`, which says which config field (store column) it is read from, its
documentation and its role; the rest derives from these declarations: the search's cell key
(:attr:`Cell.key`: it names Optuna studies, stored searchers and ASHA brackets), the report's
group keys, sort orders, paper tables and headers, and ``best``'s table. The default arms
(the original backbone and its Ortho-GConv form, which ``ortho`` selects) are declared once
in :data:`ARMS`; a space that declares named arms (``arms``) sets the config's ``arm`` field,
whose name is then the cell's arm (:func:`arm_of`, :func:`named_arm`); and the
structure-agnostic reference beside them once in :data:`REFERENCE` (a cell of a reference backbone is the reference's).

Roles (:class:`CellRole`): the *place* coordinates (dataset, setting, backbone, depth) say where
two arms are compared; the *variant* (a profile or an ablation label; the report tells
cells apart by the variant's switches as well) is fixed within a cell; the *arm* is the one
coordinate the two cells of a pair differ in. A place coordinate lies on one *axis* of the
report's paper tables (:class:`CellAxis`): one table per section (the setting, which therefore
leads every table's columns), a row per row value (dataset, backbone), a column per column
value (depth; the report expects every depth it has seen for every row).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from orthotune.core._backbones import is_reference_backbone, reference_backbone
from orthotune.core._errors import check


@dataclass(frozen=True)
class Arm:
    """One arm of the comparison."""

    name: str  # how the reports and ``best`` show it
    key: str  # its part of a cell key, and its section of a space file
    prefix: str  # the prefix of its columns in the report's per-pair table
    ortho: bool  # the config's ``ortho`` value that selects it


#: The arms, in the order the report shows them: the backbone as published, then its
#: Ortho-GConv form.
ARMS: tuple[Arm, ...] = (
    Arm("original", key="original", prefix="orig", ortho=False),
    Arm("Ortho-GConv", key="ortho", prefix="ortho", ortho=True),
)


#: The structure-agnostic reference, the third arm-like entity: a model that never reads an
#: edge (the catalogue's ``reference`` backbone of the dataset's task: an MLP on the node
#: features, or the node features summed per graph and an MLP), searched once per dataset and
#: setting (and split rule) with the arms' budget, and shown beside every verdict there. It is
#: no arm of a pair: a cell whose backbone is a reference backbone is a reference cell (its
#: key ends in ``reference``), whatever its ``ortho`` (always false).
REFERENCE = Arm("structure-agnostic", key="reference", prefix="ref", ortho=False)
#: The reference's depth: its linear layers (features -> hidden -> classes: one hidden layer,
#: as H2GCN's MLP and Errica et al.'s baseline).
REFERENCE_DEPTH = 2


#: A named arm (a space's ``arms``): letters, digits, ``-``, ``_``, ``+`` and ``.``, starting with
#: a letter; it is the arm's part of a cell key, so it never takes a default arm's or the
#: reference's key.
ARM_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]*")
RESERVED_ARM_NAMES = (*(arm.key for arm in ARMS), REFERENCE.key)


def check_arm_name(name: object) -> str:
    """``name`` if it may name an arm (:data:`ARM_NAME`, none of :data:`RESERVED_ARM_NAMES`)."""
    check(isinstance(name, str) and ARM_NAME.fullmatch(name) is not None,
          f"arm name {name!r} must start with a letter and hold only letters, digits and _ . + -")
    check(name not in RESERVED_ARM_NAMES,
          f"arm name {name!r} is taken (reserved: {', '.join(RESERVED_ARM_NAMES)}); name the arm otherwise")
    return name


def named_arm(name: str, ortho: object) -> Arm:
    """The arm a space's ``arms`` names: shown, keyed and prefixed by its name."""
    return Arm(name, key=name, prefix=name, ortho=bool(ortho))


def arm_of(ortho: object, name: object = None) -> Arm:
    """The arm of a config: its named arm (``arm``, where a space declares arms), else the
    default arm its ``ortho`` value selects (missing: the original backbone)."""
    if isinstance(name, str) and name:
        return named_arm(name, ortho)
    return next(arm for arm in ARMS if arm.ortho == bool(ortho))


class CellRole(StrEnum):
    """What a coordinate of a cell is (see the module docstring)."""

    PLACE = "place"
    VARIANT = "variant"
    ARM = "arm"


class CellAxis(StrEnum):
    """Where a place coordinate lies in the report's paper tables."""

    SECTION = "section"  # one table per value; leads every table's columns
    ROW = "row"  # a row per combination of the row coordinates
    COLUMN = "column"  # a column pair (original, Ortho-GConv) per value; every value expected


def coordinate(doc: str, role: CellRole = CellRole.PLACE, *, axis: CellAxis | None = None,
               source: str | None = None, kind: Callable[[Any], Any] = str, in_key: bool = True,
               implicit: Any = None, label: str = "{}", named_by: str | None = None) -> Any:
    """A field of :class:`Cell`.

    ``source``: the config field (and store column) it is read from, by default its own name;
    ``kind``: its values' type; ``in_key``: part of the search's cell key; ``implicit``: the
    value of a config that leaves it unset, which the key leaves out; ``label``: how a
    verdict line names a value (``depth {}``); ``axis``: for a place coordinate, where the
    paper tables put it (default: a row); ``named_by``: a config field whose non-empty value
    names the coordinate's value instead (the arm: ``arm``, else ``ortho`` selects it).
    """
    if axis is None and role is CellRole.PLACE:
        axis = CellAxis.ROW
    metadata = {"doc": doc, "role": role, "axis": axis, "source": source, "kind": kind, "in_key": in_key,
                "implicit": implicit, "label": label, "named_by": named_by}
    return dataclasses.field(metadata=metadata)


@dataclass(frozen=True)
class Cell:
    """One experiment cell; :meth:`of` reads it from a config or a trials row."""

    dataset: str = coordinate("the dataset")
    # a space fixes one setting per dataset, so a search's cell key does without it
    setting: str | None = coordinate("the protocol setting", axis=CellAxis.SECTION, in_key=False)
    backbone: str = coordinate("the backbone (a catalogue name, or a user's factory)")
    depth: int = coordinate("graph convolutions (Graph U-Nets: pooling levels)", axis=CellAxis.COLUMN, kind=int,
                            label="depth {}")
    variant: str = coordinate("the variant label (a profile or an ablation); the report also keeps apart "
                              "cells whose variant switches differ", CellRole.VARIANT, implicit="default")
    arm: Arm = coordinate("the original backbone or its Ortho-GConv form, or the named arm of a space's arms",
                          CellRole.ARM, source="ortho", kind=arm_of, named_by="arm")

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Cell:
        """The cell of a config (or a trials row): each coordinate from its source field; a
        reference backbone's cell is the reference's (:data:`REFERENCE`)."""
        cell = cls(**{f.name: _read(f, values) for f in cell_coordinates()})
        return dataclasses.replace(cell, arm=REFERENCE) if is_reference_backbone(cell.backbone) else cell

    @classmethod
    def reference(cls, dataset: str, setting: str | None = None) -> Cell:
        """The reference cell of ``dataset`` (in ``setting``): its task's reference backbone at
        :data:`REFERENCE_DEPTH`, the default variant."""
        return cls(dataset, setting, reference_backbone(dataset), REFERENCE_DEPTH, "default", REFERENCE)

    @property
    def is_reference(self) -> bool:
        return self.arm is REFERENCE

    @property
    def key(self) -> str:
        """The search's cell key, ``dataset/backbone/depth[/variant]/arm`` (the arm's key): the
        coordinates in the key, in order, but those at their implicit value."""
        parts = []
        for f in cell_coordinates():
            value, implicit = getattr(self, f.name), f.metadata["implicit"]
            if f.metadata["in_key"] and (implicit is None or value != implicit):
                parts.append(value.key if isinstance(value, Arm) else str(value))
        return "/".join(parts)


def cell_coordinates(*roles: CellRole) -> list[dataclasses.Field]:
    """The coordinates of :class:`Cell` (of ``roles``, default all), in declaration order."""
    return [f for f in dataclasses.fields(Cell) if not roles or f.metadata["role"] in roles]


def cell_names(*roles: CellRole, axes: tuple[CellAxis, ...] = ()) -> tuple[str, ...]:
    """The names of :func:`cell_coordinates` (of ``roles``), restricted to the place
    coordinates on ``axes`` if given."""
    return tuple(f.name for f in cell_coordinates(*roles) if not axes or f.metadata["axis"] in axes)


def cell_report_order(*roles: CellRole) -> tuple[str, ...]:
    """:func:`cell_names` as the report's tables order them: the section coordinates (the
    setting) first, then the others in declaration order."""
    names, leading = cell_names(*roles), cell_names(axes=(CellAxis.SECTION,))
    return (*[n for n in names if n in leading], *[n for n in names if n not in leading])


def cell_source(name: str) -> str:
    """The config field (store column) a coordinate is read from."""
    f = next(f for f in cell_coordinates() if f.name == name)
    return f.metadata["source"] or f.name


def cell_label(name: str, value: Any) -> str:
    """A coordinate's value as a verdict line names it (``depth 4``)."""
    f = next(f for f in cell_coordinates() if f.name == name)
    return f.metadata["label"].format(f.metadata["kind"](value))


def _read(f: dataclasses.Field, values: Mapping[str, Any]) -> Any:
    """A coordinate's value in ``values`` as its kind (the arm of a missing ``ortho`` too)."""
    value = values.get(f.metadata["source"] or f.name)
    if f.metadata["named_by"]:
        return f.metadata["kind"](value, values.get(f.metadata["named_by"]))
    implicit = f.metadata["implicit"]
    if implicit is not None and not value:
        return implicit
    return value if value is None and f.metadata["role"] is not CellRole.ARM else f.metadata["kind"](value)
