"""A package face whose heavy names load on first use (PEP 562), so what validates input stays
light: ``orthotune.search`` (Ray, torch) and ``orthotune.store`` (pyarrow) use it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name of ``modules`` is loaded from its
    private module (``{package}.{module}``) on first access and then kept in the package, so
    later lookups do not come back here; any other name is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        if name not in modules:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{modules[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
