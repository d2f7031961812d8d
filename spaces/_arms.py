"""Arms as data: a space's named arms and the comparisons it tests.

A space may declare named arms instead of the default pair (the original backbone and its
Ortho-GConv form, which ``original`` and ``ortho`` switch)::

    arms:
      GCN: {backbone: gcn, depth: 2}
      JKNet+DropEdge:
        backbone: jknet
        depth: {cora: 64, texas: 16}     # one depth, or one per dataset of the space
        treatments: {drop_edge: [0.1, 0.3, 0.5]}   # what the arm adds to its backbone
        lr: [0.005, 0.01]                 # its own search dimensions (any train or ortho key)
      Ortho-GCNII: {backbone: gcnii, depth: 16, treatments: {ortho: true}}
    compare: {against: Ortho-GCNII}   # or: treatments (the default), all-pairs

An arm is a backbone at one depth per dataset plus zero or more *treatments*: values of
config fields (fixed or searched) that make it more than its bare backbone (``ortho: true``
is Ortho-GConv; any other config field works alike, DropEdge's rate or a user's change).
Each arm is searched as its own cell per dataset, with the space's ``samples`` (every arm
the same budget) and the space's ``train`` values its backbone reads, overridden by its
own. The comparisons (:class:`Comparisons`) are pairs ``(arm, baseline)``, each tested per
dataset (difference: arm minus baseline); Holm runs over all of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from orthotune.core import ConfigError, Group, OrthoSettings, OrthotuneError, by_group, check_arm_name, reads
from orthotune.spaces._dimension import Dimension

#: Keys of the ``ortho`` arm and of ``train``, derived from the config's declarations: the
#: Ortho-GConv fields go under ``ortho``, every other training field or switch under ``train``.
ORTHO_KEYS = {f.name for f in by_group(OrthoSettings, Group.ORTHO, Group.VARIANT)}

#: Keys of one arm besides the search dimensions it sets.
ARM_SPEC_KEYS = {"backbone", "depth", "treatments"}
#: The forms of ``compare`` (see :class:`Comparisons`).
COMPARE_FORMS = ("against", "treatments", "all-pairs")


@dataclass(frozen=True)
class ArmSpec:
    """One named arm: its backbone, its depth per dataset (``"*"``: every dataset), its
    treatments and its own search dimensions."""

    name: str
    backbone: str
    depths: Mapping[str, int]
    treatments: Mapping[str, Dimension] = field(default_factory=dict)
    values: Mapping[str, Dimension] = field(default_factory=dict)

    @property
    def ortho(self) -> bool:
        """Whether Ortho-GConv is one of its treatments (``ortho: true``)."""
        ortho = self.treatments.get("ortho")
        return ortho is not None and ortho.values == (True,)

    def depth(self, dataset: str) -> int:
        depth = self.depths.get(dataset, self.depths.get("*"))
        if depth is None:
            raise ConfigError(f"space: arm {self.name!r} has no depth for dataset {dataset}; give depth: N or "
                              f"a depth per dataset ({', '.join(sorted(self.depths))} given)")
        return depth

    def to_dict(self) -> dict[str, Any]:
        depth: Any = self.depths["*"] if set(self.depths) == {"*"} else dict(self.depths)
        out: dict[str, Any] = {"backbone": self.backbone, "depth": depth}
        if self.treatments:
            out["treatments"] = {n: d.to_yaml() for n, d in self.treatments.items()}
        out.update({n: d.to_yaml() for n, d in self.values.items()})
        return out


@dataclass(frozen=True)
class Comparisons:
    """What a space with arms tests: every arm against one named arm (``against``), every
    treated arm against its bare backbone (``treatments``: the arm of the same backbone
    without treatments), or every pair of arms (``all-pairs``)."""

    form: str = "treatments"
    against: str | None = None

    def pairs(self, arms: Sequence[ArmSpec]) -> list[tuple[str, str]]:
        """The comparisons as ``(arm, baseline)`` names, in the arms' order; a declaration
        these arms cannot answer is refused in one line."""
        names = [arm.name for arm in arms]
        if len(names) < 2:
            raise ConfigError(f"space: compare needs two arms or more; arms: {', '.join(names) or 'none'}")
        if self.form == "against":
            if self.against not in names:
                raise ConfigError(f"space: compare.against {self.against!r} is no arm; arms: {', '.join(names)}")
            return [(name, self.against) for name in names if name != self.against]
        if self.form == "all-pairs":
            return [(later, earlier) for earlier, later in itertools.combinations(names, 2)]
        return _treatment_pairs(arms)

    def to_yaml(self) -> Any:
        return {"against": self.against} if self.form == "against" else self.form


def _treatment_pairs(arms: Sequence[ArmSpec]) -> list[tuple[str, str]]:
    bare: dict[str, list[str]] = {}
    for arm in arms:
        if not arm.treatments:
            bare.setdefault(arm.backbone, []).append(arm.name)
    pairs = []
    for arm in arms:
        if not arm.treatments:
            continue
        found = bare.get(arm.backbone, [])
        if len(found) != 1:
            problem = "no arm" if not found else f"{len(found)} arms ({', '.join(found)})"
            raise ConfigError(f"space: compare treatments: arm {arm.name!r} needs one bare {arm.backbone} arm (no "
                              f"treatments) to compare against, found {problem}; or use compare: against/all-pairs")
        pairs.append((arm.name, found[0]))
    if not pairs:
        raise ConfigError("space: compare treatments: no arm has treatments; use compare: against/all-pairs")
    return pairs


def parse_compare(value: Any) -> Comparisons:
    """``compare``: ``treatments``, ``all-pairs`` or ``{against: ARM}``."""
    if value is None:
        return Comparisons()
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"against"}, key=str)
        if unknown or not isinstance(value.get("against"), str):
            raise ConfigError(f"space: compare {dict(value)!r} must be {{against: ARM}}, treatments or all-pairs")
        return Comparisons("against", value["against"])
    if value not in COMPARE_FORMS[1:]:
        raise ConfigError(f"space: compare {value!r} must be one of {{against: ARM}}, treatments, all-pairs")
    return Comparisons(str(value))


def parse_arms(values: Any, datasets: Sequence[str], known: set[str], backbone_of: Any,
               dimensions_of: Any) -> tuple[ArmSpec, ...]:
    """``arms``: a mapping of names to arms. ``known``: the keys an arm may search or treat;
    ``backbone_of`` and ``dimensions_of`` the parser's checks of a backbone and of values."""
    if not isinstance(values, Mapping) or not values:
        raise ConfigError(f"space: arms must be a non-empty mapping of names to arms, got {values!r}")
    arms = []
    for name, spec in values.items():
        try:
            check_arm_name(name)
        except OrthotuneError as error:
            raise ConfigError(f"space: arms: {error}") from None
        where = f"arms.{name}"
        if not isinstance(spec, Mapping):
            raise ConfigError(f"space: {where} must be a mapping (backbone, depth, treatments, values)")
        unknown = sorted(set(spec) - ARM_SPEC_KEYS - known, key=str)
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r}; valid: {', '.join(sorted(ARM_SPEC_KEYS | known))}")
        for key in ("backbone", "depth"):
            if key not in spec:
                raise ConfigError(f"space: {where}.{key} is required")
        treatments = spec.get("treatments") or {}
        if not isinstance(treatments, Mapping):
            raise ConfigError(f"space: {where}.treatments must be a mapping of config fields to values")
        bad = sorted(set(treatments) - known - {"ortho"}, key=str)
        if bad:
            raise ConfigError(f"{where}.treatments: unknown key {bad[0]!r}; valid: ortho, "
                              f"{', '.join(sorted(known))}")
        if "ortho" in treatments and treatments["ortho"] not in (True, False):
            raise ConfigError(f"space: {where}.treatments.ortho={treatments['ortho']!r} must be true or false")
        treated = {n: v for n, v in treatments.items() if not (n == "ortho" and v is False)}
        arms.append(ArmSpec(
            name=name, backbone=backbone_of(f"{where}.backbone", spec["backbone"])[0],
            depths=_depths(where, spec["depth"], datasets),
            treatments=dimensions_of(f"{where}.treatments", treated),
            values=dimensions_of(where, {k: v for k, v in spec.items() if k not in ARM_SPEC_KEYS})))
    return tuple(arms)


