"""The cost planner: what a search will cost on given resources, from each cell's cost
measured on this machine (``orthotune plan``, and the total ``launch`` prints first).

A thin face over private modules, as Optuna's samplers sit over ``optuna/_gp/``:

- ``_estimate``: the arithmetic (ASHA's expected epochs, seconds and core-hours per cell and
  arm, the wall time as a list schedule, what does not fit a node); it imports nothing of
  orthotune, so it can be read and tested alone;
- ``_machine``: the machine measured on (CPUs, GPUs, memory, the device and its name, the
  measuring streams): where a CPU plan and a GPU plan differ, the home of a new device's
  cost model;
- ``_costing`` (``plan_search``): the cells' shapes, measured or fitted, into an estimate;
  ``_meter`` and ``_measuring`` measure shapes in streams side by side; ``_start_probe``
  times a search's fixed start; ``_cache`` keeps what was measured;
- ``_overhead``: the service's own cost per Ray trial and per report (what Ray Tune and the
  trainable add beyond the trainer), measured here by ``_overhead_probe``, kept, or read from
  a file (``--service-overhead``).

It sits above the search (it reads the options, the budget and the input checks there) and
below the reports and the CLI. The estimate types and constants load at once and are light;
``plan_search`` and ``measure_overhead`` (the service's overhead measured here:
``bench/service_overhead.py``) load on first use (PEP 562) and import torch and Ray only when
they measure.
"""

from orthotune.core import lazy_attributes
from orthotune.plan._asha import asha_expected_epochs, expected_epochs
from orthotune.plan._estimate import CellEstimate, PlanEstimate, Resources
from orthotune.plan._measuring import ENOUGH_TIMED_S, MEASURE_EPOCHS, SCALE_FROM_NODES
from orthotune.plan._overhead import ServiceOverhead, read_service_overhead

__all__ = [
    "ENOUGH_TIMED_S",
    "MEASURE_EPOCHS",
    "SCALE_FROM_NODES",
    "CellEstimate",
    "PlanEstimate",
    "Resources",
    "ServiceOverhead",
    "asha_expected_epochs",
    "expected_epochs",
    "measure_overhead",
    "plan_search",
    "read_service_overhead",
]

#: The names of ``__all__`` not imported above, by the module each is loaded from on first use.
LAZY = {"plan_search": "_costing", "measure_overhead": "_overhead_probe"}

__getattr__ = lazy_attributes(__name__, LAZY)
