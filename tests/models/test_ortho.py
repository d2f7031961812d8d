import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from orthotune.core import ConfigError, OrthoSettings
from orthotune.models._layers import PackedLinear
from orthotune.models._ortho import (
    _newton_inverse_sqrt,
    _newton_iterates,
    _polar,
    distance_to_orthogonality,
    hybrid_init_,
    newton_orthogonalise,
    orthogonality_penalty,
)


def exact_reference(q: torch.Tensor) -> torch.Tensor:
    """M^-1/2 Q_hat by eigendecomposition."""
    q_hat = q / torch.linalg.matrix_norm(q)
    vals, vecs = torch.linalg.eigh(q_hat @ q_hat.T)
    return vecs @ torch.diag(vals.rsqrt()) @ vecs.T @ q_hat


def test_newton_converges_to_exact_reference_where_stable():
    q = hybrid_init_(torch.empty(16, 16, dtype=torch.float64), beta=0.0)
    reference = exact_reference(q)
    errors = [float((newton_orthogonalise(q, t) - reference).abs().max()) for t in (2, 6, 10, 14)]
    assert errors[-1] < 1e-6
    assert errors == sorted(errors, reverse=True)


def test_distance_to_orthogonality_falls_as_T_grows():
    torch.manual_seed(0)
    q = hybrid_init_(torch.empty(64, 64, dtype=torch.float64), beta=0.4)
    distances = [distance_to_orthogonality(newton_orthogonalise(q, t)) for t in (1, 2, 4, 6, 10)]
    assert all(a > b for a, b in zip(distances, distances[1:]))
    assert distances[-1] < 0.05


def test_beta_zero_is_identity_start():
    w = hybrid_init_(torch.empty(8, 8), beta=0.0)
    assert torch.equal(w, torch.eye(8))


def test_per_matrix_steps_equal_separate_iterations():
    torch.manual_seed(1)
    q = torch.randn(3, 8, 8, dtype=torch.float64)
    batched = newton_orthogonalise(q, torch.tensor([1, 3, 5]))
    for p, t in enumerate((1, 3, 5)):
        torch.testing.assert_close(batched[p], newton_orthogonalise(q[p], t))


def coupled_reference(m: torch.Tensor, steps: int) -> torch.Tensor:
    """The coupled Newton-Schulz iteration written out in full: three products a step."""
    eye = torch.eye(m.shape[-1], dtype=m.dtype)
    y, z = m, eye.expand_as(m)
    for _ in range(steps):
        s = 1.5 * eye - 0.5 * (z @ y)
        y, z = y @ s, s @ z
    return z


class MatmulCounter(TorchDispatchMode):
    """Counts the matrix products torch runs (forward and backward)."""

    def __init__(self) -> None:
        super().__init__()
        self.products = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in (torch.ops.aten.mm, torch.ops.aten.bmm, torch.ops.aten.baddbmm, torch.ops.aten.addmm):
            self.products += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("steps", [0, 1, 2, 4, 7])
def test_skipped_products_change_no_bit_of_the_iteration(steps):
    torch.manual_seed(steps)
    q = torch.randn(5, 2, 16, 16)
    m = q @ q.mT / torch.linalg.matrix_norm(q @ q.mT).unsqueeze(-1).unsqueeze(-1)
    assert torch.equal(_newton_inverse_sqrt(m, steps), coupled_reference(m, steps))
    per_pack = _newton_inverse_sqrt(m, torch.tensor([steps, max(steps - 2, 0)]), steps)
    assert torch.equal(per_pack[:, 0], coupled_reference(m[:, 0], steps))
    assert torch.equal(per_pack[:, 1], coupled_reference(m[:, 1], max(steps - 2, 0)))


def test_the_iteration_runs_3T_minus_3_products_forward():
    m = torch.eye(8).expand(3, 8, 8).clone().requires_grad_()
    with MatmulCounter() as forward:
        z = _newton_inverse_sqrt(m, 4)
    with MatmulCounter() as backward:
        z.sum().backward()
    assert forward.products == 9 and 0 < backward.products <= 2 * 9


def test_centred_variant_is_rank_deficient_and_groups_orthogonalise_separately():
    torch.manual_seed(2)
    q = torch.randn(8, 8, dtype=torch.float64)
    centred = newton_orthogonalise(q, 6, centre_rows=True)
    assert torch.linalg.svdvals(centred).min() < 1e-6
    # groups split the input axis (columns of an [out, in] weight), as the authors' code
    # splits the rows of its [in, out] weight
    grouped = newton_orthogonalise(q, 4, norm_groups=2)
    torch.testing.assert_close(grouped[:, :4], newton_orthogonalise(q[:, :4], 4))
    assert not torch.allclose(grouped[:4], newton_orthogonalise(q[:4], 4))


