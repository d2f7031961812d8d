"""orthotune: hyperparameter search for orthogonal graph neural networks on Ray Tune.

Each layer is one folder of the repository (``orthotune.X`` is ``X/``), each importing only
from those below it. :data:`LAYERS` is the one place that order is written: the architecture
test, the package ``launch --submit`` stages and the manual's architecture page read it.
Importing ``orthotune`` itself loads nothing else, so the CLI starts fast.
"""

__version__ = "0.3.0"
#: The layer folders, bottom to top: each imports only from the ones before it.
LAYERS = ("core", "models", "training", "store", "spaces", "search", "plan", "reports", "cli")
__all__ = ["LAYERS", "__version__"]
