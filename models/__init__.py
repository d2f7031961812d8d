"""Ortho-GConv models: the orthogonalisation module, the backbones and the metrics."""

from orthotune.core import OrthoSettings
from orthotune.models._backbones import BACKBONES, GCN, GCNII, JKNet, OrthoGNN, Pass, adjacency, build_node_model
from orthotune.models._graph_unet import (
    GRAPH_BACKBONES,
    GraphPass,
    GraphUNet,
    OrthoGraphNet,
    augment_adjacency,
    pool_ratios,
    unpool,
)
from orthotune.models._layers import PackedLinear, SparseFeatures, dropout, node_features
from orthotune.models._metrics import layer_gradient_norms, signal_magnification, smoothness
from orthotune.models._ortho import (
    distance_to_orthogonality,
    hybrid_init_,
    newton_orthogonalise,
    orthogonality_penalty,
)

__all__ = [
    "BACKBONES",
    "GRAPH_BACKBONES",
    "GCN",
    "GCNII",
    "GraphPass",
    "GraphUNet",
    "JKNet",
    "OrthoGNN",
    "OrthoGraphNet",
    "OrthoSettings",
    "PackedLinear",
    "SparseFeatures",
    "Pass",
    "adjacency",
    "distance_to_orthogonality",
    "dropout",
    "augment_adjacency",
    "build_node_model",
    "hybrid_init_",
    "layer_gradient_norms",
    "newton_orthogonalise",
    "node_features",
    "orthogonality_penalty",
    "pool_ratios",
    "signal_magnification",
    "smoothness",
    "unpool",
]
