import pytest
import torch

from orthotune.models import BACKBONES, OrthoSettings, layer_gradient_norms, signal_magnification


@pytest.mark.parametrize("name", ["gcn", "jknet", "gcnii"])
@pytest.mark.parametrize("depth", [2, 4, 8])
@pytest.mark.parametrize("ortho", [False, True])
def test_backbone_forward_backward_on_cora(cora, name, depth, ortho):
    settings = [OrthoSettings(T=4, beta=0.4)] if ortho else None
    model = BACKBONES.get(name)(cora.x.shape[1], 16, cora.num_classes, depth, ortho=settings)
    out = model.run(cora.x, cora.adj)
    assert out.logits.shape == (cora.num_nodes, 1, cora.num_classes)
    loss = out.logits.logsumexp(-1).mean() + out.penalty.sum()
    loss.backward()
    for transform in model.transforms:
        assert transform.weight.grad is not None and torch.isfinite(transform.weight.grad).all()
        if ortho:
            assert transform.c.grad is not None


def test_packed_model_matches_lone_models(cora):
    """Pack p of a packed model computes exactly what a lone model with seed p does."""
    settings = [OrthoSettings(T=2, beta=0.3), OrthoSettings(T=5, beta=0.7)]
    packed = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 4, dropout=0.0, ortho=settings, seeds=(3, 4))
    both = packed(cora.x, cora.adj)
    for p, (setting, seed) in enumerate(zip(settings, (3, 4))):
        lone = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 4, dropout=0.0, ortho=[setting], seeds=(seed,))
        torch.testing.assert_close(both[:, p], lone(cora.x, cora.adj)[:, 0], rtol=1e-4, atol=1e-5)


def test_metrics_shapes(cora):
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 4, seeds=(0, 1))
    out = model.run(cora.x, cora.adj)
    assert signal_magnification(out.first, out.last).shape == (2,)
    assert layer_gradient_norms(out.logits.sum(), out.weights).shape == (2, 4)


def test_unknown_backbone_lists_valid_names():
    with pytest.raises(ValueError, match="valid: gcn, jknet, gcnii"):
        BACKBONES.get("gat")
