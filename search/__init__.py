"""The Ray Tune glue: the trainable, per-cell searchers and schedulers, the store recorder,
the progress display, the live views (TensorBoard, Optuna storage) and launch.

What a search runs over is the spaces layer's (below); the cell key, the options and the
objective load at once and are light, so the options (and the space in them) are validated
before Ray, torch or PyG load. ``launch``, ``resume``, ``check_inputs`` and
``start_or_resume`` import those, so they load on first use (PEP 562, :data:`LAZY`):
``orthotune launch --help`` stays instant and a bad space file is refused at once.

Benchmarks time a search through one hook of their own, ``orthotune.search.instrumentation``
(not listed here).
"""

from orthotune.core import lazy_attributes
from orthotune.search._cell_key import cell_key
from orthotune.search._estimate import PlanEstimate, Resources, asha_expected_epochs
from orthotune.search._measuring import MEASURE_EPOCHS
from orthotune.search._objective import rung_score
from orthotune.search._options import MODES, SECTIONS, LaunchOptions, SearchOutcome

__all__ = [
    "MEASURE_EPOCHS",
    "MODES",
    "SECTIONS",
    "LaunchOptions",
    "PlanEstimate",
    "Resources",
    "SearchOutcome",
    "asha_expected_epochs",
    "cell_key",
    "check_inputs",
    "check_store",
    "gpu_share",
    "launch",
    "plan_search",
    "resume",
    "rung_score",
    "start_or_resume",
]

#: The names of ``__all__`` not imported above, by the module each is loaded from on first
#: access: they import Ray, torch and PyG (``gpu_share``, ``--gpus-per-trial auto``'s rule,
#: imports torch through the training layer).
LAZY = {"launch": "_launch", "check_store": "_launch", "resume": "_launch",
        "check_inputs": "_inputs", "start_or_resume": "_start_or_resume",
        "plan_search": "_costing", "gpu_share": "_gpu_share"}


__getattr__ = lazy_attributes(__name__, LAZY)
