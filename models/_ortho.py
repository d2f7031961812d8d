"""Ortho-GConv's orthogonalisation: the one implementation every backbone uses.

Three parts (see ``docs`` in the README): hybrid initialisation ``Q = beta P + (1-beta) I``
(once at initialisation, or in every forward pass with ``hybrid="reparam"``), the
differentiable Newton iteration that maps ``Q`` to a near-orthogonal ``W`` in every forward
pass, and the regulariser ``lambda * ||W W^T - target||_F`` with a trainable target
(``c I`` with a scalar ``c``, or a ``d x d`` matrix initialised to all ones).

Orientation. The authors' code (KaiGuo20/Ortho-GConv, ``Ortho_Trans``) stores a weight as
``[in, out]`` and orthogonalises its *rows*: it centres each row across the outputs, groups
rows (input features), and forms ``W = B Z`` with ``B ~ (Z Z^T)^-1/2``. orthotune stores
``[out, in]`` (``y = x W^T``), so every function here works on ``q.mT``: centring and norm
groups act on the same axis as the authors'. Without centring and groups the side makes no
difference (``p(Q Q^T) Q = Q p(Q^T Q)`` for the polynomial ``p`` Newton's iteration builds).

Everything here works on a leading *pack* dimension so that several models (the repeats of
one config, or several configs) can be trained at once as one batched model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from orthotune.core import OrthoSettings, check

#: Numerical guard for the covariance in the authors' (ONI-style) centred variant.
CENTRED_EPS = 1e-5

#: Spectral bounding before Newton's iteration (``OrthoSettings.bound``).
BOUNDS = ("covariance", "frobenius")


def fan_out_uniform_(tensor: Tensor, fan_out: int, generator: torch.Generator | None = None) -> Tensor:
    """Fill ``tensor`` uniform in ``+-1/sqrt(fan_out)``, as the authors' layers draw weights and biases."""
    bound = 1.0 / math.sqrt(fan_out)
    with torch.no_grad():
        return tensor.uniform_(-bound, bound, generator=generator)


def hybrid_init_(
    weight: Tensor, beta: float, generator: torch.Generator | None = None
) -> Tensor:
    """Fill a square ``weight`` in place with ``beta * Glorot + (1 - beta) * I``."""
    check(weight.shape[-1] == weight.shape[-2], "hybrid init needs a square weight")
    with torch.no_grad():
        torch.nn.init.xavier_uniform_(weight, generator=generator)
        weight.mul_(beta).add_(
            torch.eye(weight.shape[-1], dtype=weight.dtype, device=weight.device),
            alpha=1.0 - beta,
        )
    return weight


def init_ortho_weight_(
    weight: Tensor, settings: OrthoSettings, generator: torch.Generator | None = None
) -> Tensor:
    """Initialise one square Ortho-GConv weight in place as ``settings.hybrid`` asks.

    ``init``: the weight is ``Q = beta * Glorot + (1 - beta) * I`` and is trained as is.
    ``reparam``: the weight is ``P``, drawn as the authors' code draws it (uniform in
    ``+-1/sqrt(d)``); :func:`mix_identity` forms ``Q`` from it in every forward pass.
    """
    if settings.hybrid == "init":
        return hybrid_init_(weight, settings.beta, generator)
    return fan_out_uniform_(weight, weight.shape[-1], generator)


def mix_identity(p: Tensor, beta: Tensor) -> Tensor:
    """``beta P + (1 - beta) I`` for ``p`` ``[..., d, d]`` and ``beta`` broadcastable to
    ``p``'s batch shape (one beta per pack): the ``reparam`` hybrid, differentiable in P."""
    beta = beta.to(p).unsqueeze(-1).unsqueeze(-1)
    eye = torch.eye(p.shape[-1], dtype=p.dtype, device=p.device)
    return beta * p + (1.0 - beta) * eye