@pytest.mark.parametrize("bound", ["covariance", "frobenius"])
def test_iteration_stays_orthogonal_long_after_converging_in_float32(bound):
    """The uncoupled iteration blew up in float32 from T = 10 (covariance bounding)."""
    torch.manual_seed(3)
    q = hybrid_init_(torch.empty(64, 64), beta=0.4)
    for steps in (10, 30, 100):
        w = newton_orthogonalise(q, steps, bound=bound)
        assert torch.isfinite(w).all()
        if steps >= 30:
            assert distance_to_orthogonality(w) < 1e-4


def test_gradients_reach_c_and_weight():
    layer = PackedLinear(8, 8, packs=2, ortho=[OrthoSettings(T=3)] * 2)
    out = layer(torch.randn(5, 8)).sum() + layer.regularisation().sum()
    out.backward()
    assert layer.c.grad is not None and bool((layer.c.grad != 0).all())
    assert layer.weight.grad is not None and bool((layer.weight.grad != 0).any())


@pytest.mark.parametrize(
    "kwargs, message",
    [(dict(T=-1), "T=-1"), (dict(beta=1.5), "beta=1.5"), (dict(lam=-1.0), "lam=-1.0")],
)
def test_settings_reject_out_of_range(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        OrthoSettings(**kwargs)


def _bounded_covariance(shape, dtype, seed):
    torch.manual_seed(seed)
    q = torch.randn(*shape, dtype=dtype)
    m = q @ q.mT
    return m / torch.linalg.matrix_norm(m).unsqueeze(-1).unsqueeze(-1)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("steps", [1, 2, 4, 7])
def test_written_out_newton_backward_is_autograds_to_the_bit(steps, dtype):
    m0 = _bounded_covariance((3, 2, 16, 16), dtype, steps)
    grad = torch.randn_like(m0)
    written, plain = m0.clone().requires_grad_(), m0.clone().requires_grad_()
    out = _newton_inverse_sqrt(written, steps)
    reference = _newton_iterates(plain, steps)[0]  # every operation recorded by autograd
    assert torch.equal(out, reference)
    (out * grad).sum().backward()
    (reference * grad).sum().backward()
    assert torch.equal(written.grad, plain.grad)


def test_written_out_newton_backward_passes_gradcheck():
    m = _bounded_covariance((2, 6, 6), torch.float64, 0).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: _newton_inverse_sqrt(x, 4), (m,))


def _graph_nodes(tensor: torch.Tensor) -> int:
    seen, stack = set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


def test_the_iteration_is_one_autograd_node():
    """Autograd's bookkeeping per operation was most of the iteration's backward cost."""
    m = _bounded_covariance((3, 8, 8), torch.float32, 1).requires_grad_()
    assert _graph_nodes(_newton_inverse_sqrt(m, 4)) == 2  # the iteration and m's leaf


def _through_b(q: torch.Tensor, steps: int) -> torch.Tensor:
    """``B_T Z_hat`` by the coupled iteration on ``B``, every operation through autograd: the
    form the polar iteration replaced, as a reference for it."""
    z = q.mT
    gram = z @ z.mT
    scale = torch.linalg.matrix_norm(gram).unsqueeze(-1).unsqueeze(-1)
    return (_newton_iterates(gram / scale, steps)[0] @ (z / scale.sqrt())).mT


@pytest.mark.parametrize("steps", [1, 2, 4, 7])
@pytest.mark.parametrize("shape", [(3, 2, 16, 16), (16, 16), (2, 24, 16), (2, 16, 24)])
def test_the_polar_iteration_is_b_times_z_to_float64_rounding(steps, shape):
    """Forward and gradient equal the iteration on ``B`` (square, wide and tall weights)."""
    torch.manual_seed(steps)
    q0 = torch.randn(*shape, dtype=torch.float64)
    grad = torch.randn(*shape, dtype=torch.float64)
    polar, reference = q0.clone().requires_grad_(), q0.clone().requires_grad_()
    out = newton_orthogonalise(polar, steps)
    expected = _through_b(reference, steps) if shape[-2] <= shape[-1] else _through_b(reference.mT, steps).mT
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    (out * grad).sum().backward()
    (expected * grad).sum().backward()
    torch.testing.assert_close(polar.grad, reference.grad, rtol=0, atol=1e-10)


