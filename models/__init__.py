"""Ortho-GConv models: the orthogonalisation module, the backbones, the metrics, and Ortho-GConv as a
parametrization of any module's weights (:func:`orthogonalise`), and PyG's models and users' factories as backbones."""

from orthotune.models._backbones import BACKBONES, build_node_model, readout_width, register_backbone
from orthotune.models._dropout import (
    CPU_DROPOUT_BITS,
    DROPOUT_BITS,
    dropout,
    dropout_fields,
    dropout_streams,
    dropout_threshold,
)
from orthotune.models._gnn import OrthoGNN
from orthotune.models._graph_unet import GRAPH_BACKBONES, OrthoGraphNet
from orthotune.models._metrics import feature_norms, issued_ops, layer_gradient_norms, signal_magnification, smoothness
from orthotune.models._modules import MODULE_BACKBONES, NodeModule, build_module_model, is_module_backbone
from orthotune.models._packing import adjacency
from orthotune.models._parametrize import (
    OrthoGConvWeight,
    orthogonalise,
    orthogonalised_weights,
    orthogonality_regulariser,
    square_conv_weights,
)
from orthotune.models._propagation import AdaptiveAggregation
from orthotune.models._sparse import SparseFeatures, node_features
from orthotune.models._treatment import TreatmentFailed, apply_treatment

__all__ = [
    "AdaptiveAggregation",
    "BACKBONES",
    "CPU_DROPOUT_BITS",
    "DROPOUT_BITS",
    "GRAPH_BACKBONES",
    "MODULE_BACKBONES",
    "NodeModule",
    "OrthoGConvWeight",
    "OrthoGNN",
    "TreatmentFailed",
    "OrthoGraphNet",
    "SparseFeatures",
    "adjacency",
    "apply_treatment",
    "build_module_model",
    "build_node_model",
    "dropout",
    "dropout_fields",
    "dropout_streams",
    "dropout_threshold",
    "feature_norms",
    "is_module_backbone",
    "issued_ops",
    "layer_gradient_norms",
    "node_features",
    "orthogonality_regulariser",
    "orthogonalise",
    "orthogonalised_weights",
    "readout_width",
    "register_backbone",
    "signal_magnification",
    "smoothness",
    "square_conv_weights",
]
