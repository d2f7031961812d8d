"""Search spaces as data: a YAML file (or a preset) validated once, typed afterwards.

A space file::

    name: quick                 # optional; defaults to the file's stem
    datasets: [cora]            # required
    setting: full               # optional; each dataset's default otherwise
    repeats: [0, 1, 2, 3, 4]    # optional; splits (full), seeds (semi/official), folds (cv10)
    split: {train: 0.6, val: 0.2}   # optional: the random setting's split rule (keys train, val,
                                # stratify, per_class: the config's split_* fields)
    backbones: [gcn, jknet]     # required
    depths: [2, 4, 8]           # required
    original: true              # the original backbone as its own arm (no T/beta/lambda)
    ortho:                      # the Ortho-GConv arm; leave out for the original alone
      T: {low: 1, high: 6}
      beta: {low: 0.1, high: 1.0, step: 0.1}
      lam: [1.0e-4, 5.0e-4]
    train:                      # optional: training values, fixed or searched
      lr: {low: 0.001, high: 0.1, log: true}
      epochs: 200
    asha: {grace_period: 10, reduction_factor: 3}   # optional
    samples: 16                 # optional: trials per cell and arm
    execution: {tf32: false}    # optional: the GPU switches (tf32, deterministic, cuda_graph;
                                # TrainOptions' defaults otherwise); a launch/plan flag given
                                # on the command line overrides the file
    smoke_test: false           # optional: true marks a demo/smoke test (reports warn that its
                                # verdicts are not evidence; the quick preset sets it)
    reference: true             # optional (default false): also search the structure-agnostic
                                # reference (an MLP on the node features; graph tasks: features
                                # summed per graph, then an MLP) once per dataset, with the arms'
                                # budget: `samples` trials over the `train` values it reads, the
                                # same repeats and split rule; every verdict names it
    variants:                   # optional: named variants, each searched as its own cells
      - name: full              # the ``variant`` label the store and the reports key on
      - name: no-hybrid
        arms: [ortho]           # optional: which arms it runs (default: the space's)
        beta: 1.0               # any ortho/train key: fixed or searched, replaces the space's
      - name: official
        profile: official       # optional: a profile's switches (orthotune.core.PROFILES)
        datasets: [cora]        # optional: datasets/backbones/depths replace the space's
        depths: [64]

Without ``variants`` the space is one variant (the config's default label). Entries may
share a name when they cover different (dataset, backbone, depth) cells (one block of the
authors' per-dataset settings, say); two entries never give the same cell and arm twice.

Every value is a scalar (fixed), a list (a choice) or a range ``{low, high, step, log}``.
Unknown keys, empty lists, inverted ranges and values a config would reject are refused
with one line naming the key and the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from orthotune.core import (
    DATASETS,
    SETTINGS,
    SPLIT_FIELDS,
    ConfigError,
    Group,
    OrthotuneError,
    TrainConfig,
    all_backbones,
    backbone_name,
    by_group,
    is_factory,
)
from orthotune.spaces._arms import ORTHO_KEYS, parse_arms, parse_compare
from orthotune.spaces._dimension import Dimension
from orthotune.spaces._names import registry_names
from orthotune.spaces._space import ARM_KEYS, SearchSpace, Variant, _profile
from orthotune.training import EXECUTION_SWITCHES

TOP_KEYS = {"name", "datasets", "setting", "repeats", "split", "backbones", "depths", "original", "ortho",
            "train", "asha", "samples", "variants", "smoke_test", "reference", "arms", "compare", "execution"}
#: The keys that name cells in a space without arms; with ``arms`` each arm names its own.
CELL_KEYS = ("backbones", "depths", "original", "variants")
#: Keys of ``split``: the config's split fields (``split_train``, ...) without their prefix.
SPLIT_KEYS = {name.removeprefix("split_") for name in SPLIT_FIELDS}
#: Keys of ``train``: every training field or switch but the Ortho-GConv ones (under ``ortho``).
TRAIN_KEYS = {f.name for f in by_group(TrainConfig, Group.TRAIN, Group.VARIANT)} - ORTHO_KEYS
ASHA_KEYS = {"grace_period", "reduction_factor"}
#: Keys of one ``variants`` entry besides the ortho/train values it fixes or searches.
VARIANT_KEYS = {"name", "profile", "arms", "datasets", "backbones", "depths"}


def parse_space(values: Any, default_name: str = "space") -> SearchSpace:
    """Validate a mapping (parsed YAML) into a :class:`SearchSpace`."""
    if not isinstance(values, dict):
        raise ConfigError(f"space: expected a mapping of keys, got {type(values).__name__}")
    _known("space", values, TOP_KEYS)
    if "arms" in values:
        return _with_arms(values, default_name)
    if "compare" in values:
        raise ConfigError("space: compare applies to a space with arms; declare arms, or leave compare out")
    for key in ("datasets", "backbones", "depths"):
        if key not in values:
            raise ConfigError(f"space: key {key!r} is required")
    asha = values.get("asha") or {}
    _known("asha", asha, ASHA_KEYS)
    ortho = values.get("ortho")
    if ortho is not None:
        _known("ortho", ortho, ORTHO_KEYS)
    train = values.get("train") or {}
    _known("train", train, TRAIN_KEYS)
    variants = values.get("variants") or []
    if not isinstance(variants, list):
        raise ConfigError(f"space: variants must be a list of mappings, got {type(variants).__name__}")
    space = SearchSpace(
        name=str(values.get("name", default_name)),
        datasets=registry_names("datasets", values["datasets"], DATASETS),
        backbones=_backbones("backbones", values["backbones"]),
        depths=tuple(_ints("depths", values["depths"], minimum=1)),
        setting=_setting(values.get("setting")),
        repeats=tuple(_ints("repeats", values["repeats"], minimum=0)) if "repeats" in values else None,
        split=_split_rule(values.get("split")),
        original=_bool("original", values.get("original", True)),
        ortho=None if ortho is None else _dimensions("ortho", ortho),
        train=_dimensions("train", train),
        grace_period=_ints("asha.grace_period", [asha.get("grace_period", 10)], minimum=1)[0],
        reduction_factor=_ints("asha.reduction_factor", [asha.get("reduction_factor", 3)], minimum=2)[0],
        samples=_ints("samples", [values.get("samples", 16)], minimum=1)[0],
        variants=tuple(_variant(i, v) for i, v in enumerate(variants)),
        smoke_test=_bool("smoke_test", values.get("smoke_test", False)),
        reference=_bool("reference", values.get("reference", False)),
        execution=_execution(values.get("execution")),
    )
    if space.split and not any(SETTINGS.get(space.protocol(d)["setting"]).split == "random" for d in space.datasets):
        raise ConfigError(f"space: split applies to datasets in the random setting; none of "
                          f"{', '.join(space.datasets)} is (set setting: random)")
    return space


def _with_arms(values: dict, default_name: str) -> SearchSpace:
    """A space with named arms (``spaces._arms``): each arm names its backbone and depth, so the
    space names neither (nor ``original`` or ``variants``)."""
    given = [key for key in CELL_KEYS if key in values]
    if given:
        raise ConfigError(f"space: {given[0]} does not go with arms (each arm names its backbone and depth); "
                          f"leave out {', '.join(given)}")
    if "datasets" not in values:
        raise ConfigError("space: key 'datasets' is required")
    datasets = registry_names("datasets", values["datasets"], DATASETS)
    arms = parse_arms(values["arms"], datasets, ORTHO_KEYS | TRAIN_KEYS - {"variant"}, _backbones, _dimensions)
    # the space's own values parsed as a plain space's (of the first arm), then its arms in place
    # of its cells: building them validates each arm's configs with the values it reads
    base = {k: v for k, v in values.items() if k not in ("arms", "compare", "ortho")}
    space = parse_space({**base, "backbones": [arms[0].backbone], "depths": [arms[0].depth(datasets[0])]},
                        default_name)
    ortho = values.get("ortho")
    if ortho is not None:
        _known("ortho", ortho, ORTHO_KEYS)
    return replace(space, ortho=None if ortho is None else _dimensions("ortho", ortho),
                   backbones=tuple(dict.fromkeys(a.backbone for a in arms)), original=False,
                   depths=tuple(sorted({d for arm in arms for d in arm.depths.values()})), arms=arms,
                   compare=parse_compare(values.get("compare")))


def is_smoke_test(values: Any) -> bool:
    """Whether a space as a search's record holds it (:meth:`SearchSpace.to_dict`) is marked a
    smoke test, read from its ``smoke_test`` flag without rebuilding the space. Anything else
    (not a mapping, a key this version does not know, a flag that is not true) is not marked."""
    return isinstance(values, Mapping) and not set(values) - TOP_KEYS and values.get("smoke_test") is True


def _split_rule(values: Any) -> dict[str, Any]:
    """The ``split`` mapping; its values are checked as the configs' ``split_*`` fields."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(f"space: split must be a mapping of {', '.join(sorted(SPLIT_KEYS))}, got {values!r}")
    _known("split", values, SPLIT_KEYS)
    return dict(values)


