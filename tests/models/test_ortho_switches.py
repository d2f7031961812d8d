"""Issue 13's orthogonalisation switches: bound, transform, hybrid, target, input_T."""

import dataclasses

import pytest
import torch

from orthotune.core import PROFILES, ConfigError, OrthoSettings
from orthotune.models import BACKBONES
from orthotune.models._layers import PackedLinear, effective_weights, regularisation, share_targets
from orthotune.models._ortho import distance_to_orthogonality, hybrid_init_, newton_orthogonalise, orthogonalise_once_

ORTHO_FIELDS = {f.name for f in dataclasses.fields(OrthoSettings)}


def profile(name: str, **values) -> OrthoSettings:
    """The profile's switches that a model sees (layout/selection belong to training)."""
    switches = {k: v for k, v in PROFILES[name].items() if k in ORTHO_FIELDS}
    return OrthoSettings(**switches, **values)


def authors_transform(weight_a: torch.Tensor, steps: int, groups: int) -> torch.Tensor:
    """A direct re-implementation of the authors' ``Ortho_Trans`` on their ``[in, out]``
    layout: centre each row, group rows, ``B_T`` by the uncoupled iteration, ``B Zc``."""
    rows = weight_a.shape[0]
    out = []
    for z in weight_a.reshape(groups, rows // groups, -1):
        zc = z - z.mean(dim=1, keepdim=True)
        s = zc @ zc.T + 1e-5 * torch.eye(zc.shape[0], dtype=z.dtype)
        norm = torch.linalg.matrix_norm(s)
        s = s / norm
        b = torch.eye(zc.shape[0], dtype=z.dtype)
        for _ in range(steps):
            b = 1.5 * b - 0.5 * (b @ b @ b @ s)
        out.append(b @ zc / norm.sqrt())
    return torch.cat(out).reshape(weight_a.shape)


def singular_values(bound: str, steps: int, seed: int = 0) -> torch.Tensor:
    q = hybrid_init_(torch.empty(64, 64), 0.4, torch.Generator().manual_seed(seed))
    return torch.linalg.svdvals(newton_orthogonalise(q, steps, bound=bound))


@pytest.mark.parametrize("seed", range(8))
def test_default_transform_is_near_orthogonal_at_T4(seed):
    """d = 64, beta = 0.4, T = 4, float32. Measured over seeds 0-7: max |W W^T - I| is
    0.30-0.36 (covariance, the default) against 0.75-0.76 (frobenius); the median
    singular value 0.93-0.94 against 0.52-0.54."""
    q = hybrid_init_(torch.empty(64, 64), 0.4, torch.Generator().manual_seed(seed))
    default = newton_orthogonalise(q, OrthoSettings().T)  # the default bound
    paper = newton_orthogonalise(q, 4, bound=profile("paper").bound)
    assert OrthoSettings().T == 4 and OrthoSettings().bound == "covariance"
    assert distance_to_orthogonality(default) < 0.4 < 0.7 < distance_to_orthogonality(paper)
    assert torch.linalg.svdvals(default).median() > 0.9
    assert torch.linalg.svdvals(paper).median() < 0.6


def test_covariance_bound_is_closer_to_orthogonal_at_every_small_T():
    medians = {b: [float(singular_values(b, t).median()) for t in (1, 2, 4, 6)]
               for b in ("covariance", "frobenius")}
    for b, values in medians.items():
        assert values == sorted(values), b
    assert all(c > f for c, f in zip(medians["covariance"], medians["frobenius"], strict=True))
    assert all(float(singular_values(b, t).max()) <= 1.0 + 1e-5
               for b in medians for t in (1, 2, 4, 6))


@pytest.mark.parametrize("hybrid", ["init", "reparam"])
def test_transform_none_leaves_W_untouched(hybrid):
    settings = OrthoSettings(transform="none", hybrid=hybrid, beta=0.3, T=0)
    layer = PackedLinear(8, 8, packs=1, bias=False, ortho=[settings])
    weight = layer.effective_weight()
    if hybrid == "init":
        assert weight is layer.weight  # no bounding at all, not even at T = 0
    else:
        torch.testing.assert_close(weight[0], 0.3 * layer.weight[0] + 0.7 * torch.eye(8))
    bounded = PackedLinear(8, 8, packs=1, bias=False, ortho=[dataclasses.replace(settings, transform="newton")])
    bounded.load_state_dict(layer.state_dict())
    assert not torch.allclose(bounded.effective_weight(), weight)  # T = 0 Newton still bounds


@pytest.mark.parametrize("groups", [1, 2])
def test_official_profile_equals_the_authors_transform(groups):
    """Same P, same input: the layer with the ``official`` switches computes what the
    authors' GraphConvolution_Ortho computes (``x @ Ortho_Trans(beta P + (1-beta) I)``)."""
    settings = profile("official", T=4, beta=0.6, norm_groups=groups)
    assert (settings.bound, settings.centre_rows, settings.hybrid) == ("covariance", True, "reparam")
    torch.manual_seed(groups)
    p_a = torch.rand(16, 16, dtype=torch.float64) - 0.5  # the authors' [in, out] weight
    x = torch.randn(10, 16, dtype=torch.float64)
    layer = PackedLinear(16, 16, packs=1, bias=False, ortho=[settings]).double()
    layer.weight.data[0] = p_a.T  # orthotune stores [out, in]
    w_a = authors_transform(0.6 * p_a + 0.4 * torch.eye(16, dtype=torch.float64), 4, groups)
    torch.testing.assert_close(layer(x)[0], x @ w_a)
    # regulariser: sum over layers of ||t^T t - gama||^2 with one shared gama of ones
    other = PackedLinear(16, 16, packs=1, bias=False, ortho=[settings]).double()
    other.weight.data[0] = p_a  # any second layer
    share_targets([layer, other])
    weights = effective_weights([layer, other])
    gama = torch.ones(16, 16, dtype=torch.float64)
    expected = sum(((w.T @ w - gama) ** 2).sum()
                   for w in (w_a, authors_transform(0.6 * p_a.T + 0.4 * torch.eye(16, dtype=torch.float64), 4, groups)))
    torch.testing.assert_close(regularisation([layer, other], weights)[0], expected)


def test_ones_target_is_one_shared_all_ones_matrix_per_pack():
    settings = profile("official")
    layers = [PackedLinear(8, 8, packs=3, ortho=[settings] * 3) for _ in range(2)]
    assert layers[0].c.shape == (3, 8, 8) and bool((layers[0].c == 1).all())
    assert layers[0].c is not layers[1].c
    share_targets(layers)
    assert layers[1].c is layers[0].c
    model = torch.nn.ModuleList(layers)
    assert sum(1 for p in model.parameters() if p.shape == (3, 8, 8)) == 3  # 2 weights + 1 target
    penalty = regularisation(layers, effective_weights(layers))
    penalty.sum().backward()
    assert layers[0].c.grad is not None and bool((layers[0].c.grad != 0).any())


def test_squared_norm_squares_the_penalty():
    plain, squared = (PackedLinear(8, 8, ortho=[OrthoSettings(squared_norm=s)]) for s in (False, True))
    squared.load_state_dict(plain.state_dict())
    torch.testing.assert_close(squared.regularisation(), plain.regularisation().square())


@pytest.mark.parametrize("target", ["cI", "ones"])
def test_frozen_target_gets_no_gradient(target):
    layer = PackedLinear(8, 8, packs=2, ortho=[OrthoSettings(target=target, target_trainable=False)] * 2)
    assert all(p is not layer.c for p in layer.parameters())
    (layer(torch.randn(4, 8)).sum() + layer.regularisation().sum()).backward()
    assert layer.c.grad is None and not layer.c.requires_grad
    assert layer.weight.grad is not None


def test_reparam_trains_P_through_the_mix():
    layer = PackedLinear(8, 8, ortho=[OrthoSettings(hybrid="reparam", beta=0.5)])
    torch.testing.assert_close(
        layer.effective_weight(),
        newton_orthogonalise(0.5 * layer.weight + 0.5 * torch.eye(8), 4),
    )
    layer(torch.randn(4, 8)).sum().backward()
    assert bool((layer.weight.grad != 0).any())


def test_input_projection_orthogonalised_once_like_the_authors():
    """A tall input projection (in = 40 features > hidden = 8) runs on the small Gram side
    and still equals the authors' transform of their [in, hidden] weight."""
    settings = profile("official")
    torch.manual_seed(5)
    weight = torch.randn(8, 40, dtype=torch.float64)
    expected = authors_transform(weight.T.clone(), settings.input_T, 1).T
    torch.testing.assert_close(orthogonalise_once_(weight, settings.input_T, settings), expected)
    off = dataclasses.replace(settings, input_T=0)
    layers = [PackedLinear(40, 8, packs=2, init_ortho=[s, off]) for s in (settings, off)]
    generators = lambda: [torch.Generator().manual_seed(s) for s in (1, 2)]  # noqa: E731
    for layer in layers:
        layer.reset_parameters(generators())
    plain = PackedLinear(40, 8, packs=2)
    plain.reset_parameters(generators())
    torch.testing.assert_close(layers[0].weight[1], plain.weight[1])  # input_T = 0: untouched
    torch.testing.assert_close(layers[1].weight, plain.weight)
    once = orthogonalise_once_(plain.weight.data[0].clone(), settings.input_T, settings)
    torch.testing.assert_close(layers[0].weight[0], once)


def test_gcnii_input_projection_is_centred_along_the_authors_linear_rows():
    """The authors' GCNII input layer is an ``nn.Linear`` (weight ``[out, in]``), so their
    one-off Ortho_Trans centres each output row; their GCN/JKNet input weights are
    ``[in, out]``. Each backbone's input layer follows its own (issue 22, item 5)."""
    settings = profile("official")
    torch.manual_seed(6)
    weight = torch.randn(8, 40, dtype=torch.float64)
    linear_rows = authors_transform(weight.clone(), settings.input_T, 1)
    torch.testing.assert_close(orthogonalise_once_(weight.clone(), settings.input_T, settings, "out"), linear_rows)
    assert not torch.allclose(linear_rows, authors_transform(weight.T.clone(), settings.input_T, 1).T)
    seeds = (3,)
    for name, rows in (("gcnii", "out"), ("gcn", "in"), ("jknet", "in")):
        model = BACKBONES.get(name)(40, 8, 3, 4, ortho=[settings], seeds=seeds, layout="official")
        plain = BACKBONES.get(name)(40, 8, 3, 4, seeds=seeds, layout="official")
        expected = orthogonalise_once_(plain.input.weight.data[0].clone(), settings.input_T, settings, rows)
        torch.testing.assert_close(model.input.weight[0], expected, msg=name)


@pytest.mark.parametrize("name", ["default", "paper", "official"])
def test_packed_profiles_equal_lone_models(name):
    settings = [profile(name, T=2, beta=0.3), profile(name, T=5, beta=0.7)]
    packed = BACKBONES.get("gcn")(12, 8, 3, 4, dropout=0.0, ortho=settings, seeds=(3, 4))
    x, adj = torch.randn(6, 12), torch.eye(6).to_sparse_csr()
    both = packed.run(x, adj)
    for p, (setting, seed) in enumerate(zip(settings, (3, 4), strict=True)):
        lone = BACKBONES.get("gcn")(12, 8, 3, 4, dropout=0.0, ortho=[setting], seeds=(seed,)).run(x, adj)
        torch.testing.assert_close(both.logits[:, p], lone.logits[:, 0], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(both.penalty[p], lone.penalty[0], rtol=1e-4, atol=1e-6)


def test_switches_must_agree_within_a_pack():
    with pytest.raises(ConfigError, match="switches"):
        PackedLinear(8, 8, packs=2, ortho=[OrthoSettings(), OrthoSettings(bound="frobenius")])
