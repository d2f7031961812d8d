"""The load stage, the report's first: read a store's trials into a data frame, apply the
user's filters (validated here) and set the structure-agnostic reference's rows apart from
the arms' (:func:`load`, whose :class:`Loaded` the select stage takes). Also the columns'
vocabulary every later stage names its tables by (``CELL``, ``PAIR``, ``LEAD``, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from orthotune.core import (
    ARMS,
    DATASETS,
    REFERENCE,
    REFERENCE_BACKBONES,
    SETTINGS,
    SPLIT_FIELDS,
    CellAxis,
    CellRole,
    ConfigError,
    Group,
    OrthoSettings,
    OrthotuneError,
    TrainConfig,
    arm_of,
    backbone_name,
    by_group,
    cell_coordinates,
    cell_names,
    cell_report_order,
    cell_source,
)
from orthotune.store import TRIALS_SCHEMA, Store

#: The cell's coordinates (``core.Cell``) as the report reads them. The place (dataset,
#: setting, backbone, depth) in the cell's order, which ``best`` and the winners follow ...
PLACE = cell_names(CellRole.PLACE)
#: ... and in the report's, the section (setting) first: the columns every table leads with.
LEAD = cell_report_order(CellRole.PLACE)
#: The place coordinates the paper tables make one table per value of (setting), put in rows
#: (dataset, backbone) and in columns (depth).
SECTIONS, ROWS = cell_names(axes=(CellAxis.SECTION,)), cell_names(axes=(CellAxis.ROW,))
COLUMNS = cell_names(axes=(CellAxis.COLUMN,))
#: The names of the variant and the arm in the tables (the variant shown by :func:`load_trials`'s
#: ``variant_name``, the arm by its name), and the column the arm is read from (``ortho``).
(VARIANT,), (ARM,) = cell_names(CellRole.VARIANT), cell_names(CellRole.ARM)
ARM_COLUMN = cell_source(ARM)
#: The column of a space's named arm (``core.named_arm``; empty or null: the default pair's
#: arm, which ``ortho`` selects). Its rows are the comparisons stage's (``_arms``), not the pairs'.
NAMED_ARM = next(f.metadata["named_by"] for f in cell_coordinates(CellRole.ARM))
#: Each coordinate's type (depth: int), to which values pandas turned into floats go back;
#: the integer place coordinates stay integers in every table.
KINDS = {f.name: f.metadata["kind"] for f in cell_coordinates()}
INTEGERS = tuple(name for name in PLACE if KINDS[name] is int)
#: The cell's place and arm as trials columns: dataset, setting, backbone, depth, ``ortho``.
BASE = (*PLACE, ARM_COLUMN)
#: The variant switches (profile/ablation label, bound, transform, selection, ...):
#: fixed within a cell, so trials of different variants never compete.
SWITCHES = tuple(f.name for f in by_group(TrainConfig, Group.VARIANT))
#: Switches only Ortho-GConv's layers read; the original arm's values are ignored (dropped).
ORTHO_SWITCHES = tuple(f.name for f in by_group(OrthoSettings, Group.VARIANT))
#: Switches both arms read, the ``variant`` label included: what a pair must agree on.
SHARED = tuple(s for s in SWITCHES if s not in ORTHO_SWITCHES)
#: The selection cell: one winner per combination of these. ``switches`` is a column
#: :func:`load_trials` derives from the row's :data:`SWITCHES` (``k=v;...``, without the
#: Ortho-only switches for the original arm), so the key is never null and sorts. The arm
#: comes before the variant: a place's original winner sorts before its Ortho-GConv variants.
CELL = (*BASE, "switches")
#: The pair of a paired test: the cell without the arm; ``shared`` encodes :data:`SHARED`.
PAIR = (*LEAD, "shared")
#: The columns a pair row is shown by (``PAIR`` with the variant's name for its switches).
ROW = (*LEAD, VARIANT)
#: Display names of the two arms.
ORIGINAL, ORTHO = (arm.name for arm in ARMS)
#: The columns :func:`load_trials` reads whatever it is asked for: the trial's identity, the
#: filters' columns and what the cell's keys and the arm derive from.
_KEYS = ("search", "trial_id", *BASE, NAMED_ARM, "variant", *SWITCHES, *SPLIT_FIELDS)


@dataclass(frozen=True)
class Filters:
    """Which trials take part. Empty tuples and ``None`` mean "all"."""

    searches: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    backbones: tuple[str, ...] = ()
    depths: tuple[int, ...] = ()
    ortho: bool | None = None
    variants: tuple[str, ...] = ()  # ``variant`` labels (profile or ablation names)

    def __post_init__(self) -> None:
        # names go through the same registries as training, so a typo fails listing valid ones
        set_ = object.__setattr__
        set_(self, "datasets", tuple(DATASETS.get(d).name for d in self.datasets))
        for setting in self.settings:
            if setting not in SETTINGS.names():
                raise ConfigError(f"unknown setting {setting!r}; valid: {', '.join(SETTINGS.names())}")
        set_(self, "backbones", tuple(_check_backbone(b) for b in self.backbones))
        for depth in self.depths:
            if not isinstance(depth, int) or depth < 2:
                raise ConfigError(f"depth={depth!r} must be an integer >= 2")

    def describe(self) -> str:
        parts = [f"{name}={','.join(map(str, values))}" for name, values in (
            ("search", self.searches), ("dataset", self.datasets), ("setting", self.settings),
            ("backbone", self.backbones), ("depth", self.depths), ("variant", self.variants)) if values]
        if self.ortho is not None:
            parts.append(f"{ARM}={arm_of(self.ortho).name}")
        return " ".join(parts) or "none"


def _check_backbone(name: str) -> str:
    return backbone_name(name)


def open_store(store: Store | str) -> Store:
    """A :class:`Store` from a store or its URI; never creates one (reports only read)."""
    return store if isinstance(store, Store) else Store.open(str(store))


@dataclass(frozen=True)
class Loaded:
    """The load stage's product: the store it read, the filters, the arms' trials and the
    structure-agnostic reference's (:func:`split_reference`), the searches' records and the
    rows of a space's named arms (:func:`split_named`)."""

    store: Store
    filters: Filters
    trials: pd.DataFrame
    reference: pd.DataFrame
    records: dict
    named: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def arms(self) -> tuple[bool, ...]:
        """The arms (``ortho`` values) the filters keep."""
        return (False, True) if self.filters.ortho is None else (self.filters.ortho,)


