"""orthotune: hyperparameter search for orthogonal graph neural networks on Ray Tune.

Layers, each importing only from those below it (see the README's architecture section):
``orthotune.core`` -> ``orthotune.models`` -> ``orthotune.search.training`` ->
``orthotune.search.store`` -> ``orthotune.search.tune`` -> ``orthotune.spaces`` ->
``orthotune.reports`` -> ``orthotune.cli``. Importing ``orthotune`` itself loads nothing
else, so the CLI starts fast.
"""

__version__ = "0.2.0"
__all__ = ["__version__"]
