"""A user's treatment applied to a built model (config ``treatment``: ``package.module:function``,
resolved by ``orthotune.core.treatment_function``; checked where a user named it, and again here).

``function(model, config)`` gets the built model (a ``NodeModule``: ``forward(x, edge_index)``
gives the logits) and returns the treated ``torch.nn.Module``, the model itself changed in
place (hooks, replaced children) or a new module around it, as ``orthogonalise(module)``
treats a module. An exception of the function, or a return value that is no module, is a
:class:`TreatmentFailed` naming the treatment: the run fails with that reason (a search
stores it as a failed trial and goes on).
"""

from __future__ import annotations

from torch import nn

from orthotune.core import ConfigError, OrthotuneError, TrainConfig, one_line, treatment_function


class TreatmentFailed(OrthotuneError):
    """A treatment raised, or returned something that is not a ``torch.nn.Module``."""


def apply_treatment(model: nn.Module, config: TrainConfig) -> nn.Module:
    """``config.treatment``'s function applied to ``model`` (see the module docstring)."""
    try:  # gone since the search checked it (a worker without the module): the run's failure
        function = treatment_function(config.treatment)
    except ConfigError as error:
        raise TreatmentFailed(str(error)) from None
    try:
        out = function(model, config)
    except Exception as error:  # the user's code failing is the run's failure, in one line
        raise TreatmentFailed(f"treatment {config.treatment!r} failed: {one_line(error, typed=True)}") from None
    if not isinstance(out, nn.Module):
        raise TreatmentFailed(f"treatment {config.treatment!r} returned {type(out).__name__}, "
                              f"not a torch.nn.Module")
    return out
