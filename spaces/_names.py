"""Names a space lists (datasets, arms), checked against their registries."""

from __future__ import annotations

from typing import Any

from orthotune.core import DATASETS, ConfigError, is_dynamic


def registry_names(key: str, values: Any, *registries: Any) -> tuple[str, ...]:
    """``values`` (a name or a non-empty list), each in one of ``registries``, in their spelling."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list) or not values:
        raise ConfigError(f"space: {key} must be a non-empty list, got {values!r}")
    names = []
    for value in values:
        if not any(value in registry for registry in registries):
            valid = sorted({n for registry in registries for n in registry})
            raise ConfigError(f"space: unknown {key[:-1]} {value!r} in {key}; valid: {', '.join(valid)}")
        # a pyg:/file: name keeps its spelling (class names and paths are case-sensitive)
        names.append(DATASETS.get(value).name if is_dynamic(value) else str(value).lower())
    return tuple(dict.fromkeys(names))
