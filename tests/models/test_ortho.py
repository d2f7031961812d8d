import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from orthotune.core import ConfigError, OrthoSettings
from orthotune.models._layers import PackedLinear
from orthotune.models._ortho import (
    _newton_inverse_sqrt,
    _newton_iterates,
    distance_to_orthogonality,
    hybrid_init_,
    newton_orthogonalise,
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
        if func.overloadpacket in (torch.ops.aten.mm, torch.ops.aten.bmm):
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
