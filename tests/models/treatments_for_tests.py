"""Users' treatments for the tests (``treatments_for_tests:NAME`` as a config's ``treatment``):
pytest puts this folder on ``sys.path``, as a user's own package would be there."""

from __future__ import annotations

from torch import nn


def raising(model: nn.Module, config) -> nn.Module:
    raise ValueError(f"no treatment for {config.backbone}")


def not_a_module(model: nn.Module, config) -> object:
    return "a string"


def wrapped(model: nn.Module, config) -> nn.Module:
    """A new module around the model: its logits halved."""

    class Halved(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, x, edge_index):
            return self.inner(x, edge_index) / 2

    return Halved()


def raising_for_gat(model: nn.Module, config) -> nn.Module:
    """Fails GAT's trials only: the search's other cells go on."""
    if config.backbone == "gat":
        raise RuntimeError("this treatment refuses GAT")
    return model
