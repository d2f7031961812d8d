"""Ortho-GConv models: the orthogonalisation module, the backbones and the metrics."""

from models._backbones import BACKBONES, GCN, GCNII, JKNet, OrthoGNN, Pass
from models._layers import PackedLinear
from models._metrics import layer_gradient_norms, signal_magnification, smoothness
from models._ortho import (
    OrthoSettings,
    distance_to_orthogonality,
    hybrid_init_,
    newton_orthogonalise,
    orthogonality_penalty,
)

__all__ = [
    "BACKBONES",
    "GCN",
    "GCNII",
    "JKNet",
    "OrthoGNN",
    "OrthoSettings",
    "PackedLinear",
    "Pass",
    "distance_to_orthogonality",
    "hybrid_init_",
    "layer_gradient_norms",
    "newton_orthogonalise",
    "orthogonality_penalty",
    "signal_magnification",
    "smoothness",
]