def _depths(where: str, value: Any, datasets: Sequence[str]) -> dict[str, int]:
    def depth(key: str, item: Any) -> int:
        if not isinstance(item, int) or isinstance(item, bool) or item < 1:
            raise ConfigError(f"space: {key}={item!r} must be an integer >= 1")
        return item

    if not isinstance(value, Mapping):
        return {"*": depth(f"{where}.depth", value)}
    depths = {str(k).lower(): depth(f"{where}.depth.{k}", v) for k, v in value.items()}
    missing = [d for d in datasets if d not in depths and "*" not in depths]
    if missing:
        raise ConfigError(f"space: {where}.depth has no depth for dataset {missing[0]} (give one per dataset, "
                          f"or '*' for the rest)")
    return depths


def arm_parts(space: Any) -> list[Any]:
    """A space with arms as plain spaces (``SearchSpace``), one per arm and depth: the arm's
    backbone at that depth on the datasets it has that depth for, its treatments and values
    over the space's (``ortho`` values where Ortho-GConv treats it; ``train`` values its backbone
    reads), and the config's ``arm`` fixed to its name."""
    parts = []
    for arm in space.arms:
        by_depth: dict[int, list[str]] = {}
        for dataset in space.datasets:
            by_depth.setdefault(arm.depth(dataset), []).append(dataset)
        own = {n: replace(d, name=n) for n, d in {**arm.treatments, **arm.values}.items() if n != "ortho"}
        ortho = {**(space.ortho or {}), **{n: d for n, d in own.items() if n in ORTHO_KEYS}} if arm.ortho else None
        train = {**{n: d for n, d in space.train.items() if reads(n, arm.backbone)},
                 **{n: d for n, d in own.items() if n not in ORTHO_KEYS}, "arm": Dimension("arm", "fixed", (arm.name,))}
        parts += [replace(space, arms=(), compare=None, variants=(), datasets=tuple(datasets),
                          backbones=(arm.backbone,), depths=(depth,), original=not arm.ortho, ortho=ortho, train=train)
                  for depth, datasets in by_depth.items()]
    return parts


def kept_arms(space: Any, names: Sequence[str], without: bool = False) -> tuple[ArmSpec, ...]:
    """The arms of ``space`` that ``names`` names (``without``: all but those), in the space's
    order. Refused in one line: a space without named arms, a name that is no arm, or a
    choice that leaves out an arm the space's comparisons need (``compare: against``'s arm, a
    treated arm's bare one)."""
    flag = "--skip-arms" if without else "--arms"
    if not space.arms:
        raise ConfigError(f"space {space.name}: {flag} needs a space with named arms (arms:); this one searches "
                          f"the default pair, the original backbone and its Ortho-GConv form")
    valid = [arm.name for arm in space.arms]
    unknown = [name for name in names if name not in valid]
    if unknown:
        raise ConfigError(f"space {space.name}: unknown arm {unknown[0]!r}; valid: {', '.join(valid)}")
    kept = tuple(arm for arm in space.arms if (arm.name in set(names)) != without)
    try:
        (space.compare or Comparisons()).pairs(kept)
    except ConfigError as error:
        raise ConfigError(f"{flag} {' '.join(names)}: {error}") from None
    return kept