def load(store: Store | str, filters: Filters | None = None, columns: Sequence[str] | None = None) -> Loaded:
    """The load stage: :func:`load_trials` (``columns`` of every trial), the reference's rows
    apart, and the records (which searches ran a smoke-test space)."""
    store, filters = open_store(store), filters or Filters()
    trials, reference = split_reference(load_trials(store, filters, columns))
    trials, named = split_named(trials)
    return Loaded(store, filters, trials, reference, store.searches(), named)


#: The ``trials`` columns that are lists (per repeat, per layer): decoding them for every trial
#: is most of a read's cost, and only winners' rows show them, so the reports read them for
#: the winners alone (``_select.complete_rows``).
LISTS = tuple(f.name for f in TRIALS_SCHEMA if pa.types.is_list(f.type))
#: Every other column: what selection, the tables and the plots read of every trial.
SCALARS = tuple(f.name for f in TRIALS_SCHEMA if f.name not in LISTS)


def load_trials(store: Store | str, filters: Filters | None = None,
                columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The ``trials`` table of ``store`` as a data frame, restricted to ``filters``.

    Columns are the store's TRIALS_SCHEMA (``columns``: only those, in the schema's order;
    :data:`SCALARS` holds all a selection needs) plus ``arm`` (``original``/``Ortho-GConv``),
    ``switches`` and ``shared`` (the cell's and the pair's variant keys, see :data:`CELL`) and
    ``variant_name`` (the ``variant`` label, with the switches that tell apart cells sharing
    a label). Only the searches asked for are read. An unknown search name fails listing the
    searches the store holds.
    """
    store, filters = open_store(store), filters or Filters()
    _check_searches(store, filters.searches)
    names = [c for c in TRIALS_SCHEMA.names if columns is None or c in columns or c in _KEYS]
    # with the reference rows these searches reuse from others (their records say which)
    reused = reused_from(store.searches(), filters.searches) if filters.searches else []
    if filters.searches:
        table = pa.concat_tables([store.read("trials", search=name, columns=names)
                                  for name in dict.fromkeys([*filters.searches, *reused])])
    else:
        table = store.read("trials", columns=names)
    frame = table.to_pandas()
    reference = is_reference(frame)
    keep = pd.Series(True, index=frame.index)
    if filters.searches:
        keep &= frame["search"].isin(filters.searches) | (reference & frame["search"].isin(reused))
    for column, values in (("dataset", filters.datasets), ("setting", filters.settings)):
        if values:
            keep &= frame[column].isin(values)
    # the reference is per dataset and setting: the arms' filters (backbone, depth, arm,
    # variant) leave it in, so every verdict they keep still stands beside it
    arms = pd.Series(True, index=frame.index)
    for column, values in (("backbone", filters.backbones), ("depth", filters.depths),
                           ("variant", filters.variants)):
        if values:
            arms &= frame[column].isin(values)
    if filters.ortho is not None:
        arms &= frame["ortho"] == filters.ortho
    frame = frame[keep & (arms | reference)].reset_index(drop=True)
    named = frame[NAMED_ARM].fillna("").astype(str) if NAMED_ARM in frame else pd.Series("", index=frame.index)
    frame[ARM] = frame[ARM_COLUMN].map({arm.ortho: arm.name for arm in ARMS}).where(~is_reference(frame),
                                                                                       REFERENCE.name)
    frame[ARM] = frame[ARM].where(named == "", named)  # a named arm is shown by its name
    frame[NAMED_ARM_KEY] = named
    frame[SPLIT_RULE] = _per_combination(frame, list(SPLIT_FIELDS), _split_rule)
    return add_variant_keys(frame)


#: The column :func:`load_trials` adds for a row's split rule (``split_train=0.6;...`` for the
#: random setting, empty otherwise): the reference of a pair is the one of its split rule.
SPLIT_RULE = "split_rule"


def is_reference(frame: pd.DataFrame) -> pd.Series:
    """The rows of the structure-agnostic reference (``core.REFERENCE``): its backbones'."""
    return frame["backbone"].isin(REFERENCE_BACKBONES)