def _execution(values: Any) -> dict[str, bool]:
    """The ``execution`` section: the GPU switches it sets (``TrainOptions``' declarations),
    each true or false; a switch it leaves out stays at the command line's or the default."""
    if values is None:
        return {}
    _known("execution", values, set(EXECUTION_SWITCHES))
    return {name: _bool(f"execution.{name}", value) for name, value in values.items()}


def _setting(name: Any) -> str | None:
    if name is not None and name not in SETTINGS.names():
        raise ConfigError(f"space: unknown setting {name!r}; valid: {', '.join(SETTINGS.names())}")
    return name


def _variant(index: int, values: Any) -> Variant:
    """One ``variants`` entry: ``name`` required; arms, profile, cells and values optional."""
    where = f"variants[{index}]"
    _known(where, values, VARIANT_KEYS | ORTHO_KEYS | TRAIN_KEYS - {"variant"})
    name = values.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"space: {where}.name is required (a non-empty string)")
    arms = values.get("arms")
    if arms is not None:
        arms = registry_names(f"{where}.arms", arms, ARM_KEYS)
    profile = values.get("profile")
    if profile is not None:
        _profile(profile)
    specs = {k: v for k, v in values.items() if k not in VARIANT_KEYS}
    return Variant(
        name=name,
        values=_dimensions(where, specs),
        arms=arms,
        profile=profile,
        datasets=registry_names(f"{where}.datasets", values["datasets"], DATASETS) if "datasets" in values else None,
        backbones=_backbones(f"{where}.backbones", values["backbones"]) if "backbones" in values else None,
        depths=tuple(_ints(f"{where}.depths", values["depths"], minimum=1)) if "depths" in values else None,
    )


