"""The standard forms are known by name: DropEdge's GCN (issue 50) at its authors' script values."""

from orthotune.core import RONG_DROP_EDGE, STANDARD_FORMS, TrainConfig, standard_form


def test_dropedges_gcn_form_is_known_by_its_setting_and_backbone():
    form = STANDARD_FORMS[("dropedge-full", "gcn")]
    assert form.setting == "dropedge-full" and "Rong" in form.source
    values = standard_form("dropedge-full", "gcn", "cora")
    assert {k: values[k] for k in ("layout", "hidden", "lr", "weight_decay", "dropout", "input_dropout", "epochs",
                                   "patience", "selection")} == dict(
        layout="standard", hidden=128, lr=0.01, weight_decay=5e-3, dropout=0.8, input_dropout=0.0, epochs=400,
        patience=400, selection="val_loss")
    assert "drop_edge" not in values and RONG_DROP_EDGE == {"drop_edge": 0.3}  # the treatment is the arm's
    config = TrainConfig.from_dict({"dataset": "cora", "setting": "dropedge-full", "backbone": "gcn", "ortho": False,
                                    **values, **RONG_DROP_EDGE})
    # one weight decay on every parameter, as their Adam: no separate input/output decay
    assert (config.drop_edge, config.weight_decay, config.weight_decay_io, config.weight_decay_output) == (
        0.3, 5e-3, None, None)
    assert standard_form("dropedge-full", "gat", "cora") == {}