def test_the_polar_iteration_is_more_orthogonal_in_float32_than_the_b_form():
    """The iteration on ``W`` corrects its own rounding: in float32 it lands closer to the
    float64 result than ``B_T Z_hat`` does (d = 64, beta = 0.4, T = 4)."""
    torch.manual_seed(0)
    q = hybrid_init_(torch.empty(8, 64, 64, dtype=torch.float64), beta=0.4)
    exact = newton_orthogonalise(q, 4)
    polar_error = (newton_orthogonalise(q.float(), 4).double() - exact).abs().max()
    b_error = (_through_b(q.float(), 4).double() - exact).abs().max()
    assert polar_error < b_error


@pytest.mark.parametrize("steps", [1, 4])
def test_the_polar_backward_passes_gradcheck(steps):
    q = hybrid_init_(torch.empty(2, 6, 6, dtype=torch.float64), beta=0.5).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: newton_orthogonalise(x, steps), (q,))


def test_the_polar_iteration_runs_2T_products_forward_and_3T_plus_1_backward():
    """``Z Z^T`` and ``2T - 1`` for the iteration; ``3T - 1`` for its backward and two for
    ``Z Z^T``'s (the form on ``B`` ran 10 and 20 at T = 4)."""
    q = hybrid_init_(torch.empty(3, 8, 8), beta=0.4).requires_grad_()
    with MatmulCounter() as forward:
        w = newton_orthogonalise(q, 4)
    with MatmulCounter() as backward:
        w.sum().backward()
    assert (forward.products, backward.products) == (8, 13)


def test_the_polar_iteration_is_one_autograd_node():
    w0 = hybrid_init_(torch.empty(3, 8, 8), beta=0.4)
    m = (w0 @ w0.mT).requires_grad_()
    assert _graph_nodes(_polar(w0.requires_grad_(), m, 4)) == 3  # the iteration and the two leaves


def _penalty_reference(w: torch.Tensor, c: torch.Tensor, squared: bool) -> torch.Tensor:
    """``||W W^T - target||_F`` through autograd (the form the written-out one replaced)."""
    gram = w @ w.mT
    eye = torch.eye(w.shape[-2], dtype=w.dtype)
    gap = gram - c if c.dim() == w.dim() else gram - c.unsqueeze(-1).unsqueeze(-1) * eye
    norm = torch.linalg.matrix_norm(gap)
    return norm.square() if squared else norm


@pytest.mark.parametrize("squared", [False, True])
@pytest.mark.parametrize("target", ["cI", "ones"])
def test_the_penalty_equals_autograds_and_passes_gradcheck(squared, target):
    torch.manual_seed(4)
    w = torch.randn(3, 2, 6, 6, dtype=torch.float64)
    c = torch.rand(3, 2, dtype=torch.float64) if target == "cI" else torch.rand(3, 2, 6, 6, dtype=torch.float64)
    grad = torch.randn(3, 2, dtype=torch.float64)
    written = (w.clone().requires_grad_(), c.clone().requires_grad_())
    plain = (w.clone().requires_grad_(), c.clone().requires_grad_())
    value = orthogonality_penalty(*written, squared)
    reference = _penalty_reference(*plain, squared)
    torch.testing.assert_close(value, reference, rtol=1e-14, atol=0)
    (value * grad).sum().backward()
    (reference * grad).sum().backward()
    for a, b in zip(written, plain, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(lambda x, y: orthogonality_penalty(x, y, squared), plain)


def test_the_penalty_of_an_exact_target_has_zero_gradient_not_nan():
    w = torch.eye(4).expand(2, 4, 4).clone().requires_grad_()
    c = torch.ones(2, requires_grad=True)
    orthogonality_penalty(w, c).sum().backward()
    assert torch.equal(w.grad, torch.zeros_like(w)) and torch.equal(c.grad, torch.zeros_like(c))


def test_the_penalty_takes_one_scalar_target_for_one_matrix():
    """The parametrization's shape: an unbatched weight and a 0-d ``c``."""
    w = torch.randn(5, 5, requires_grad=True)
    c = torch.tensor(1.0, requires_grad=True)
    orthogonality_penalty(w, c).backward()
    assert c.grad.shape == () and w.grad.shape == (5, 5)
