"""The standard forms are known by name: DropEdge's GCN (issue 50) at its authors' script values."""

from orthotune.core import (
    RONG_DROP_EDGE,
    RONG_DROP_EDGE_INCEPGCN_FULL,
    RONG_DROP_EDGE_JKNET_FULL,
    RONG_DROP_EDGE_JKNET_SEMI,
    RONG_DROP_EDGE_SEMI,
    RONG_DROP_EDGE_SEMI_CITESEER,
    RONG_DROP_EDGE_SEMI_PUBMED,
    RONG_GCN_SEMI,
    RONG_GCN_SEMI_CITESEER,
    STANDARD_FORMS,
    TrainConfig,
    standard_form,
)


def test_dropedges_gcn_form_is_known_by_its_setting_and_backbone():
    form = STANDARD_FORMS[("dropedge-full", "gcn")]
    assert form.setting == "dropedge-full" and "Rong" in form.source
    values = standard_form("dropedge-full", "gcn", "cora")
    assert {k: values[k] for k in ("layout", "hidden", "lr", "weight_decay", "dropout", "input_dropout", "epochs",
                                   "patience", "selection")} == dict(
        layout="standard", hidden=128, lr=0.01, weight_decay=5e-3, dropout=0.8, input_dropout=0.0, epochs=400,
        patience=400, selection="train_pass_val_loss")
    assert "drop_edge" not in values and RONG_DROP_EDGE == {"drop_edge": 0.3}  # the treatment is the arm's
    config = TrainConfig.from_dict({"dataset": "cora", "setting": "dropedge-full", "backbone": "gcn", "ortho": False,
                                    **values, **RONG_DROP_EDGE})
    # one weight decay on every parameter, as their Adam: no separate input/output decay
    assert (config.drop_edge, config.weight_decay, config.weight_decay_io, config.weight_decay_output) == (
        0.3, 5e-3, None, None)
    assert standard_form("dropedge-full", "gat", "cora") == {}


def test_dropedges_semi_gcn2_values_are_their_scripts_and_make_a_public_split_config():
    """Their semi-supervised scripts train Kipf & Welling's two graph convolutions on the public
    split, DropEdge keeping 40% of the edges; one decay on every parameter, no feature dropout."""
    assert RONG_DROP_EDGE_SEMI == {"drop_edge": 0.6}
    config = TrainConfig.from_dict({"dataset": "cora", "setting": "semi", "backbone": "gcn", "depth": 2,
                                    "ortho": False, **RONG_GCN_SEMI, **RONG_DROP_EDGE_SEMI})
    assert (config.layout, config.hidden, config.lr, config.weight_decay, config.dropout, config.input_dropout) == (
        "standard", 128, 0.007, 1e-5, 0.8, 0.0)
    assert (config.weight_decay_io, config.weight_decay_output, config.epochs, config.patience, config.selection) == (
        None, None, 400, 400, "train_pass_val_loss")
    assert config.drop_edge == 0.6


def test_dropedges_full_incepgcn_form_is_their_8_layer_script_on_the_augmented_setting():
    assert STANDARD_FORMS[("dropedge-full-aug", "incepgcn")].setting == "dropedge-full-aug"
    values = standard_form("dropedge-full-aug", "incepgcn", "cora")
    config = TrainConfig.from_dict({"dataset": "cora", "setting": "dropedge-full-aug", "backbone": "incepgcn",
                                    "depth": 8, "ortho": False, **values, **RONG_DROP_EDGE_INCEPGCN_FULL})
    assert (config.layout, config.hidden, config.lr, config.weight_decay, config.dropout, config.input_dropout) == (
        "standard", 128, 0.01, 1e-3, 0.5, 0.0)
    assert (config.drop_edge, config.epochs, config.patience, config.selection) == (0.95, 400, 400,
                                                                                   "train_pass_val_loss")


def test_dropedges_forms_start_their_weights_as_their_layers_do():
    """Their GraphConvolutionBS draws weights and biases uniform in +-1/sqrt(fan-out): every
    DropEdge form says so, and builds a config that does."""
    forms = [STANDARD_FORMS[key].values for key in (("dropedge-full", "gcn"), ("dropedge-full-aug", "incepgcn"),
                                                    ("dropedge-full-aug", "jknet"), ("semi", "incepgcn"))]
    for values in (*forms, RONG_GCN_SEMI, RONG_GCN_SEMI_CITESEER):
        assert values["init"] == "fan_out"
    config = TrainConfig.from_dict({"dataset": "citeseer", "setting": "semi", "backbone": "gcn", "depth": 2,
                                    "ortho": False, **RONG_GCN_SEMI_CITESEER, **RONG_DROP_EDGE_SEMI_CITESEER})
    assert (config.init, config.lr, config.weight_decay, config.dropout, config.drop_edge) == (
        "fan_out", 0.01, 5e-4, 0.3, 0.8)
    assert "init" not in STANDARD_FORMS[("semi", "gcn")].values  # Kipf & Welling's GCN starts as Glorot's


