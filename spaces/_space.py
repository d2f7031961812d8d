"""A search space, typed: :class:`SearchSpace` (what ``_parse`` makes of a space file), its
cells, variants and structure-agnostic reference cells, and how a searcher samples it
(define-by-run, the grid, the first point)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from orthotune.core import (
    ARMS,
    DATASETS,
    SETTINGS,
    Cell,
    ConfigError,
    Group,
    OrthotuneError,
    TrainConfig,
    by_group,
    defaults_for,
    profile_values,
    reads,
    standard_form,
    treatment_function,
)
from orthotune.spaces._arms import ORTHO_KEYS, ArmSpec, Comparisons, arm_parts, kept_arms
from orthotune.spaces._dimension import Dimension, grid_count, grid_product, pick
from orthotune.spaces._names import registry_names

#: The arms a variant may name (``arms: [original, ortho]``): the cell's arm keys.
ARM_KEYS = tuple(arm.key for arm in ARMS)


@dataclass(frozen=True)
class Variant:
    """One named variant: its label, the arms it runs, the values it sets (fixed or searched)
    and, optionally, the datasets, backbones and depths it covers instead of the space's."""

    name: str
    values: Mapping[str, Dimension] = field(default_factory=dict)
    arms: tuple[str, ...] | None = None
    profile: str | None = None
    datasets: tuple[str, ...] | None = None
    backbones: tuple[str, ...] | None = None
    depths: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        for key in ("profile", "arms", "datasets", "backbones", "depths"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value if isinstance(value, str) else list(value)
        out.update({name: d.to_yaml() for name, d in self.values.items()})
        return out


@dataclass(frozen=True)
class SearchSpace:
    """A validated space file, split into cells: each cell (one of :meth:`cells`) gets its
    own searcher over :meth:`define_by_run` (or :meth:`grid`), ``samples`` trainings and its
    own ASHA (``grace_period``, ``reduction_factor``, ``max_t`` = :meth:`max_epochs`)."""

    name: str
    datasets: tuple[str, ...]
    backbones: tuple[str, ...]
    depths: tuple[int, ...]
    setting: str | None = None
    repeats: tuple[int, ...] | None = None
    split: Mapping[str, Any] = field(default_factory=dict)  # the random setting's rule (SPLIT_KEYS)
    original: bool = True
    ortho: Mapping[str, Dimension] | None = None
    train: Mapping[str, Dimension] = field(default_factory=dict)
    grace_period: int = 10
    reduction_factor: int = 3
    samples: int = 16
    variants: tuple[Variant, ...] = ()
    smoke_test: bool = False
    reference: bool = False
    execution: Mapping[str, bool] = field(default_factory=dict)  # the GPU switches the file sets
    # named arms (``spaces._arms``): each searched as its own cells; ``compare`` what they test
    arms: tuple[ArmSpec, ...] = ()
    compare: Comparisons | None = None
    # reference cells (their keys) whose rows another search of the store trained with the same
    # budget, each with that search's name: :meth:`cells` leaves them out. Set by the search
    # layer for one session, never part of the space file (:meth:`to_dict`).
    reused: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for cell in self.reference_cells():
            for values in cell._corner_configs(cell.datasets[0], cell.backbones[0], cell.depths[0]):
                _validate(values)
        if self.arms:
            self.parts(), self.comparisons()  # building the parts validates them
            return
        if self.variants:
            self._check_variants()
            return
        if not self.original and self.ortho is None:
            raise ConfigError("space: 'original' is false and there is no 'ortho' arm; nothing to search")
        for dataset, backbone, depth in itertools.product(self.datasets, self.backbones, self.depths):
            for values in self._corner_configs(dataset, backbone, depth):
                _validate(values)

    # -- the structure-agnostic reference ------------------------------------------------

    def reference_cells(self) -> list[SearchSpace]:
        """With ``reference: true``, one cell per dataset (a space fixes one setting and split
        rule per dataset): the dataset's structure-agnostic reference (``core.REFERENCE``), given
        the arms' budget: ``samples`` trainings, the space's repeats and split rule, and the
        space's ``train`` values the reference reads (fixed or searched, as the arms get them;
        a variant's own values are its arms', not the reference's). Named
        ``NAME/dataset/BACKBONE/DEPTH/reference``, its cell key (``core.Cell.key``)."""
        if not self.reference:
            return []
        cells = []
        for dataset in self.datasets:
            cell = Cell.reference(dataset)
            train = {n: d for n, d in self.train.items() if n != "variant" and reads(n, cell.backbone)}
            cells.append(replace(self, name=f"{self.name}/{cell.key}", datasets=(dataset,),
                                 backbones=(cell.backbone,), depths=(cell.depth,), original=True, ortho=None,
                                 train=train, variants=(), reference=False, reused={}, arms=(), compare=None))
        return cells

    # -- variants --------------------------------------------------------------------------

    def parts(self) -> list[SearchSpace]:
        """The space as plain spaces, one per variant, or per arm and depth (``_arms.arm_parts``);
        itself when it has neither."""
        if self.arms:
            return arm_parts(self)
        return [self._part(v) for v in self.variants] if self.variants else [self]

    def comparisons(self) -> list[tuple[str, str]]:
        """What the space tests, as ``(arm, baseline)`` arm keys: its ``compare`` over its
        arms, or (no arms) the default pair, Ortho-GConv against the original backbone."""
        if self.arms:
            return (self.compare or Comparisons()).pairs(self.arms)
        return [(ARM_KEYS[1], ARM_KEYS[0])]

    def _part(self, variant: Variant) -> SearchSpace:
        """The plain space of one variant: its label and values fixed, its arms and cells."""
        values = {n: Dimension("name", "fixed", (v,)) for n, v in _profile(variant.profile).items()}
        values = {n: replace(d, name=n) for n, d in {**values, **variant.values}.items()}
        arms = variant.arms or tuple(a for a, on in zip(ARM_KEYS, (self.original, self.ortho is not None)) if on)
        ortho = {**(self.ortho or {}), **{n: d for n, d in values.items() if n in ORTHO_KEYS}}
        train = {**self.train, **{n: d for n, d in values.items() if n not in ORTHO_KEYS},
                 "variant": Dimension("variant", "fixed", (variant.name,))}
        return replace(self, variants=(), datasets=variant.datasets or self.datasets,
                       backbones=variant.backbones or self.backbones, depths=variant.depths or self.depths,
                       original="original" in arms, ortho=ortho if "ortho" in arms else None, train=train)

    def _check_variants(self) -> None:
        covered: dict[tuple, str] = {}
        for variant, part in zip(self.variants, self.parts()):  # building a part validates it
            arms = [a for a, on in zip(ARM_KEYS, (part.original, part.ortho is not None)) if on]
            for cell in itertools.product(part.datasets, part.backbones, part.depths, arms):
                key = (variant.name, *cell)
                if key in covered:
                    raise ConfigError(f"space: variant {variant.name!r} gives cell {'/'.join(map(str, cell))} "
                                      f"twice; entries that share a name must cover different cells")
                covered[key] = variant.name

    # -- sampling --------------------------------------------------------------------------

    def define_by_run(self, trial: Any) -> dict[str, Any]:
        """Optuna define-by-run: the conditional space (T/beta/lambda only in the ortho arm).

        Returns the fixed values; Optuna adds the sampled ones to the trial's config. A space
        with variants picks one (``variant``, a categorical) first; entries sharing a name must
        be searched per cell (:meth:`cells`).
        """
        if self.arms:
            parts = self.parts()
            if len(parts) != 1:
                raise ConfigError(f"space {self.name}: a space with arms is searched per cell (cells())")
            return parts[0].define_by_run(trial)
        if self.variants:
            return self._variant_define_by_run(trial)
        fixed: dict[str, Any] = {}
        for name, values in (("dataset", self.datasets), ("backbone", self.backbones), ("depth", self.depths)):
            fixed.update(pick(trial, Dimension(name, "choice", values)))
        arms = [a for a, on in ((True, self.ortho is not None), (False, self.original)) if on]
        fixed.update(pick(trial, Dimension("ortho", "choice", tuple(arms))))
        ortho = fixed.get("ortho", trial.params.get("ortho"))
        for dimension in [*(self.ortho or {}).values()] if ortho else []:
            fixed.update(pick(trial, dimension))
        for dimension in self.train.values():
            fixed.update(pick(trial, dimension))
        dataset = fixed.get("dataset", trial.params.get("dataset"))
        return {**fixed, **self.protocol(dataset)}

    def _variant_define_by_run(self, trial: Any) -> dict[str, Any]:
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ConfigError(f"space {self.name}: variants share names; search it per cell (cells())")
        if len(names) == 1:
            return self.parts()[0].define_by_run(trial)
        # the label is both Optuna's parameter and the config's ``variant`` value
        name = trial.suggest_categorical("variant", names)
        fixed = self.parts()[names.index(name)].define_by_run(trial)
        fixed.pop("variant", None)
        return fixed

    def grid(self) -> list[dict[str, Any]]:
        """Every config of the space (ranges need a step): the grid searcher's points."""
        references = [point for cell in self.reference_cells() if cell.key not in self.reused for point in cell.grid()]
        if self.variants or self.arms:
            return [point for part in self.parts() for point in replace(part, reference=False).grid()] + references
        train = grid_product(self.train.values())
        arms = ([grid_product(self.ortho.values(), ortho=True)] if self.ortho is not None else [])
        arms += [[{"ortho": False}]] if self.original else []
        points = []
        for dataset, backbone, depth in itertools.product(self.datasets, self.backbones, self.depths):
            base = {"dataset": dataset, "backbone": backbone, "depth": depth, **self.protocol(dataset)}
            for arm in arms:
                points += [{**base, **a, **t} for a, t in itertools.product(arm, train)]
        return points + references

    def grid_size(self) -> int:
        """``len(self.grid())``, counted without building the points (a plan counts every
        cell's; ``paper-full``'s 114 grids took 3.3 s to build); raises as :meth:`grid` does."""
        references = sum(cell.grid_size() for cell in self.reference_cells() if cell.key not in self.reused)
        if self.variants or self.arms:
            return sum(replace(part, reference=False).grid_size() for part in self.parts()) + references
        arms = (grid_count(self.ortho.values()) if self.ortho is not None else 0) + (1 if self.original else 0)
        cells = len(self.datasets) * len(self.backbones) * len(self.depths)
        return cells * arms * grid_count(self.train.values()) + references

    def protocol(self, dataset: str) -> dict[str, Any]:
        """The setting and repeats a config of ``dataset`` trains with."""
        setting = SETTINGS.get(self.setting or DATASETS.get(dataset).default_setting)
        repeats = list(self.repeats if self.repeats is not None else setting.default_repeats)
        rule = {f"split_{key}": value for key, value in self.split.items()} if setting.split == "random" else {}
        return {"setting": setting.name, setting.repeats_field: repeats, **rule}

    def max_epochs(self) -> int:
        """The longest a trial can train (ASHA's ``max_t``)."""
        if self.variants or self.arms:
            return max(part.max_epochs() for part in self.parts())
        epochs = self.train.get("epochs")
        if epochs is not None:
            return int(max(epochs.corners()))
        return max(int(defaults_for(d, self.protocol(d)["setting"], b)["epochs"])
                   for d, b in itertools.product(self.datasets, self.backbones))

    def default_point(self) -> dict[str, Any]:
        """The point this one-cell space's searcher tries first, in its searched values where
        the space can take them: for the original arm its backbone's standard form at the
        published settings (``orthotune.core.STANDARD_FORMS``; where the setting has one),
        else orthotune's defaults. So a search never ends below the defaults, an original
        arm never below the baseline the literature reports, and both arms start from their
        own (equal budgets: one trial)."""
        if len(self.datasets) != 1 or self.variants or self.arms:
            return {}
        dataset = self.datasets[0]
        setting = self.protocol(dataset)["setting"]
        defaults = {**{f.name: f.default for f in by_group(TrainConfig, Group.ORTHO, Group.TRAIN, Group.VARIANT)},
                    **defaults_for(dataset, setting, self.backbones[0] if len(self.backbones) == 1 else None)}
        if self.original and self.ortho is None and len(self.backbones) == 1:
            defaults.update(standard_form(setting, self.backbones[0], dataset))
        searched = [*(self.ortho or {}).values()] if not self.original else []
        searched += list(self.train.values())
        return {d.name: defaults[d.name] for d in searched
                if d.searched() and defaults.get(d.name) is not None and d.contains(defaults[d.name])}

    def cells(self) -> list[SearchSpace]:
        """One space per cell (dataset, backbone, depth, arm), each with this space's
        ``samples`` as its own budget: a search over several cells gives each cell its own
        searcher, budget and ASHA bracket, so both arms get equal budgets per cell. With
        variants, each variant's cells (named ``NAME/dataset/backbone/depth/VARIANT/arm``;
        their configs carry the ``variant`` label). With ``reference: true``, the reference cells
        follow (:meth:`reference_cells`), but those another search trained (``reused``)."""
        return self.arm_cells() + [c for c in self.reference_cells() if c.key not in self.reused]

    def arm_cells(self) -> list[SearchSpace]:
        """:meth:`cells` without the reference's: the arms' cells."""
        if self.arms:
            cells = [cell for part in self.parts() for cell in replace(part, reference=False).arm_cells()]
            return [replace(c, name=f"{self.name}/{c.key}") for c in cells]
        if self.variants:
            cells = [cell for part in self.parts() for cell in replace(part, reference=False).arm_cells()]
            return [replace(c, name=_variant_cell_name(c)) for c in cells]
        arms = [a for a, on in ((False, self.original), (True, self.ortho is not None)) if on]
        return [
            replace(self, name=f"{self.name}/{dataset}/{backbone}/{depth}/{'ortho' if arm else 'original'}",
                    datasets=(dataset,), backbones=(backbone,), depths=(depth,), original=not arm,
                    ortho=self.ortho if arm else None, reference=False, reused={})
            for dataset, backbone, depth in itertools.product(self.datasets, self.backbones, self.depths)
            for arm in arms
        ]

    @property
    def key(self) -> str:
        """The cell of a one-cell space (one of :meth:`cells`); its variant is the fixed
        ``variant`` value of its training values, if any: ``core.Cell.key``, the search's cell
        key of each of its configs."""
        variant, arm = self.train.get("variant"), self.train.get("arm")
        return Cell.of({"dataset": self.datasets[0], "backbone": self.backbones[0], "depth": self.depths[0],
                        "ortho": self.ortho is not None, "arm": arm.values[0] if arm is not None else None,
                        "variant": variant.values[0] if variant is not None else None}).key

    def largest_configs(self) -> list[TrainConfig]:
        """Per cell, the config that needs the most memory: the widest ``hidden``, most
        Newton steps ``T`` and largest ``batch_size`` the cell can sample (memory checks)."""
        configs = []
        for cell in self.cells():
            dataset = cell.datasets[0]
            values: dict[str, Any] = {"dataset": dataset, "backbone": cell.backbones[0], "depth": cell.depths[0],
                                      "ortho": cell.ortho is not None, **cell.protocol(dataset)}
            dimensions = {**cell.train, **(cell.ortho or {})}
            for name in ("hidden", "T", "batch_size"):
                if name in dimensions:
                    values[name] = max(dimensions[name].corners())
            configs.append(TrainConfig.from_dict(values))
        return configs

    def with_datasets(self, datasets: Sequence[str]) -> SearchSpace:
        """The space on ``datasets`` only; variants that cover none of them are dropped."""
        chosen = registry_names("datasets", list(datasets), DATASETS)
        if not self.variants:
            return replace(self, datasets=chosen)
        kept = []
        for variant in self.variants:
            mine = tuple(d for d in chosen if d in (variant.datasets or chosen))
            if mine:
                kept.append(replace(variant, datasets=mine if variant.datasets else None))
        if not kept:
            raise ConfigError(f"space {self.name}: no variant covers datasets {', '.join(chosen)}")
        return replace(self, datasets=chosen, variants=tuple(kept))

    def with_arms(self, names: Sequence[str], without: bool = False) -> SearchSpace:
        """The space with the named arms only (``without``: all but them) (``_arms.kept_arms``)."""
        return replace(self, arms=kept_arms(self, names, without))

    def to_dict(self) -> dict[str, Any]:
        """A YAML-able form that :func:`parse_space` reads back to an equal space (a search's
        record holds it: ``--resume`` parses it back, reports read its flags with
        :func:`is_smoke_test`)."""
        def dims(group: Mapping[str, Dimension]) -> dict[str, Any]:
            return {name: d.to_yaml() for name, d in group.items()}

        out: dict[str, Any] = {
            "name": self.name, "datasets": list(self.datasets), "backbones": list(self.backbones),
            "depths": list(self.depths), "original": self.original, "train": dims(self.train),
            "asha": {"grace_period": self.grace_period, "reduction_factor": self.reduction_factor},
            "samples": self.samples,
        }
        if self.arms:  # each arm names its backbone and depth
            out = {k: v for k, v in out.items() if k not in ("backbones", "depths", "original")}
            out["arms"] = {arm.name: arm.to_dict() for arm in self.arms}
            out["compare"] = (self.compare or Comparisons()).to_yaml()
        out.update({key: True for key in ("smoke_test", "reference") if getattr(self, key)})
        if self.setting is not None:
            out["setting"] = self.setting
        if self.repeats is not None:
            out["repeats"] = list(self.repeats)
        if self.split:
            out["split"] = dict(self.split)
        out.update({"execution": dict(self.execution)} if self.execution else {})
        if self.ortho is not None:
            out["ortho"] = dims(self.ortho)
        if self.variants:
            out["variants"] = [v.to_dict() for v in self.variants]
        return out

    def _corner_configs(self, dataset: str, backbone: str, depth: int) -> list[dict[str, Any]]:
        base = {"dataset": dataset, "backbone": backbone, "depth": depth, **self.protocol(dataset)}
        values = [{**base, "ortho": False}] if self.original else []
        groups = [*(self.ortho or {}).values(), *self.train.values()]
        for dimension in groups:
            for corner in dimension.corners():
                values.append({**base, "ortho": dimension.name in ORTHO_KEYS, dimension.name: corner})
        return values or [{**base, "ortho": True}]


def _profile(name: str | None) -> dict[str, Any]:
    """A profile's switches without its label (the variant's name is the label)."""
    if name is None:
        return {}
    try:
        values = profile_values(name)
    except ConfigError as error:
        raise ConfigError(f"space: {error}") from None
    return {k: v for k, v in values.items() if k != "variant"}


def _variant_cell_name(cell: SearchSpace) -> str:
    *head, arm = cell.name.split("/")
    return "/".join([*head, str(cell.train["variant"].values[0]), arm])


def _validate(values: dict[str, Any]) -> None:
    try:
        config = TrainConfig.from_dict(values)
        if config.treatment:  # a user named it: its module must import, before any work
            treatment_function(config.treatment)
    except OrthotuneError as error:
        raise ConfigError(f"space: {error}") from None
