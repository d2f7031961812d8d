"""Search names: what a store accepts as one, light to import (no pyarrow), so a launch
refuses a bad name before the store's machinery loads."""

from __future__ import annotations

import re

from orthotune.core import OrthotuneError

#: A search name: a folder and file name on every filesystem and object store orthotune writes.
SEARCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def check_search_name(name: str) -> str:
    """``name`` if it is a valid search name; else the one-line error stating the rule."""
    if not isinstance(name, str) or not SEARCH_NAME.match(name):
        raise OrthotuneError(
            f"search name {name!r} must start with a letter or digit and use only letters, "
            f"digits, '_', '.', '-' (at most 100 characters)"
        )
    return name