#: The column :func:`load_trials` keeps a row's named arm in ("" for the default pair's rows,
#: old rows among them), since the ``arm`` column then shows every arm's name.
NAMED_ARM_KEY = "named_arm"


def split_named(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``trials`` as the default pair's rows and the named arms' rows."""
    named = trials[NAMED_ARM_KEY] != "" if NAMED_ARM_KEY in trials else pd.Series(False, index=trials.index)
    return trials[~named].reset_index(drop=True), trials[named].reset_index(drop=True)


def split_reference(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``trials`` as the arms' rows and the reference's rows."""
    reference = is_reference(trials)
    return trials[~reference].reset_index(drop=True), trials[reference].reset_index(drop=True)


def reused_from(records: dict, searches: Sequence[str]) -> list[str]:
    """The searches whose reference rows ``searches`` reuse, as their records say (a record's
    ``references``: reference cell key -> the search that trained it)."""
    found = []
    for name in searches:
        reused = (records.get(name) or {}).get("references") or {}
        found += [source for source in reused.values() if isinstance(source, str)]
    return sorted(set(found))


def _split_rule(values: dict) -> str:
    return _encode({k: _scalar(v) for k, v in values.items() if _scalar(v) is not None})


def add_variant_keys(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``switches``, ``shared`` and ``variant_name`` (see :func:`load_trials`)."""
    frame = frame.copy()
    if NAMED_ARM_KEY not in frame:
        frame[NAMED_ARM_KEY] = ""
    codes, combos = _combinations(frame, [*SWITCHES, "ortho", NAMED_ARM_KEY])
    combos = [_switch_values(row) for row in combos]
    for name, values in (("switches", [_encode(c) for c in combos]),
                         ("shared", [_encode({k: v for k, v in c.items() if k in SHARED}) for c in combos]),
                         ("variant_name", _variant_names(combos))):
        frame[name] = _spread(values, codes)
    return frame


def _combinations(frame: pd.DataFrame, columns: list[str]) -> tuple[np.ndarray, list[dict]]:
    """Each row's distinct combination of ``columns`` (a code) and each combination's values
    (from its first row): what is worked out per combination (a handful) instead of per
    trial (10^5)."""
    if not len(frame):
        return np.array([], int), []
    codes = frame.groupby(columns, dropna=False, sort=False).ngroup().to_numpy()
    firsts = pd.Series(range(len(codes))).groupby(codes, sort=True).first().to_numpy()
    return codes, frame[columns].iloc[firsts].to_dict("records")


def _spread(values: list, codes: np.ndarray) -> np.ndarray | pd.Series:
    """Per-combination ``values`` as a column, one per row by its code."""
    return np.array(values, dtype=object)[codes] if len(codes) else pd.Series([], dtype=object)


def _per_combination(frame: pd.DataFrame, columns: list[str], value) -> np.ndarray | pd.Series:
    """``value(row)`` of each row's values of ``columns``, called once per distinct combination."""
    codes, combos = _combinations(frame, columns)
    return _spread([value(row) for row in combos], codes)


def _switch_values(row: dict) -> dict:
    # the original arm never reads the Ortho-only switches: they must not split its cells
    keep = SWITCHES if row["ortho"] else SHARED
    named = {NAMED_ARM: row[NAMED_ARM_KEY]} if row.get(NAMED_ARM_KEY) else {}  # named arms never share a cell
    return {**{k: _scalar(row[k]) for k in keep if _scalar(row[k]) is not None}, **named}


def _scalar(value: object) -> object:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _encode(values: dict) -> str:
    return ";".join(f"{k}={v}" for k, v in values.items())


def _variant_names(combos: list[dict]) -> list[str]:
    """The ``variant`` label, plus ``k=v`` for each switch on which cells with that label differ."""
    seen: dict[str, dict[str, set]] = {}
    for combo in combos:
        for key, value in combo.items():
            seen.setdefault(str(combo.get("variant")), {}).setdefault(key, set()).add(repr(value))
    names = []
    for combo in combos:
        label = str(combo.get("variant"))
        differ = [f"{k}={v}" for k, v in combo.items() if k not in ("variant", NAMED_ARM) and len(seen[label][k]) > 1]
        names.append(f"{label} ({', '.join(differ)})" if differ else label)
    return names


def known_searches(store: Store) -> list[str]:
    """Searches with a record or with rows (a store written trial by trial has no record)."""
    return sorted(set(store.search_names()) | set(store.table_searches()))


def _check_searches(store: Store, wanted: Sequence[str]) -> None:
    known = known_searches(store) if wanted else []
    for name in wanted:
        if name not in known:
            raise OrthotuneError(
                f"no search {name!r} in store {store.uri!r}; searches: {', '.join(known) or 'none'}"
            )


def keep_integers(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Counts stay integers when some are missing (pandas would make them floats: ``5.0``)."""
    for column in columns:
        frame[column] = pd.array([None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
                                  for v in frame[column]], dtype="Int64")
    return frame
