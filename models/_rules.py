"""The config fields' rules, as the models check their arguments: one statement of each
choice list and range (``orthotune.core``'s field declarations), the same messages."""

from __future__ import annotations

from orthotune.core import TrainConfig, declared

#: Each declared config field's rule (``orthotune.core.Rule``), by field name.
RULES = {f.name: f.metadata["rule"] for f in declared(TrainConfig)}
#: The values of ``layout`` (declared with the config field).
LAYOUTS: tuple[str, ...] = RULES["layout"].choices


def check_rules(**values: object) -> None:
    """Apply the config fields' rules (``name=value``) to a model's arguments."""
    for name, value in values.items():
        RULES[name].check(name, value)
