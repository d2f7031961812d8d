"""What Ray Tune's checkpoints get from orthotune's searchers and schedulers: a JSON summary
for a reader, never code, and never read back (a search resumes from the store's rows)."""

from __future__ import annotations

import json
from typing import Any

from orthotune.core import OrthotuneError


def save_summary(summary: dict[str, Any], path: str) -> None:
    """Write a searcher's or scheduler's checkpoint: its JSON summary."""
    with open(path, "w") as sink:
        json.dump(summary, sink)


def stored_state_refused(path: str) -> None:
    """Tune restores searchers only under ``Tuner.restore``, which orthotune never calls."""
    raise OrthotuneError(f"orthotune resumes a search from its store rows (`orthotune launch --resume NAME`), "
                         f"not from Ray Tune's searcher state {path!r}")
