"""A config's identity, one rule for every form a config comes in (a grid point, a searcher's
suggestion, a stored row): equal configs, equal identity. The per-cell searchers answer a
repeated proposal from it, and a resumed search knows which configs its store already holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from orthotune.core import TrainConfig
from orthotune.store import config_columns, config_from_columns


def config_identity(values: Mapping[str, Any]) -> str:
    """The canonical JSON of a config as the store keeps it: every declared field, the arm's
    own fields only (a field the arm never reads cannot make two configs differ)."""
    canonical = config_from_columns(config_columns(TrainConfig.from_dict(dict(values))))
    return json.dumps(canonical, sort_keys=True, default=str)
