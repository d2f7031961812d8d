"""orthotune: hyperparameter search for orthogonal graph neural networks on Ray Tune.

Each layer is one folder of the repository (``orthotune.X`` is ``X/``), each importing only
from those below it (see the README's architecture section): ``core`` -> ``models`` ->
``training`` -> ``store`` -> ``search`` -> ``spaces`` -> ``reports`` -> ``cli``. Importing
``orthotune`` itself loads nothing else, so the CLI starts fast.
"""

__version__ = "0.3.0"
__all__ = ["__version__"]
