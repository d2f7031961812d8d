"""A user's treatment: a config's ``treatment`` names a function, ``package.module:function``,
that takes a built model and the config and returns the treated model (as
``orthotune.models.orthogonalise`` treats a module). Empty: no treatment.

Its form is checked wherever a config is made (:func:`check_treatment_reference`); that its
module imports and holds the function (:func:`treatment_function`) is checked where a user
names it, the CLI's options and a space's values, before any work, and again where a model is
built. A stored row is never refused for it: a store whose treatment module is gone still
reads, reports and answers ``best``. A malformed reference, a module that cannot be imported
or a name that is not a callable of it is one :class:`ConfigError` line. So the module must be
importable wherever configs are trained (installed, or on ``PYTHONPATH``, which local Ray
workers inherit). What the function does with a model is checked when a model is built
(``orthotune.models``): a failure there is the run's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from orthotune.core._backbones import FACTORY
from orthotune.core._errors import ConfigError, check, one_line

#: What ``treatment`` holds: no treatment, or a function's reference (the factories' syntax).
NO_TREATMENT = ""
TREATMENT_SYNTAX = "package.module:function"


def check_treatment_reference(reference: str) -> None:
    """``reference`` is of the form ``package.module:function`` (nothing imported)."""
    check(isinstance(reference, str) and FACTORY.fullmatch(reference) is not None,
          f"treatment={reference!r} must be {TREATMENT_SYNTAX} (a dotted module path, a colon, a Python "
          f"name), or empty for none")


def treatment_function(reference: str) -> Callable[..., Any]:
    """The function ``reference`` (``package.module:function``) names, its module imported."""
    check_treatment_reference(reference)
    module_name, name = reference.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # the user's import failing is theirs to see, in one line
        raise ConfigError(f"treatment {reference!r}: cannot import {module_name}: "
                          f"{one_line(error, typed=True)}") from None
    function = getattr(module, name, None)
    check(callable(function), f"treatment {reference!r}: {module_name} has no callable {name!r}")
    return function
