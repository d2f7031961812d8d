"""orthotune: hyperparameter search for orthogonal graph neural networks on Ray Tune."""

from orthotune.errors import ConfigError, OrthotuneError
from orthotune.registry import Registry

__version__ = "0.1.0"
__all__ = ["ConfigError", "OrthotuneError", "Registry", "__version__"]
