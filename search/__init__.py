"""The Ray Tune glue: the trainable, per-cell searchers and schedulers, the store recorder,
the progress display, the live views (TensorBoard, Optuna storage) and launch.

What a search runs over is the spaces layer's (below); the cell key, the options and the
objective load at once and are light. ``launch``, ``resume`` and ``check_inputs`` live in
``_launch`` (``start_or_resume`` in ``_start_or_resume``), which imports Ray, torch and PyG,
so it loads on first use (PEP 562): ``orthotune launch --help`` stays instant.
"""

from importlib import import_module
from typing import Any

from orthotune.search._cell_key import cell_key
from orthotune.search._objective import rung_score
from orthotune.search._options import MODES, SECTIONS, LaunchOptions, SearchOutcome

__all__ = [
    "DRIVER_PARTS",
    "MODES",
    "SECTIONS",
    "TIMINGS_ENV",
    "TRIAL_END",
    "LaunchOptions",
    "SearchOutcome",
    "cell_key",
    "check_inputs",
    "launch",
    "resume",
    "rung_score",
    "start_or_resume",
]

#: The names of ``__all__`` loaded on first access from a module other than ``_launch``.
LAZY_ELSEWHERE = {"start_or_resume": "_start_or_resume"}


def __getattr__(name: str) -> Any:
    """The names of ``__all__`` not imported above: ``_launch``'s, loaded on first access."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{LAZY_ELSEWHERE.get(name, '_launch')}"), name)
    globals()[name] = value  # later lookups skip this function
    return value
