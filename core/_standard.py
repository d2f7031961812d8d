"""Each backbone's standard form at its published settings: what the field means by "a GCN".

A standard form is the backbone as its own paper builds it (``layout: standard``; see
``orthotune.models.OrthoGNN``) with the values its paper trains it with, per protocol
setting and, where the paper tunes per dataset, per dataset. An original arm's search
starts from it (``SearchSpace.default_point``), so a search's baseline is never a weaker
model than the one the literature reports; ``bench/reference.py`` trains it on the paper's
protocol and prints ours next to the published numbers.

Pure data, like the catalogue: config field names and values, and where they come from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orthotune.core._config import PASS_SELECTION


@dataclass(frozen=True)
class StandardForm:
    """A backbone's published settings in one protocol setting (config field values),
    with per-dataset values over them and the depth its paper reports per dataset."""

    backbone: str
    setting: str
    source: str
    values: Mapping[str, Any]
    per_dataset: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def for_dataset(self, dataset: str) -> dict[str, Any]:
        return {"layout": "standard", **self.values, **self.per_dataset.get(dataset, {})}


#: Kipf & Welling (ICLR 2017), Section 5.2 and Appendix B: two graph convolutions, 16 hidden
#: units, dropout 0.5 (on the input features and the hidden layer), L2 5e-4 on the first
#: layer only, Adam with learning rate 0.01, 200 epochs, early stopping when the validation
#: loss has not decreased for 10 epochs; the same values on all three citation graphs.
KIPF_WELLING = dict(hidden=16, lr=0.01, weight_decay=0.0, weight_decay_io=5e-4, weight_decay_output=0.0,
                    dropout=0.5, epochs=200, patience=10, selection="val_loss")

#: Chen et al. (ICML 2020), semi-supervised runs (their train.py and semi.sh): Adam, lr 0.01,
#: weight decay 0.01 on the convolutions (wd1) and 5e-4 on the linear input and output
#: layers (wd2), dropout 0.6, alpha 0.1, lambda 0.5, 1500 epochs, patience 100 on the
#: validation loss, whose minimum gives the test accuracy; CiteSeer and PubMed tuned apart.
CHEN_GCNII = dict(hidden=64, lr=0.01, weight_decay=0.01, weight_decay_io=5e-4, dropout=0.6, alpha=0.1, theta=0.5,
                  epochs=1500, patience=100, selection="val_loss")

#: Chen et al. (ICML 2020), full-supervised runs (their full-supervised.py and full.sh): Adam,
#: lr 0.01, one weight decay on every parameter (set per dataset by full.sh), hidden 64, dropout
#: 0.5, alpha 0.5 and lambda 0.5 unless full.sh sets them, 1500 epochs, patience 100 on the
#: validation loss, whose minimum gives the test accuracy. Their layers per dataset (full.sh):
#: Cora, CiteSeer, PubMed 64, Cornell 16, Texas 32, Wisconsin 16; GCNII* adds ``--variant``.
CHEN_GCNII_FULL = dict(hidden=64, lr=0.01, weight_decay=0.01, dropout=0.5, alpha=0.5, theta=0.5, epochs=1500,
                       patience=100, selection="val_loss")

#: Wu et al. (ICML 2019), citation runs (their citation.py): K = 2 propagations, one linear
#: layer, no dropout, Adam with lr 0.2 for 100 epochs, read at the last epoch; weight decay
#: tuned per dataset on validation by hyperopt (Cora's 1.3027e-05, as their tuned file is quoted).
#: The epoch is read at the lowest validation loss (validation only, as the other forms): by
#: validation accuracy, Cora's row lands 0.88 points under the published 81.0 (10 seeds).
WU_SGC = dict(lr=0.2, weight_decay=1.3027e-05, dropout=0.0, epochs=100, patience=100, selection="val_loss")
#: Gasteiger (Klicpera) et al. (ICLR 2019): a 2-layer MLP of 64 hidden units, dropout 0.5,
#: L2 5e-3 on the first layer only, Adam lr 0.01, K = 10 steps with teleport 0.1, patience 100.
#: (Their dropout on the adjacency in each step is not PyG's APPNP default and is left out.)
KLICPERA_APPNP = dict(hidden=64, lr=0.01, weight_decay=0.0, weight_decay_io=5e-3, weight_decay_output=0.0,
                      dropout=0.5, K=10, alpha=0.1, epochs=1000, patience=100, selection="val_loss")
#: Velickovic et al. (ICLR 2018), transductive: 8 heads of 8 hidden units, dropout 0.6 on the
#: inputs of each layer and on the attention coefficients, L2 5e-4, Adam lr 0.005, patience
#: 100 (PyG's GAT averages the output layer's heads: 8 where their Cora output had 1).
VELICKOVIC_GAT = dict(hidden=64, heads=8, lr=0.005, weight_decay=5e-4, dropout=0.6, epochs=1000, patience=100,
                      selection="val_loss")
#: Liu et al. (KDD 2020), their Cora run: a 2-layer MLP of 64 hidden units, dropout 0.8, L2
#: 5e-3, Adam lr 0.01, K = 10 propagations, 1000 epochs with early stopping on the validation loss.
LIU_DAGNN = dict(hidden=64, lr=0.01, weight_decay=5e-3, dropout=0.8, epochs=1000, patience=100,
                 selection="val_loss")
#: Rong et al. (ICLR 2020), DropEdge, their semi-supervised Cora IncepGCN script
#: (script/semi-supervised/cora_IncepGCN.sh, DropEdge/DropEdge): one inception block of 62
#: branches (64 layers), hidden 128, Adam lr 0.004 and weight decay 5e-5 on every parameter,
#: dropout 0.3 (none on the raw features), 40% of the edges kept per epoch, 400 epochs with
#: their early stopping's patience of 400 on the validation loss of the training pass (dropout and
#: dropped edges on: ``train_pass_val_loss``), whose checkpoint after that step is tested.
RONG_INCEPGCN = dict(hidden=128, lr=0.004, weight_decay=5e-5, dropout=0.3, input_dropout=0.0, drop_edge=0.6,
                     epochs=400, patience=400, selection=PASS_SELECTION, init="fan_out")
#: Their semi-supervised CiteSeer and PubMed IncepGCN scripts (script/semi-supervised/citeseer_IncepGCN.sh,
#: pubmed_IncepGCN.sh and their ``_nodrop`` twins): ``--nbaseblocklayer 2``, that is depth 4 (input, 2
#: branches, output), on ``AugNormAdj`` (the semi setting's ``A_hat``), the rest as :data:`RONG_INCEPGCN`.
#: Per dataset over it; ``drop_edge`` is the DropEdge arm's (their ``_nodrop`` scripts keep every edge).
RONG_INCEPGCN_SEMI_DATASETS = {"citeseer": dict(lr=0.005, weight_decay=1e-3, dropout=0.8, drop_edge=0.95),
                               "pubmed": dict(lr=0.003, weight_decay=5e-3, dropout=0.3, drop_edge=0.2)}

#: Rong et al. (ICLR 2020), full-supervised GCN (their script/cora_GCN.sh and
#: supervised/cora_GCN_nodrop.sh, train_new.py): hidden 128, dropout 0.8 after each hidden
#: graph convolution (none on the raw features), Adam with lr 0.01 and weight decay 5e-3 on every
#: parameter, 400 epochs, no early stop (patience 400), the test accuracy read after the step of
#: the lowest validation loss of the training pass (dropout and dropped edges on: their
#: ``train_new.py`` feeds its early stopping the training output's validation loss,
#: ``train_pass_val_loss``); DropEdge keeps 70% of the edges each epoch (``--sampling_percent 0.7``:
#: :data:`RONG_DROP_EDGE`), the original keeps all. Their scripts publish these values for their
#: 4-layer GCN (``--nbaseblocklayer 2``: graph-convolution input, 2 hidden, output) only; the
#: paper's GCN-2 row has no script, so these values stand for both depths. Their adjacency
#: (``--normalization FirstOrderGCN``) is the dropedge-full setting's; their layers' weights and biases
#: start uniform in +-1/sqrt(fan-out) (``init="fan_out"``, as every DropEdge form here). Kept
#: difference: they run one seed (42).
RONG_GCN = dict(hidden=128, lr=0.01, weight_decay=5e-3, dropout=0.8, input_dropout=0.0, epochs=400, patience=400,
                selection=PASS_SELECTION, init="fan_out")
#: The DropEdge arm of Rong et al.'s scripts over :data:`RONG_GCN`: 30% of the edges dropped.
RONG_DROP_EDGE = dict(drop_edge=0.3)

#: Rong et al. (ICLR 2020), semi-supervised GCN-2 (their script/semi-supervised/cora_GCN.sh and
#: cora_GCN_nodrop.sh, ``--nbaseblocklayer 0``: a graph-convolution input and output, Kipf &
#: Welling's two layers): hidden 128, lr 0.007, weight decay 1e-5 on every parameter, dropout 0.8
#: (none on the raw features), 400 epochs with a patience of 400, selected as :data:`RONG_GCN`;
#: their ``AugNormAdj`` is the semi setting's ``D^-1/2 (A + I) D^-1/2``
#: and ``--task_type semi`` the public split. Unlike :data:`RONG_GCN`, these are the values of
#: the very depth the paper's row reports. Kept differences as :data:`RONG_GCN`'s.
RONG_GCN_SEMI = dict(layout="standard", hidden=128, lr=0.007, weight_decay=1e-5, dropout=0.8, input_dropout=0.0,
                     epochs=400, patience=400, selection=PASS_SELECTION, init="fan_out")
#: The DropEdge arm of :data:`RONG_GCN_SEMI`: 40% of the edges kept (``--sampling_percent 0.4``).
RONG_DROP_EDGE_SEMI = dict(drop_edge=0.6)
#: The same model on CiteSeer (their script/semi-supervised/citeseer_GCN.sh and
#: citeseer_GCN_nodrop.sh): lr 0.01, weight decay 5e-4, dropout 0.3, the rest as :data:`RONG_GCN_SEMI`.
RONG_GCN_SEMI_CITESEER = {**RONG_GCN_SEMI, "lr": 0.01, "weight_decay": 5e-4, "dropout": 0.3}
#: The DropEdge arm of :data:`RONG_GCN_SEMI_CITESEER`: 20% of the edges kept (``--sampling_percent 0.2``).
RONG_DROP_EDGE_SEMI_CITESEER = dict(drop_edge=0.8)
#: The same model on PubMed (their script/semi-supervised/pubmed_GCN.sh and pubmed_GCN_nodrop.sh):
#: lr 0.003, weight decay 5e-3, dropout 0.5, a self-loop weight on both graph convolutions
#: (``--withloop``: ``self_loop``) and ``D^-1 (A + I)`` (``--normalization AugRWalk``: the semi-rw
#: setting), the rest as :data:`RONG_GCN_SEMI`.
RONG_GCN_SEMI_PUBMED = {**RONG_GCN_SEMI, "lr": 0.003, "weight_decay": 5e-3, "dropout": 0.5, "self_loop": True}
#: The DropEdge arm of :data:`RONG_GCN_SEMI_PUBMED`: 70% of the edges kept (``--sampling_percent 0.7``).
RONG_DROP_EDGE_SEMI_PUBMED = dict(drop_edge=0.3)

#: Rong et al. (ICLR 2020), full-supervised IncepGCN (their script/cora_IncepGCN.sh and
#: supervised/cora_IncepGCN_nodrop.sh): ``--nbaseblocklayer 6``, orthotune's depth 8 (the longest
#: chain: input, 6, output), hidden 128, lr 0.01, weight decay 1e-3 on every parameter, dropout
#: 0.5 (none on the raw features), 400 epochs, patience 400, selected as :data:`RONG_GCN`;
#: ``AugNormAdj``: the dropedge-full-aug setting. The paper's 8-layer row is this script's depth.
RONG_INCEPGCN_FULL = dict(hidden=128, lr=0.01, weight_decay=1e-3, dropout=0.5, input_dropout=0.0, epochs=400,
                          patience=400, selection=PASS_SELECTION, init="fan_out")
#: The DropEdge arm of :data:`RONG_INCEPGCN_FULL`: 5% of the edges kept (``--sampling_percent 0.05``).
RONG_DROP_EDGE_INCEPGCN_FULL = dict(drop_edge=0.95)
#: Rong et al. (ICLR 2020), full-supervised JKNet (their script/cora_JKNet.sh and cora_JKNet_nodrop.sh,
#: ``--type densegcn``, the Ortho-GConv authors' JKNet too): ``--nbaseblocklayer 14``, depth 16 in the
#: ``official`` layout (graph-convolution input, 14 hidden convolutions, jumping knowledge over the input
#: layer and each of them, graph-convolution output), a bias on every layer, hidden 128, lr 0.008, weight
#: decay 5e-4 on every parameter, dropout 0.8 (none on the raw features), 400 epochs, patience 400,
#: selected as :data:`RONG_GCN`; ``AugNormAdj``: the dropedge-full-aug setting.
RONG_JKNET_FULL = dict(layout="official", conv_bias=True, io_bias=True, hidden=128, lr=0.008, weight_decay=5e-4,
                       dropout=0.8, input_dropout=0.0, epochs=400, patience=400, selection=PASS_SELECTION,
                       init="fan_out")
#: The DropEdge arm of :data:`RONG_JKNET_FULL`: 20% of the edges kept (``--sampling_percent 0.2``).
RONG_DROP_EDGE_JKNET_FULL = dict(drop_edge=0.8)
#: Rong et al. (ICLR 2020), semi-supervised Cora JKNet (their script/semi-supervised/cora_JKNet.sh and
#: cora_JKNet_nodrop.sh, ``--type densegcn --nbaseblocklayer 2``): the ``official`` JKNet at depth 4, as
#: :data:`RONG_JKNET_FULL` but lr 0.001, on the public split with ``AugRWalk``: the semi-rw setting.
RONG_JKNET_SEMI = {**RONG_JKNET_FULL, "lr": 0.001}
#: The DropEdge arm of :data:`RONG_JKNET_SEMI`: 40% of the edges kept (``--sampling_percent 0.4``).
RONG_DROP_EDGE_JKNET_SEMI = dict(drop_edge=0.6)

STANDARD_FORMS: dict[tuple[str, str], StandardForm] = {
    # their GraphConvolution layers have no bias (PyG's GCNConv has one)
    ("semi", "gcn"): StandardForm("gcn", "semi", "Kipf & Welling, ICLR 2017", {**KIPF_WELLING, "io_bias": False}),
    # Xu et al. (ICML 2018) report no public-split result: their GCN layers at Kipf & Welling's values
    ("semi", "jknet"): StandardForm("jknet", "semi", "Xu et al., ICML 2018 (at Kipf & Welling's values)",
                                    {**KIPF_WELLING, "jk": "cat"}),
    ("semi", "gcnii"): StandardForm(
        "gcnii", "semi", "Chen et al., ICML 2020 (semi.sh)", CHEN_GCNII,
        per_dataset={"citeseer": dict(hidden=256, theta=0.6, dropout=0.7),
                     "pubmed": dict(hidden=256, theta=0.4, dropout=0.5, weight_decay=5e-4)}),
    ("semi", "sgc"): StandardForm("sgc", "semi", "Wu et al., ICML 2019 (Cora's tuned weight decay)", WU_SGC),
    ("semi", "appnp"): StandardForm("appnp", "semi", "Gasteiger et al., ICLR 2019", KLICPERA_APPNP),
    ("semi", "gat"): StandardForm("gat", "semi", "Velickovic et al., ICLR 2018", VELICKOVIC_GAT),
    ("semi", "dagnn"): StandardForm("dagnn", "semi", "Liu et al., KDD 2020 (their Cora run)", LIU_DAGNN),
    ("semi", "incepgcn"): StandardForm("incepgcn", "semi", "Rong et al., ICLR 2020 (their semi-supervised scripts)",
                                       RONG_INCEPGCN, per_dataset=RONG_INCEPGCN_SEMI_DATASETS),
    ("full", "gcnii"): StandardForm(
        "gcnii", "full", "Chen et al., ICML 2020 (full.sh)", CHEN_GCNII_FULL,
        per_dataset={"cora": dict(alpha=0.2, weight_decay=1e-4), "citeseer": dict(weight_decay=5e-6),
                     "pubmed": dict(alpha=0.1, weight_decay=5e-6), "cornell": dict(theta=1.0, weight_decay=1e-3),
                     "texas": dict(theta=1.5, weight_decay=1e-4), "wisconsin": dict(theta=1.0, weight_decay=5e-4)}),
    # DropEdge's table (Rong et al., ICLR 2020) on FastGCN's full-supervised split
    ("dropedge-full", "gcn"): StandardForm("gcn", "dropedge-full", "Rong et al., ICLR 2020 (cora_GCN.sh)", RONG_GCN),
    ("dropedge-full-aug", "incepgcn"): StandardForm("incepgcn", "dropedge-full-aug",
                                                    "Rong et al., ICLR 2020 (cora_IncepGCN.sh)", RONG_INCEPGCN_FULL),
    ("dropedge-full-aug", "jknet"): StandardForm("jknet", "dropedge-full-aug", "Rong et al., ICLR 2020 (cora_JKNet.sh)",
                                                 RONG_JKNET_FULL),
    ("semi-rw", "incepgcn"): StandardForm("incepgcn", "semi-rw", "Rong et al., ICLR 2020 (semi-supervised "
                                          "cora_IncepGCN.sh, on its D^-1 (A + I))", RONG_INCEPGCN),
    ("semi-rw", "gcn"): StandardForm("gcn", "semi-rw", "Rong et al., ICLR 2020 (semi-supervised pubmed_GCN.sh, "
                                     "on its D^-1 (A + I) with --withloop)", RONG_GCN_SEMI_PUBMED),
    ("semi-rw", "jknet"): StandardForm("jknet", "semi-rw", "Rong et al., ICLR 2020 (semi-supervised cora_JKNet.sh)",
                                       RONG_JKNET_SEMI),
}


def standard_form(setting: str, backbone: str, dataset: str) -> dict[str, Any]:
    """The standard form's values for ``dataset`` (``{}`` where no paper publishes one)."""
    form = STANDARD_FORMS.get((setting, backbone))
    return form.for_dataset(dataset) if form is not None else {}
