"""Ortho-GConv as a parametrization of any module's weights (``orthotune.models.orthogonalise``):
the weights it picks on PyG's models, the same transform and regulariser as the built-in
layers, its refusals, and a few training steps of a parametrized PyG GCN on Cora."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize
from torch_geometric.nn import APPNP
from torch_geometric.nn.models import GAT, GCN, GIN, GraphSAGE

from orthotune.core import ConfigError, OrthoSettings
from orthotune.models import (
    BACKBONES,
    orthogonalise,
    orthogonalised_weights,
    orthogonality_regulariser,
    square_conv_weights,
)
from orthotune.models._layers import regularisation
from orthotune.models._ortho import distance_to_orthogonality, mix_identity, newton_orthogonalise

IN, HIDDEN, OUT = 1433, 64, 7  # Cora's features and classes


def seeded(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def raw(owner: nn.Module, name: str = "weight") -> torch.Tensor:
    return getattr(owner.parametrizations, name).original


@pytest.mark.parametrize("build, expected", [
    (lambda: GCN(IN, HIDDEN, 3, OUT), ["convs.1.lin.weight"]),
    (lambda: GAT(IN, HIDDEN, 3, OUT, heads=8), ["convs.1.lin.weight"]),  # 8 heads x 8 = 64
    (lambda: GraphSAGE(IN, HIDDEN, 3, OUT), ["convs.1.lin_l.weight", "convs.1.lin_r.weight"]),
    # GIN's MLPs: the hidden 64 x 64 ones, not the output MLP's 7 x 7
    (lambda: GIN(IN, HIDDEN, 3, OUT), ["convs.0.nn.lins.1.weight", "convs.1.nn.lins.0.weight",
                                       "convs.1.nn.lins.1.weight"]),
])
def test_the_default_selector_picks_the_hidden_square_conv_weights(build, expected):
    model = build()
    assert orthogonalise(model) == expected
    parametrized = {f"{prefix}.weight" for prefix, m in model.named_modules()
                    if parametrize.is_parametrized(m, "weight")}
    assert parametrized == set(expected)  # the input and output layers' weights stay plain
    assert set(orthogonalised_weights(model)) == set(expected)


def test_the_transform_is_the_built_in_newton_iteration_and_near_orthogonal_at_T4():
    model = GAT(IN, HIDDEN, 3, OUT, heads=8)
    orthogonalise(model, T=4, bound="covariance", generator=seeded())
    lin = model.convs[1].lin
    w = lin.weight.detach()
    assert torch.equal(w, newton_orthogonalise(raw(lin).detach(), 4, False, 1, "covariance"))
    # the hybrid start beta Glorot + (1 - beta) I is 0.59 from orthogonal; T = 4 halves it
    assert distance_to_orthogonality(w) < 0.35 < distance_to_orthogonality(raw(lin).detach()) - 0.2
    orthogonalise(more := GAT(IN, HIDDEN, 3, OUT, heads=8), T=8, generator=seeded())
    assert distance_to_orthogonality(more.convs[1].lin.weight.detach()) < 0.02


def test_the_reparam_hybrid_mixes_in_the_identity_every_pass():
    model = GCN(IN, HIDDEN, 3, OUT)
    orthogonalise(model, profile="official", beta=0.3)  # reparam, centred rows, ones target
    lin = model.convs[1].lin
    p = raw(lin).detach()
    expected = newton_orthogonalise(mix_identity(p, torch.tensor(0.3, dtype=torch.float64)), 4, True, 1,
                                    "covariance")
    assert torch.equal(lin.weight.detach(), expected)
    assert p.abs().max() <= HIDDEN ** -0.5  # P drawn as the authors' code draws it


def test_a_built_in_backbone_and_a_parametrized_module_agree():
    """Same raw weights, same settings: the same W and the same regulariser (one shared
    ``ones`` target, squared norm) as an OrthoGNN's hidden transforms."""
    settings = OrthoSettings(hybrid="reparam", centre_rows=True, norm_groups=2, T=5, target="ones",
                             squared_norm=True, lam=0.01)
    gnn = BACKBONES.get("gcn")(IN, HIDDEN, OUT, 4, ortho=[settings])
    built_in = gnn.effective_weights()  # four hidden transforms, one batched iteration
    plain = nn.ModuleList(nn.Linear(HIDDEN, HIDDEN) for _ in gnn.transforms)
    orthogonalise(plain, settings, select=lambda module, owner, name, weight: name == "weight")
    with torch.no_grad():
        for lin, transform in zip(plain, gnn.transforms, strict=True):
            raw(lin).copy_(transform.weight[0])
            lin.parametrizations.weight[0].c.copy_(transform.c[0])
    assert len(plain) == 4  # depth 4: four hidden transforms
    for lin, expected in zip(plain, built_in, strict=True):
        torch.testing.assert_close(lin.weight, expected[0], rtol=0, atol=1e-6)
    expected_penalty = gnn.lam * regularisation(gnn.ortho_layers(), built_in)
    torch.testing.assert_close(orthogonality_regulariser(plain), expected_penalty[0])