def newton_orthogonalise(
    q: Tensor,
    steps: int | Tensor,
    centre_rows: bool = False,
    norm_groups: int = 1,
    bound: str = "covariance",
    max_steps: int | None = None,
) -> Tensor:
    """Map ``q`` (``[..., d_out, d_in]``) toward an orthogonal matrix by Newton's iteration.

    ``steps`` is ``T``: an int, or a tensor broadcastable to ``q``'s batch shape giving
    each batched matrix its own ``T`` (the iteration runs to the largest and freezes each
    matrix after its own last step, so packing does not change any result). With a tensor,
    ``max_steps`` is its largest value known on the host: reading it off a device tensor
    would make every forward pass wait for the GPU.
    ``bound`` scales ``Q`` before the iteration: ``covariance`` ``Q / sqrt(||Q Q^T||_F)``
    (the authors' code; near-orthogonal at T = 4) or ``frobenius`` ``Q / ||Q||_F`` (the
    paper's text; far from orthogonal at T <= 6). ``centre_rows`` and ``norm_groups`` act
    as in the authors' code, on the input axis of ``q`` (see the module docstring).
    """
    check(bound in BOUNDS, f"bound={bound!r} must be one of {', '.join(BOUNDS)}")
    z = q.mT  # the authors' [in, out] orientation: rows are input features
    if norm_groups > 1:
        rows = z.shape[-2]
        check(rows % norm_groups == 0, f"norm_groups={norm_groups} must divide {rows}")
        grouped = z.reshape(*z.shape[:-2], norm_groups, rows // norm_groups, z.shape[-1])
        if isinstance(steps, Tensor):
            steps = steps.unsqueeze(-1)
        return _orthogonalise_rows(grouped, steps, centre_rows, bound, max_steps).reshape(z.shape).mT
    return _orthogonalise_rows(z, steps, centre_rows, bound, max_steps).mT


def _orthogonalise_rows(z: Tensor, steps: int | Tensor, centre: bool, bound: str,
                        max_steps: int | None = None) -> Tensor:
    """``B_T Z_hat`` with ``B_T ~ S^-1/2``, ``S`` the bounded row covariance of ``z``
    (``[..., r, c]``), optionally row-centred with the authors' ``eps I``.

    A tall ``z`` (``r > c``, e.g. an input projection orthogonalised once) runs the
    iteration on the ``c x c`` Gram matrix instead: ``p(Z Z^T + eps I) Z = Z p(Z^T Z + eps I)``
    for any polynomial ``p``, and the ``r - c`` extra eigenvalues ``eps`` of the large
    covariance are added to its norm, so the result is the same at a fraction of the cost.

    Without centring the iteration runs on ``W`` itself (:func:`_polar_iterates`: two
    products a step instead of three, and no final ``B_T Z_hat``). Centring adds ``eps I``
    to the covariance, which ``W W^T`` does not carry, so that variant keeps ``B``'s
    iteration (:func:`_newton_inverse_sqrt`).
    """
    if centre:
        z = z - z.mean(dim=-1, keepdim=True)
    rows, cols = z.shape[-2:]
    wide = rows <= cols
    gram = z @ z.mT if wide else z.mT @ z
    eps = CENTRED_EPS if centre else 0.0
    if eps:
        gram = gram + eps * torch.eye(gram.shape[-1], dtype=z.dtype, device=z.device)
    if bound == "covariance":
        extra = (rows - gram.shape[-1]) * eps**2  # the large covariance's eps eigenvalues
        scale = (torch.linalg.matrix_norm(gram).square() + extra).sqrt()
    else:
        scale = torch.linalg.matrix_norm(z).square()
    scale = scale.unsqueeze(-1).unsqueeze(-1)
    z_hat, m = z / scale.sqrt(), gram / scale
    if not eps:  # the polar form works on the wide side: W_t = S_t W_{t-1}
        w = _polar(z_hat if wide else z_hat.mT, m, steps, max_steps)
        return w if wide else w.mT
    b = _newton_inverse_sqrt(m, steps, max_steps)
    return b @ z_hat if wide else z_hat @ b


def _polar(w0: Tensor, m: Tensor, steps: int | Tensor, max_steps: int | None = None) -> Tensor:
    """``W_T = B_T W_0`` for ``M = W_0 W_0^T`` (given: the bounded covariance), by Newton's
    iteration on ``W`` itself: ``X_t = W_{t-1} W_{t-1}^T`` (``X_1 = M``),
    ``S_t = (3 I - X_t) / 2``, ``W_t = S_t W_{t-1}``.

    The same polynomial in ``M`` times ``W_0`` as ``B_T W_0`` from :func:`_newton_inverse_sqrt`
    in exact arithmetic (``X_t = B_{t-1} M B_{t-1}``, its ``Z Y``), and as stable: it is the
    Newton-Schulz iteration for the polar factor, which corrects its own rounding. It needs
    ``2T - 1`` products where ``B``'s needs ``3T - 2`` (its ``3T - 3`` and ``B_T W_0``), and
    its backward pass (:class:`_PolarBackward`) ``3T - 1`` where autograd's through ``B`` ran
    ``6T - 4``: at T = 4, 18 products where there were 30.

    A tensor ``steps`` gives each matrix its own ``T`` (see :func:`newton_orthogonalise`);
    forward and backward then run to the largest and leave a matrix unchanged after its own
    last step, so a matrix's result and gradient are the same bits in a pack as alone.
    """
    per_matrix = None
    if isinstance(steps, Tensor):
        per_matrix = steps.to(m.device).expand(w0.shape[:-2]).reshape(-1, 1, 1)
        steps = max_steps if max_steps is not None else int(steps.max())  # the latter syncs on a GPU
    if steps > 0 and torch.is_grad_enabled() and (w0.requires_grad or m.requires_grad):
        return _PolarBackward.apply(w0, m, steps, per_matrix)
    return _polar_iterates(w0, m, steps, per_matrix)[0]


def _polar_iterates(w0: Tensor, m: Tensor, steps: int, per_matrix: Tensor | None = None,
                    ) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
    """``W_T`` (shaped as ``w0``) and each step's ``(W_{t-1}, S_t)``, the matrices as one flat
    batch ``[n, r, c]`` (batched products see the same matrices, and the backward pass's
    ``baddbmm`` wants three axes); ``per_matrix`` (``[n, 1, 1]``) freezes each matrix after
    its own ``T``."""
    three_halves = 1.5 * torch.eye(m.shape[-1], dtype=m.dtype, device=m.device)
    w, m, iterates = w0.reshape(-1, *w0.shape[-2:]), m.reshape(-1, *m.shape[-2:]), []
    for t in range(1, steps + 1):
        x = m if t == 1 else w @ w.mT
        s = torch.add(three_halves, x, alpha=-0.5)
        iterates.append((w, s))
        next_w = s @ w
        w = next_w if per_matrix is None else torch.where(t <= per_matrix, next_w, w)
    return w.view(w0.shape), iterates


class _PolarBackward(torch.autograd.Function):
    """:func:`_polar_iterates` with the backward pass written out.

    Reverse of ``W_t = S_t W_{t-1}``, ``S_t = 1.5 I - 0.5 X_t``, ``X_t = W_{t-1} W_{t-1}^T``
    (``X_1 = M``, an input) from ``t = T`` down to 1: ``dS = dW W^T``, then
    ``dW_{t-1} = S^T dW - 0.5 (dS + dS^T) W_{t-1}``, three products a step (two at ``t = 1``,
    whose ``-0.5 dS`` is ``M``'s gradient); a matrix past its own ``T`` passes ``dW`` on
    unchanged. One autograd node instead of ``4T`` (autograd's per-operation bookkeeping was
    most of the iteration's cost at Cora's sizes).
    """

    @staticmethod
    def forward(ctx, w0: Tensor, m: Tensor, steps: int, per_matrix: Tensor | None) -> Tensor:
        w, iterates = _polar_iterates(w0, m, steps, per_matrix)
        # intermediates, not inputs or outputs: kept on ctx
        ctx.iterates, ctx.per_matrix, ctx.shapes = iterates, per_matrix, (w0.shape, m.shape)
        return w

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None, None]:
        w_shape, m_shape = ctx.shapes
        grad, grad_m, per_matrix = grad.reshape(-1, *w_shape[-2:]), None, ctx.per_matrix
        for t, (w, s) in reversed(list(enumerate(ctx.iterates, start=1))):
            grad_s = grad @ w.mT  # W_t = S_t W_{t-1}
            back = s.mT @ grad
            if t == 1:  # X_1 = M
                grad_m = grad_s * -0.5
            else:  # X_t = W_{t-1} W_{t-1}^T, S_t = 1.5 I - 0.5 X_t
                back = torch.baddbmm(back, grad_s + grad_s.mT, w, alpha=-0.5)
            if per_matrix is None:
                grad = back
            else:  # a matrix past its own T took no step t
                active = t <= per_matrix
                grad = torch.where(active, back, grad)
                if t == 1:
                    grad_m = torch.where(active, grad_m, 0.0)
        return grad.view(w_shape), grad_m.view(m_shape), None, None


