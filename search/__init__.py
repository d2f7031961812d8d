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
from orthotune.search._algorithms import SCHEDULERS, SEARCHERS, Scheduler, Searcher
from orthotune.search._budget import cell_trials
from orthotune.search._cell_key import cell_key
from orthotune.search._memory_rule import asks_memory
from orthotune.search._objective import rung_score
from orthotune.search._options import BUDGETS, MODES, SECTIONS, LaunchOptions, SearchOutcome
from orthotune.search._stopping import (
    FEW_TRIALS,
    LOOK_STEP,
    STOPPING_RULES,
    ArmTrials,
    Looks,
    Stop,
    StoppingRule,
    budget_looks,
    stop_of,
    stopping_k,
    stopping_rule,
)

__all__ = [
    "BUDGETS",
    "FEW_TRIALS",
    "LOOK_STEP",
    "MODES",
    "SCHEDULERS",
    "SEARCHERS",
    "SECTIONS",
    "STOPPING_RULES",
    "ArmTrials",
    "Looks",
    "LaunchOptions",
    "Scheduler",
    "SearchOutcome",
    "Searcher",
    "Stop",
    "StoppingRule",
    "asks_memory",
    "budget_looks",
    "cell_key",
    "cell_trials",
    "check_inputs",
    "check_store",
    "gpu_share",
    "launch",
    "local_ray_options",
    "loopback_ray",
    "pack_memory_bytes",
    "resume",
    "rung_score",
    "start_or_resume",
    "stop_of",
    "stopping_k",
    "stopping_rule",
    "train_trial",
]

#: The names of ``__all__`` not imported above, by the module each is loaded from on first
#: access: they import Ray, torch and PyG (``gpu_share``, ``--gpus-per-trial auto``'s rule,
#: imports torch through the training layer; ``train_trial`` is what a trial worker imports,
#: and the cost planner's start probe times that import).
LAZY = {"launch": "_launch", "check_store": "_launch", "resume": "_launch",
        "check_inputs": "_inputs", "start_or_resume": "_start_or_resume",
        "gpu_share": "_gpu_share", "local_ray_options": "_local_ray", "loopback_ray": "_local_ray",
        "pack_memory_bytes": "_memory_request", "train_trial": "_trainable"}


__getattr__ = lazy_attributes(__name__, LAZY)