@pytest.mark.parametrize("target, squared", [("cI", False), ("ones", True)])
def test_the_regulariser_is_lambda_times_the_summed_penalties_and_trains_weights_and_target(target, squared):
    model = GraphSAGE(IN, HIDDEN, 3, OUT)
    orthogonalise(model, lam=0.01, target=target, squared_norm=squared)
    conv = model.convs[1]
    targets = [conv.lin_l.parametrizations.weight[0].c, conv.lin_r.parametrizations.weight[0].c]
    if target == "ones":  # one d x d matrix per model, as the authors' gama
        assert targets[0] is targets[1] and targets[0].shape == (HIDDEN, HIDDEN)
        with torch.no_grad():
            targets[0].mul_(0.5)
    eye = torch.eye(HIDDEN)
    hand = 0.0
    for lin in (conv.lin_l, conv.lin_r):
        c = lin.parametrizations.weight[0].c
        gap = lin.weight @ lin.weight.T - (c if target == "ones" else c * eye)
        hand = hand + (gap.square().sum() if squared else gap.square().sum().sqrt())
    penalty = orthogonality_regulariser(model)
    torch.testing.assert_close(penalty, 0.01 * hand)
    penalty.backward()
    for lin in (conv.lin_l, conv.lin_r):
        assert raw(lin).grad.abs().max() > 0
    assert all(c.grad is not None and c.grad.abs().max() > 0 for c in targets)


def test_a_custom_selector_chooses_any_square_weights():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 3))
    names = orthogonalise(model, select=lambda module, owner, name, weight: (module, name) == ("3", "weight"))
    assert names == ["3.weight"] and not parametrize.is_parametrized(model[2])
    gin = GIN(IN, HIDDEN, 3, OUT)
    default = square_conv_weights(gin)
    with_output = orthogonalise(gin, select=lambda *a: default(*a) or a[::2] == ("convs.2.nn.lins.1", "weight"))
    assert with_output[-1] == "convs.2.nn.lins.1.weight" and len(with_output) == 4


@pytest.mark.parametrize("call, message", [
    (lambda: orthogonalise(APPNP(K=10, alpha=0.1)), "no weight to transform in APPNP"),
    (lambda: orthogonalise(GCN(IN, HIDDEN, 3, OUT), select=lambda *a: a[2] == "weight"),
     "convs.0.lin.weight is 64x1433: Ortho-GConv needs a square 2-D weight"),
    (lambda: orthogonalise(GCN(IN, HIDDEN, 3, OUT), beta=2), "beta=2 must be a number in [0, 1]"),
    (lambda: orthogonalise(GCN(IN, HIDDEN, 3, OUT), OrthoSettings(), steps=4), "unknown Ortho-GConv setting 'steps'"),
    (lambda: orthogonalise(GCN(IN, HIDDEN, 3, OUT), norm_groups=3), "norm_groups=3 must divide the width 64"),
    (lambda: orthogonalise(GCN(IN, HIDDEN, 3, OUT), profile="fast"), "unknown profile 'fast'"),
    (lambda: orthogonality_regulariser(GCN(IN, HIDDEN, 3, OUT)), "GCN has no Ortho-GConv weights"),
])
def test_bad_inputs_get_a_one_line_config_error(call, message):
    with pytest.raises(ConfigError) as error:
        call()
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_second_call_stacks_no_second_transform():
    model = GCN(IN, HIDDEN, 3, OUT)
    orthogonalise(model)
    with pytest.raises(ConfigError, match="no weight to transform in GCN"):
        orthogonalise(model)
    assert len(model.convs[1].lin.parametrizations.weight) == 1


def test_a_parametrized_pyg_gcn_trains_on_cora(cora):
    torch.manual_seed(0)
    model = GCN(IN, HIDDEN, 3, OUT, dropout=0.0, normalize=False)  # Cora's A_hat is already normalised
    orthogonalise(model, lam=0.01)
    coo = cora.adj.to_sparse_coo().coalesce()
    train = cora.train_mask[:, 0].bool()
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(5):
        optimiser.zero_grad()
        with parametrize.cached():  # one Newton iteration per weight for the pass and the penalty
            logits = model(cora.x, coo.indices(), edge_weight=coo.values())
            loss = F.cross_entropy(logits[train], cora.y[train]) + orthogonality_regulariser(model)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1, losses