def _newton_inverse_sqrt(m: Tensor, steps: int | Tensor, max_steps: int | None = None) -> Tensor:
    """``B_T`` of ``B_0 = I, B_t = (3 B - B^3 M) / 2``: an approximation of ``M^-1/2``.

    Computed in the coupled (Newton-Schulz) form ``Y_0 = M, Z_0 = I, S = (3 I - Z Y) / 2,
    Y <- Y S, Z <- S Z``: the same polynomial in ``M`` in exact arithmetic (``Z_t = B_t``,
    ``Y_t = M B_t``), but stable. The uncoupled form amplifies rounding once it has
    converged: in float32 (d = 64, beta = 0.4, covariance bounding) its singular values
    reach 1.7 at T = 10 and overflow by T = 20.

    Products that cannot change the result are skipped: with ``Z_0 = I`` the first step is
    ``S = (3 I - M) / 2, Z_1 = S`` (``I @ X`` is exact in floating point), and the last
    ``Y`` is never read. ``3T - 3`` matrix products instead of ``3T`` (9 at T = 4), the
    same values to the bit, and the backward pass saves twice as many.

    With one ``T`` for every matrix and a gradient to compute, the backward pass is
    :class:`_NewtonBackward`'s: the same ``2 (3T - 3)`` products as autograd's, without
    its per-operation bookkeeping (most of the iteration's cost at Cora's sizes).
    """
    if isinstance(steps, int) and steps > 0 and m.requires_grad and torch.is_grad_enabled():
        return _NewtonBackward.apply(m, steps)
    return _newton_iterates(m, steps, max_steps)[0]


