"""Ortho-GConv models: the orthogonalisation module, the backbones and the metrics."""

from orthotune.models._backbones import BACKBONES, OrthoGNN, adjacency, build_node_model, readout_width
from orthotune.models._graph_unet import GRAPH_BACKBONES, OrthoGraphNet
from orthotune.models._layers import node_features
from orthotune.models._metrics import feature_norms, issued_ops, layer_gradient_norms, signal_magnification, smoothness

__all__ = [
    "BACKBONES",
    "GRAPH_BACKBONES",
    "OrthoGNN",
    "OrthoGraphNet",
    "adjacency",
    "build_node_model",
    "feature_norms",
    "issued_ops",
    "layer_gradient_norms",
    "node_features",
    "readout_width",
    "signal_magnification",
    "smoothness",
]
