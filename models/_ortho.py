"""Ortho-GConv's orthogonalisation: the one implementation every backbone uses.

Three parts (see ``docs`` in the README): hybrid initialisation ``Q = beta P + (1-beta) I``,
the differentiable Newton iteration that maps ``Q`` to a near-orthogonal ``W`` in every
forward pass, and the regulariser ``lambda * ||W W^T - c I||_F`` with a trainable ``c``.

Everything here works on a leading *pack* dimension so that several models (the repeats of
one config, or several configs) can be trained at once as one batched model.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from orthotune.core import OrthoSettings, check

#: Numerical guard for the covariance in the authors' (ONI-style) variant.
CENTRED_EPS = 1e-5


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


def newton_orthogonalise(
    q: Tensor,
    steps: int | Tensor,
    centre_rows: bool = False,
    norm_groups: int = 1,
) -> Tensor:
    """Map ``q`` (``[..., d_out, d_in]``) toward an orthogonal matrix by Newton's iteration.

    ``steps`` is ``T``: an int, or a tensor broadcastable to ``q``'s batch shape giving
    each batched matrix its own ``T`` (the iteration runs to the largest and freezes each
    matrix after its own last step, so packing does not change any result).
    """
    if norm_groups > 1:
        rows = q.shape[-2]
        check(rows % norm_groups == 0, f"norm_groups={norm_groups} must divide {rows}")
        grouped = q.reshape(*q.shape[:-2], norm_groups, rows // norm_groups, q.shape[-1])
        if isinstance(steps, Tensor):
            steps = steps.unsqueeze(-1)
        w = newton_orthogonalise(grouped, steps, centre_rows)
        return w.reshape(q.shape)
    if centre_rows:
        z = q - q.mean(dim=-1, keepdim=True)
        eye = torch.eye(q.shape[-2], dtype=q.dtype, device=q.device)
        cov = z @ z.mT + CENTRED_EPS * eye
        scale = torch.linalg.matrix_norm(cov).unsqueeze(-1).unsqueeze(-1)
        b = _newton_inverse_sqrt(cov / scale, steps)
        return b @ z / scale.sqrt()
    scale = torch.linalg.matrix_norm(q).unsqueeze(-1).unsqueeze(-1)
    q_hat = q / scale
    b = _newton_inverse_sqrt(q_hat @ q_hat.mT, steps)
    return b @ q_hat


def _newton_inverse_sqrt(m: Tensor, steps: int | Tensor) -> Tensor:
    """``B_T`` of ``B_0 = I, B_t = (3 B - B^3 M) / 2``: an approximation of ``M^-1/2``."""
    b = torch.eye(m.shape[-1], dtype=m.dtype, device=m.device).expand_as(m)
    if isinstance(steps, Tensor):
        per_matrix = steps.reshape(*steps.shape, 1, 1).to(m.device)
        for t in range(1, int(steps.max()) + 1):
            b = torch.where(t <= per_matrix, 0.5 * (3.0 * b - b @ b @ b @ m), b)
        return b
    for _ in range(steps):
        b = 0.5 * (3.0 * b - b @ b @ b @ m)
    return b


def orthogonality_penalty(w: Tensor, c: Tensor, squared: bool = False) -> Tensor:
    """``||W W^T - c I||_F`` per batched matrix (``c`` broadcast over the batch)."""
    eye = torch.eye(w.shape[-2], dtype=w.dtype, device=w.device)
    gap = w @ w.mT - c.unsqueeze(-1).unsqueeze(-1) * eye
    norm = torch.linalg.matrix_norm(gap)
    return norm.square() if squared else norm


def distance_to_orthogonality(w: Tensor) -> float:
    """``max |W W^T - I|``: how far ``w`` is from orthogonal (0 when orthogonal)."""
    eye = torch.eye(w.shape[-2], dtype=w.dtype, device=w.device)
    return float((w @ w.mT - eye).abs().max())


def check_packable(settings: Sequence[OrthoSettings]) -> None:
    """Models can share one packed module only if their structural switches agree."""
    structures = {s.structure() for s in settings}
    check(
        len(structures) == 1,
        f"packed Ortho-GConv settings must share centre_rows/norm_groups/squared_norm, "
        f"got {sorted(structures)}",
    )