def _newton_iterates(m: Tensor, steps: int | Tensor, max_steps: int | None = None,
                     ) -> tuple[Tensor, list[tuple[Tensor | None, Tensor, Tensor]]]:
    """``B_T`` and each step's ``(Z_{t-1}, Y_{t-1}, S_t)`` (``Z_0 = I`` as None)."""
    eye = torch.eye(m.shape[-1], dtype=m.dtype, device=m.device)
    per_matrix = None
    if isinstance(steps, Tensor):
        per_matrix = steps.reshape(*steps.shape, 1, 1).to(m.device)
        steps = max_steps if max_steps is not None else int(steps.max())  # the latter syncs on a GPU
    y, z = m, None  # z None: Z = I, not yet materialised
    iterates = []
    for t in range(1, steps + 1):
        s = 1.5 * eye - 0.5 * (y if z is None else z @ y)
        iterates.append((z, y, s))
        next_z = s if z is None else s @ z
        next_y = y @ s if t < steps else y
        if per_matrix is not None:  # a matrix past its own T keeps its last iterate
            active = t <= per_matrix
            next_z = torch.where(active, next_z, eye if z is None else z)
            next_y = torch.where(active, next_y, y)
        y, z = next_y, next_z
    return (eye.expand_as(m) if z is None else z), iterates


class _NewtonBackward(torch.autograd.Function):
    """:func:`_newton_iterates` at one ``T >= 1``, with the backward pass written out.

    Reverse of ``X_t = Z_{t-1} Y_{t-1}``, ``S_t = 1.5 I - 0.5 X_t``, ``Z_t = S_t Z_{t-1}``,
    ``Y_t = Y_{t-1} S_t`` from ``t = T`` down to 1 (``Z_0 = I``, ``Y_0 = M``, no ``Y_T``):
    two products per forward product, each as autograd computes it, and every gradient a
    sum of at most two terms (addition commutes), so the gradient is autograd's to the bit.
    The matrices run as one flat batch ``[-1, d, d]`` (batched products see the same matrices).
    """

    @staticmethod
    def forward(ctx, m: Tensor, steps: int) -> Tensor:
        z, iterates = _newton_iterates(m.reshape(-1, *m.shape[-2:]), steps)
        ctx.iterates = iterates  # intermediates, not inputs or outputs: kept on ctx
        return z.view(m.shape)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        shape = grad.shape
        grad_z, grad_y = grad.reshape(-1, *shape[-2:]), None
        for z, y, s in reversed(ctx.iterates):
            grad_s = grad_z if z is None else grad_z @ z.mT  # Z_t = S_t Z_{t-1} (S_1 itself)
            if grad_y is not None:  # Y_t = Y_{t-1} S_t (no Y_T)
                grad_s = grad_s + y.mT @ grad_y
                grad_y = grad_y @ s.mT
            grad_x = grad_s * -0.5  # S_t = 1.5 I - 0.5 X_t
            if z is None:  # X_1 = Y_0 = M
                grad_y = grad_x if grad_y is None else grad_y + grad_x
                break
            grad_z = s.mT @ grad_z + grad_x @ y.mT  # X_t = Z_{t-1} Y_{t-1}
            grad_y = z.mT @ grad_x if grad_y is None else grad_y + z.mT @ grad_x
        return grad_y.view(shape), None


#: The axis the authors' weight holds as rows, for :func:`orthogonalise_once_`: ``in`` for
#: their GraphConvolution weights (``[in, out]``), ``out`` for an ``nn.Linear`` (``[out, in]``).
ROW_AXES = ("in", "out")