def test_dropedges_full_jknet_form_is_their_dense_block_of_16_with_every_bias():
    """Their densegcn (--nbaseblocklayer 14) is orthotune's official JKNet at depth 16, with the
    biases their layers have (the Ortho-GConv authors' JKNet drops them; DropEdge's does not)."""
    values = standard_form("dropedge-full-aug", "jknet", "cora")
    config = TrainConfig.from_dict({"dataset": "cora", "setting": "dropedge-full-aug", "backbone": "jknet",
                                    "depth": 16, "ortho": False, **values, **RONG_DROP_EDGE_JKNET_FULL})
    assert (config.layout, config.conv_bias, config.io_bias, config.jk, config.self_loop) == (
        "official", True, True, "cat", False)
    assert (config.hidden, config.lr, config.weight_decay, config.dropout, config.input_dropout, config.drop_edge) == (
        128, 0.008, 5e-4, 0.8, 0.0, 0.8)
    assert (config.epochs, config.patience, config.selection, config.init) == (400, 400, "train_pass_val_loss",
                                                                               "fan_out")


def test_dropedges_semi_incepgcn_form_holds_each_datasets_script():
    """Their CiteSeer and PubMed semi-supervised IncepGCN scripts (two branches: depth 4) have
    their own values and DropEdge rates; Cora's (the 64-layer script) stays the form's base."""
    cora = standard_form("semi", "incepgcn", "cora")
    assert (cora["lr"], cora["weight_decay"], cora["dropout"], cora["drop_edge"]) == (0.004, 5e-5, 0.3, 0.6)
    expected = {"citeseer": (0.005, 1e-3, 0.8, 0.95), "pubmed": (0.003, 5e-3, 0.3, 0.2)}
    for dataset, (lr, decay, dropout, rate) in expected.items():
        values = standard_form("semi", "incepgcn", dataset)
        config = TrainConfig.from_dict({"dataset": dataset, "setting": "semi", "backbone": "incepgcn", "depth": 4,
                                        "ortho": False, **values})
        assert (config.lr, config.weight_decay, config.dropout, config.drop_edge) == (lr, decay, dropout, rate)
        assert (config.hidden, config.input_dropout, config.epochs, config.selection, config.init) == (
            128, 0.0, 400, "train_pass_val_loss", "fan_out")


def test_dropedges_semi_jknet_form_is_their_dense_block_of_4_on_the_random_walk_operator():
    """Their semi-supervised cora_JKNet.sh passes AugRWalk: the semi-rw setting's form."""
    assert STANDARD_FORMS[("semi-rw", "jknet")].setting == "semi-rw"
    config = TrainConfig.from_dict({"dataset": "cora", "setting": "semi-rw", "backbone": "jknet", "depth": 4,
                                    "ortho": False, **standard_form("semi-rw", "jknet", "cora"),
                                    **RONG_DROP_EDGE_JKNET_SEMI})
    assert (config.layout, config.conv_bias, config.io_bias, config.init) == ("official", True, True, "fan_out")
    assert (config.hidden, config.lr, config.weight_decay, config.dropout, config.input_dropout, config.drop_edge) == (
        128, 0.001, 5e-4, 0.8, 0.0, 0.6)


def test_dropedges_semi_pubmed_gcn_form_is_their_withloop_gcn_on_the_random_walk_operator():
    """Their semi-supervised pubmed_GCN.sh: Kipf's two graph convolutions, each with its
    self-loop weight (--withloop), on AugRWalk (the semi-rw setting), DropEdge keeping 70%."""
    form = STANDARD_FORMS[("semi-rw", "gcn")]
    assert (form.setting, form.backbone) == ("semi-rw", "gcn")
    config = TrainConfig.from_dict({"dataset": "pubmed", "setting": "semi-rw", "backbone": "gcn", "depth": 2,
                                    "ortho": False, **standard_form("semi-rw", "gcn", "pubmed"),
                                    **RONG_DROP_EDGE_SEMI_PUBMED})
    assert (config.layout, config.self_loop, config.io_bias, config.init) == ("standard", True, True, "fan_out")
    assert (config.hidden, config.lr, config.weight_decay, config.dropout, config.input_dropout, config.drop_edge) == (
        128, 0.003, 5e-3, 0.5, 0.0, 0.3)
    assert (config.epochs, config.patience, config.selection) == (400, 400, "train_pass_val_loss")
