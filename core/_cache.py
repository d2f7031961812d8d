"""orthotune's writable cache folder, one rule for every layer that keeps something there (the
processed datasets, the cost planner's measurements): read from the environment, without
importing anything heavy."""

from __future__ import annotations

import os
from pathlib import Path

#: The environment variable that names the cache folder.
CACHE_ENV = "ORTHOTUNE_CACHE"


def cache_dir() -> Path:
    """orthotune's writable cache: ``ORTHOTUNE_CACHE``, else ``$XDG_CACHE_HOME/orthotune`` or
    ``~/.cache/orthotune``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orthotune"