def orthogonalise_once_(weight: Tensor, steps: int, settings: OrthoSettings, rows: str = "in") -> Tensor:
    """Replace ``weight`` (``[out, in]``, any shape) in place by its orthogonalised form.

    The authors orthogonalise the input projection once at initialisation (its own ``T``,
    ``input_T``); it is then trained freely. Centring and bounding follow ``settings``;
    their input-side ``group1`` is 1 in every script we know of, so there are no groups.
    Their ``Ortho_Trans`` centres each row of the weight as they store it: ``rows="in"``
    for their GCN and JKNet input layers (``[in, out]``, rows are input features, as
    :func:`newton_orthogonalise` works), ``rows="out"`` for their GCNII input layer, an
    ``nn.Linear`` (``[out, in]``: rows are output features). Without centring the axis
    makes no difference. ``steps == 0`` leaves the weight untouched (the switch is off).
    """
    check(rows in ROW_AXES, f"rows={rows!r} must be one of {', '.join(ROW_AXES)}")
    if steps == 0:
        return weight
    with torch.no_grad():
        if rows == "in":
            weight.copy_(newton_orthogonalise(weight, steps, settings.centre_rows, 1, settings.bound))
        else:  # newton_orthogonalise takes [out, in] and centres along out: hand it the transpose
            weight.copy_(newton_orthogonalise(weight.mT, steps, settings.centre_rows, 1, settings.bound).mT)
    return weight


def ortho_target(settings: OrthoSettings, packs: int, d: int) -> Tensor:
    """The regulariser's initial target per pack: ``c = 1`` (``cI``, ``[packs]``) or the
    all-ones ``d x d`` matrix (``ones``, ``[packs, d, d]``, the authors' ``gama``)."""
    return torch.ones(packs) if settings.target == "cI" else torch.ones(packs, d, d)


def orthogonality_penalty(w: Tensor, c: Tensor, squared: bool = False) -> Tensor:
    """``||W W^T - target||_F`` per batched matrix (its square with ``squared``).

    ``c`` is a scalar per matrix (shape ``w.shape[:-2]``; target ``c I``) or a matrix per
    matrix (shape ``w.shape``; target ``c`` itself, as the authors' ``W^T W - gama``).
    """
    return _Penalty.apply(w, c, squared)


class _Penalty(torch.autograd.Function):
    """:func:`orthogonality_penalty` with its backward pass written out. For the gap
    ``G = W W^T - target`` and ``U = dL/dG``, the weight's gradient is ``(U + U^T) W``: one
    product where autograd's, through ``W W^T``, ran two (``U W`` and ``U^T W``)."""

    @staticmethod
    def forward(ctx, w: Tensor, c: Tensor, squared: bool) -> Tensor:
        matrix = c.dim() == w.dim()
        gap = w @ w.mT
        if matrix:
            gap = gap - c
        else:
            gap.diagonal(dim1=-2, dim2=-1).sub_(c.unsqueeze(-1).to(gap.dtype))  # in place: no eye to build
        value = gap.square().sum((-2, -1)) if squared else torch.linalg.matrix_norm(gap)
        ctx.save_for_backward(w, gap, value)
        ctx.squared, ctx.matrix, ctx.c_shape = squared, matrix, c.shape
        return value

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        w, gap, value = ctx.saved_tensors
        # d||G||/dG = G / ||G|| (0 at G = 0, as autograd's norm); d||G||^2/dG = 2 G
        scale = 2.0 * grad if ctx.squared else torch.where(value > 0, grad / value, 0.0)
        unit = gap * scale.unsqueeze(-1).unsqueeze(-1)
        grad_w = (unit + unit.mT) @ w
        grad_c = -unit if ctx.matrix else -unit.diagonal(dim1=-2, dim2=-1).sum(-1)
        return grad_w, grad_c.sum_to_size(ctx.c_shape), None


def distance_to_orthogonality(w: Tensor) -> float:
    """``max |W W^T - I|``: how far ``w`` is from orthogonal (0 when orthogonal)."""
    eye = torch.eye(w.shape[-2], dtype=w.dtype, device=w.device)
    return float((w @ w.mT - eye).abs().max())


def check_packable(settings: Sequence[OrthoSettings]) -> None:
    """Models can share one packed module only if their structural switches agree."""
    structures = {s.structure() for s in settings}
    check(
        len(structures) == 1,
        f"packed Ortho-GConv settings must share their switches (OrthoSettings.structure()), "
        f"got {sorted(structures)}",
    )