def load_space_file(path: str | Path) -> SearchSpace:
    """A space from a YAML file; a file that cannot be read, is not UTF-8 text, is not YAML or
    does not hold a mapping is refused in one line naming the file."""
    path = Path(path)
    if not path.is_file():
        state = "is not a file" if path.exists() else "does not exist"
        raise OrthotuneError(f"space file {str(path)!r} {state}")
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise OrthotuneError(f"space file {str(path)!r} cannot be read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"space file {path.name}: not UTF-8 text ({error.reason} at byte {error.start}); "
                          f"a space is a YAML mapping") from None
    except RecursionError:  # PyYAML parses nested collections recursively
        raise ConfigError(f"space file {path.name}: not valid YAML (nested too deeply)") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None)
        raise ConfigError(f"space file {path.name}: not valid YAML{where}" + (f" ({problem})" if problem else "")) \
            from None
    if not isinstance(values, dict):
        got = "nothing (the file is empty)" if values is None else f"a {type(values).__name__}"
        raise ConfigError(f"space file {path.name}: expected a mapping of keys (datasets, backbones, depths, ...), "
                          f"got {got}")
    return parse_space(values, default_name=path.stem)


def _dimensions(group: str, specs: dict[str, Any]) -> dict[str, Dimension]:
    try:
        return {name: Dimension.parse(name, spec) for name, spec in specs.items()}
    except ConfigError as error:
        raise ConfigError(f"space: {group}.{error}") from None


def _known(where: str, values: Any, known: set[str]) -> None:
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(values).__name__}")
    unknown = sorted(set(values) - known, key=str)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; valid: {', '.join(sorted(known))}")


def _backbones(key: str, values: Any) -> tuple[str, ...]:
    """Catalogue backbones or users' ``package.module:factory`` names (checked, not imported)."""
    values = [values] if isinstance(values, str) else values
    if not isinstance(values, list) or not values:
        raise ConfigError(f"space: {key} must be a non-empty list, got {values!r}")
    names = []
    for value in values:
        if not is_factory(value) and str(value).lower() not in all_backbones():
            raise ConfigError(f"space: unknown backbone {value!r} in {key}; valid: {', '.join(all_backbones())}, "
                              f"or package.module:factory")
        try:
            names.append(backbone_name(value))
        except ConfigError as error:
            raise ConfigError(f"space: {error} (in {key})") from None
    return tuple(dict.fromkeys(names))


def _ints(key: str, values: Any, minimum: int) -> list[int]:
    values = values if isinstance(values, list) else [values]
    if not values:
        raise ConfigError(f"space: {key} must be a non-empty list")
    for value in values:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ConfigError(f"space: {key} value {value!r} must be an integer >= {minimum}")
    return values


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"space: {key}={value!r} must be true or false")
    return value


def comparisons_of(space: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """The arms (in declaration order) and comparisons (``(arm, baseline)`` names) of a space
    as a search's record holds it (``SearchSpace.to_dict``); none for a space without arms or
    one this version cannot read."""
    if not isinstance(space, Mapping) or "arms" not in space:
        return [], []
    try:
        parsed = parse_space(dict(space))
    except OrthotuneError:
        return [], []
    return [arm.name for arm in parsed.arms], parsed.comparisons()
