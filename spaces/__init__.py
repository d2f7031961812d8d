"""Search spaces as data: the ``quick`` and ``paper`` presets, or a user's YAML file, parsed
into a :class:`SearchSpace` of cells (what the search layer above runs), and a stored space's
flags read without parsing it (:func:`is_smoke_test`)."""

from __future__ import annotations

from pathlib import Path

from orthotune.core import Registry
from orthotune.spaces._arms import ArmSpec, Comparisons
from orthotune.spaces._default_config import default_config
from orthotune.spaces._parse import comparisons_of, is_smoke_test, load_space_file, parse_space
from orthotune.spaces._space import SearchSpace

PRESET_DIR = Path(__file__).parent / "presets"
PRESETS: Registry[Path] = Registry("space preset")
for _file in sorted(PRESET_DIR.glob("*.yaml")):
    PRESETS.add(_file.stem, _file)


def resolve_space(name_or_path: str) -> SearchSpace:
    """A preset by name (``quick``, ``paper``) or a YAML file by path."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        return load_space_file(name_or_path)
    return load_space_file(PRESETS.get(name_or_path))


__all__ = ["ArmSpec", "Comparisons", "PRESETS", "SearchSpace", "comparisons_of", "default_config", "is_smoke_test",
           "parse_space", "resolve_space"]
