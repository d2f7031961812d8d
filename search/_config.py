"""The one training-config type: validated at the edge (CLI, YAML, Ray), typed inside."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from models import BACKBONES, GRAPH_BACKBONES, OrthoSettings
from orthotune.errors import ConfigError, check
from search._data import DATASETS, check_setting

#: Training defaults per setting (GCNII's full-/semi-supervised protocol; OGB's arxiv GCN;
#: Graph U-Nets' protocol for the TU datasets).
SETTING_DEFAULTS: dict[str, dict[str, Any]] = {
    "full": dict(depth=2, hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=1000, patience=100),
    "semi": dict(depth=2, hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=1000, patience=100),
    "official": dict(depth=2, hidden=256, lr=0.01, weight_decay=0.0, dropout=0.5, epochs=500, patience=100),
    # Graph U-Nets: three pooling levels, 200 epochs (patience = epochs: no early stop).
    "cv10": dict(depth=3, hidden=64, lr=1e-3, weight_decay=0.0, dropout=0.3, epochs=200, patience=200),
}

#: Per-dataset defaults that take precedence over the setting's (Graph U-Nets' GCN width
#: ``l_dim`` and batch size; its classifier's 512 is ``models.CLASSIFIER_CHANNELS``).
DATASET_DEFAULTS: dict[str, dict[str, Any]] = {
    "proteins": dict(hidden=64, batch_size=64),
    "dd": dict(hidden=128, batch_size=32),
}

#: The backbone a dataset's task uses when none is given, and where its names live.
TASK_BACKBONES = {"node": ("gcn", BACKBONES), "graph": ("gunet", GRAPH_BACKBONES)}


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run of one config needs.

    ``splits`` and ``seeds`` name the repeats: run ``i`` uses ``splits[i]`` and
    ``seeds[i]``; a tuple of length one is broadcast over the other. With ``full`` the
    repeats are Geom-GCN splits, with ``semi``/``official`` seeds of the single split,
    with ``cv10`` the folds.
    """

    dataset: str
    setting: str | None = None
    backbone: str | None = None  # default: gcn for node datasets, gunet for graph datasets
    depth: int | None = None  # graph convolutions (node backbones) or pooling levels (gunet)
    ortho: bool = True
    T: int = 4
    beta: float = 0.4
    lam: float = 5e-4
    centre_rows: bool = False
    norm_groups: int = 1
    squared_norm: bool = False
    hidden: int | None = None
    lr: float | None = None
    weight_decay: float | None = None
    dropout: float | None = None
    epochs: int | None = None
    patience: int | None = None
    splits: tuple[int, ...] = (0,)
    seeds: tuple[int, ...] = (0,)
    alpha: float = 0.1
    theta: float = 0.5
    jk: str = "cat"
    batch_size: int | None = None

    def __post_init__(self) -> None:
        info = DATASETS.get(self.dataset)
        set_ = object.__setattr__
        set_(self, "dataset", info.name)
        set_(self, "setting", self.setting or info.default_setting)
        check_setting(info, self.setting)
        default_backbone, backbones = TASK_BACKBONES[info.task]
        set_(self, "backbone", (self.backbone or default_backbone).lower())
        other = [r for task, (_, r) in TASK_BACKBONES.items() if task != info.task]
        check(
            self.backbone in backbones or not any(self.backbone in r for r in other),
            f"backbone {self.backbone!r} does not apply to {info.task}-classification dataset "
            f"{info.name}; valid: {', '.join(backbones.names())}",
        )
        backbones.get(self.backbone)  # an unknown name fails listing the valid ones
        defaults = {**SETTING_DEFAULTS[self.setting], **DATASET_DEFAULTS.get(info.name, {})}
        for key, value in defaults.items():
            if getattr(self, key) is None:
                set_(self, key, value)
        set_(self, "splits", tuple(int(s) for s in self.splits))
        set_(self, "seeds", tuple(int(s) for s in self.seeds))
        self._validate()

    def _validate(self) -> None:
        check(_is_int(self.depth) and self.depth >= 2, f"depth={self.depth!r} must be an integer >= 2")
        check(_is_int(self.hidden) and self.hidden >= 1, f"hidden={self.hidden!r} must be an integer >= 1")
        check(_positive(self.lr), f"lr={self.lr!r} must be a finite number > 0")
        check(_finite(self.weight_decay) and self.weight_decay >= 0, f"weight_decay={self.weight_decay!r} must be >= 0")
        check(_finite(self.dropout) and 0 <= self.dropout < 1, f"dropout={self.dropout!r} must lie in [0, 1)")
        check(_is_int(self.epochs) and self.epochs >= 1, f"epochs={self.epochs!r} must be an integer >= 1")
        check(_is_int(self.patience) and self.patience >= 1, f"patience={self.patience!r} must be an integer >= 1")
        check(len(self.splits) >= 1 and len(self.seeds) >= 1, "splits and seeds must not be empty")
        check(
            len(self.splits) == len(self.seeds) or 1 in (len(self.splits), len(self.seeds)),
            f"splits={self.splits} and seeds={self.seeds} must have equal lengths, or one of length 1",
        )
        check(all(s >= 0 for s in self.splits), f"splits={self.splits} must be >= 0")
        check(self.jk in ("cat", "max"), f"jk={self.jk!r} must be one of 'cat', 'max'")
        check(self.batch_size is None or (_is_int(self.batch_size) and self.batch_size >= 1),
              f"batch_size={self.batch_size!r} must be an integer >= 1")
        self.ortho_settings(force=True)  # validates T, beta, lam and the switches

    def ortho_settings(self, force: bool = False) -> OrthoSettings | None:
        if not (self.ortho or force):
            return None
        return OrthoSettings(
            T=self.T, beta=self.beta, lam=self.lam, centre_rows=self.centre_rows,
            norm_groups=self.norm_groups, squared_norm=self.squared_norm,
        )

    def runs(self) -> list[tuple[int, int]]:
        """The repeats as ``(split, seed)`` pairs."""
        count = max(len(self.splits), len(self.seeds))
        splits = self.splits * count if len(self.splits) == 1 else self.splits
        seeds = self.seeds * count if len(self.seeds) == 1 else self.seeds
        return list(zip(splits, seeds))

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["splits"], out["seeds"] = list(self.splits), list(self.seeds)
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainConfig:
        """Build from a mapping (YAML, JSON, Ray); unknown keys are rejected."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown config key {unknown[0]!r}; valid: {', '.join(sorted(known))}")
        if "dataset" not in values:
            raise ConfigError("config key 'dataset' is required")
        kwargs = dict(values)
        for key in ("splits", "seeds"):
            if key in kwargs:
                kwargs[key] = _as_tuple(key, kwargs[key])
        return cls(**kwargs)


def _as_tuple(key: str, value: Any) -> tuple[int, ...]:
    items = value if isinstance(value, (list, tuple)) else [value]
    check(all(_is_int(v) for v in items), f"{key}={value!r} must be integers")
    return tuple(items)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value: Any) -> bool:
    return _finite(value) and value > 0
