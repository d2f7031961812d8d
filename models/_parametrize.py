"""Ortho-GConv on any module's weights, as a ``torch.nn.utils.parametrize`` parametrization.

:func:`orthogonalise` puts the transform of orthotune's own Ortho-GConv layers on chosen
weights of any ``nn.Module`` (a PyG model included): the raw weight is the trained
parameter, and every read of ``owner.weight`` returns ``W``, computed by the functions of
``models/_ortho.py`` (the one implementation), exactly as :class:`~models._layers.PackedLinear`
computes it: ``Q`` is the raw weight (``hybrid="init"``; hybrid-initialised once here) or
``beta P + (1 - beta) I`` (``reparam``), and ``W`` is ``Q`` after the bounded Newton iteration
(``Q`` itself with ``transform="none"``). :func:`orthogonality_regulariser` is the backbones'
``lambda * sum_l ||W(l) W(l)^T - target(l)||_F`` (squared with ``squared_norm``).

Orientation. A weight is read as ``[out, in]`` (``y = x W^T``), as ``torch.nn.Linear``,
PyG's ``Linear`` and orthotune store it; that is the default selector's only kind of weight.
A custom selector may pick a weight used the other way round (``x @ W``): without
``centre_rows`` and ``norm_groups`` the side makes no difference (see ``models/_ortho.py``).

Only square weights: the hybrid initialisation mixes in ``I`` and the target is ``c I`` or
a ``d x d`` matrix. ``_ortho.py`` can orthogonalise a rectangular weight (its input
projection, once), but Ortho-GConv's per-pass transform, hybrid and regulariser are square.

Reading ``W`` runs Newton's iteration; within ``torch.nn.utils.parametrize.cached()`` a
training step (forward pass and regulariser) computes each ``W`` once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.dense.linear import Linear as PygLinear

from orthotune.core import ConfigError, OrthoSettings, check, profile_values
from orthotune.models._ortho import (
    init_ortho_weight_,
    mix_identity,
    newton_orthogonalise,
    ortho_target,
    orthogonality_penalty,
)

#: ``select(module_name, module, parameter_name, weight)``: parametrize this weight?
Selector = Callable[[str, nn.Module, str, Tensor], bool]

#: The keyword overrides :func:`orthogonalise` takes: :class:`OrthoSettings`' fields.
ORTHO_FIELDS = tuple(f.name for f in dataclasses.fields(OrthoSettings))

#: What the default selector looks for, as its error message says it.
DEFAULT_RULE = ("square weights of the Linear layers inside its PyG MessagePassing convolutions, "
                "of width hidden_channels where the model declares it")


class OrthoGConvWeight(nn.Module):
    """The parametrization ``W = Ortho(Q)`` of one square weight, and its regulariser target.

    ``c`` is the target: a scalar (``cI``, one per weight) or a ``d x d`` matrix (``ones``,
    one per width, shared by the weights of one :func:`orthogonalise` call as the backbones
    share the authors' ``gama``); a buffer when ``target_trainable`` is false.
    """

    def __init__(self, settings: OrthoSettings, target: Tensor) -> None:
        super().__init__()
        self.settings = settings
        # float64 so that a double-precision model mixes with the exact beta (as PackedLinear)
        self.register_buffer("beta", torch.tensor(settings.beta, dtype=torch.float64), persistent=False)
        if settings.target_trainable:
            self.c = target if isinstance(target, nn.Parameter) else nn.Parameter(target)
        else:
            self.register_buffer("c", target)

    def forward(self, weight: Tensor) -> Tensor:
        settings = self.settings
        q = mix_identity(weight, self.beta) if settings.hybrid == "reparam" else weight
        if settings.transform == "none":  # the paper's ablation: no bounding, no iteration
            return q
        return newton_orthogonalise(q, settings.T, settings.centre_rows, settings.norm_groups, settings.bound)

    def penalty(self, weight: Tensor) -> Tensor:
        """``||W W^T - target||_F`` of the transformed ``weight`` (squared with ``squared_norm``)."""
        return orthogonality_penalty(weight, self.c, self.settings.squared_norm)

    def extra_repr(self) -> str:
        s = self.settings
        return f"T={s.T}, beta={s.beta}, lam={s.lam}, structure={s.structure()}"


def orthogonalise(
    module: nn.Module,
    settings: OrthoSettings | None = None,
    select: Selector | None = None,
    *,
    profile: str | None = None,
    generator: torch.Generator | None = None,
    **overrides: object,
) -> list[str]:
    """Put Ortho-GConv on the weights of ``module`` that ``select`` picks; their names.

    ``settings`` (default ``OrthoSettings()``) or a ``profile`` (``default``, ``paper``,
    ``official``: their Ortho-GConv switches), then ``overrides`` (``T=8, beta=0.2``, any
    :class:`OrthoSettings` field). ``input_T`` is not read: it concerns a backbone's input
    projection, orthogonalised once, which is the caller's to do.
    The default selector: :data:`DEFAULT_RULE`. ``select(module_name, module, name, weight)``
    sees every initialised parameter not yet parametrized; every chosen one must be square.
    Each chosen weight is hybrid-initialised once (``init_ortho_weight_``: ``beta Glorot +
    (1 - beta) I``, or ``P`` for ``reparam``), overwriting its values; ``generator`` draws it.
    Undo with ``torch.nn.utils.parametrize.remove_parametrizations``. A state dict of the
    result loads into a module orthogonalised the same way. A later ``reset_parameters``
    (PyG's) fills the transformed copy, not the raw weight: orthogonalise again instead.
    """
    settings = _settings(settings, profile, overrides)
    chosen = list(_chosen(module, select or square_conv_weights(module)))
    if not chosen:
        rule = "select chose none" if select is not None else f"the default selector takes {DEFAULT_RULE}"
        raise ConfigError(f"orthogonalise found no weight to transform in {type(module).__name__}: {rule}; "
                          f"pass select= to choose weights (lazy ones need a forward pass first)")
    shared: dict[int, nn.Parameter | Tensor] = {}  # the ``ones`` target per width
    names = []
    for name, owner, attr, weight in chosen:
        _check_weight(name, weight, settings)
        init_ortho_weight_(weight, settings, generator)
        parametrize.register_parametrization(owner, attr, OrthoGConvWeight(settings, _target(settings, weight, shared)))
        names.append(name)
    return names


def square_conv_weights(module: nn.Module) -> Selector:
    """The default selector for ``module``: :data:`DEFAULT_RULE`.

    A weight qualifies when it is the ``weight`` of a ``torch.nn.Linear`` or PyG ``Linear``
    (stored ``[out, in]``) that is, or lies inside, a ``MessagePassing`` module (GCNConv's
    ``lin``, GATConv's ``lin``/``lin_src``/``lin_dst``, SAGEConv's ``lin_l``/``lin_r``,
    GINConv's MLP), and is square; where ``module`` declares an int ``hidden_channels`` (PyG's
    ``BasicGNN`` models), also of that width, so an output MLP's ``out x out`` weight is not
    taken for a hidden one.
    """
    inside = {id(m) for conv in module.modules() if isinstance(conv, MessagePassing) for m in conv.modules()}
    width = getattr(module, "hidden_channels", None)
    width = width if isinstance(width, int) and not isinstance(width, bool) else None

    def select(module_name: str, owner: nn.Module, name: str, weight: Tensor) -> bool:
        return (id(owner) in inside and isinstance(owner, (nn.Linear, PygLinear)) and name == "weight"
                and weight.dim() == 2 and weight.shape[0] == weight.shape[1]
                and (width is None or weight.shape[0] == width))

    return select


def orthogonalised_weights(module: nn.Module) -> dict[str, Tensor]:
    """The transformed ``W`` of every Ortho-GConv weight of ``module``, by qualified name."""
    return {name: getattr(owner, attr) for name, owner, attr, _ in _parametrized(module)}


def orthogonality_regulariser(module: nn.Module) -> Tensor:
    """``lambda * sum_l ||W(l) W(l)^T - target(l)||_F`` over ``module``'s Ortho-GConv weights.

    As the backbones compute it: one term per weight (squared with ``squared_norm``),
    summed, then scaled by ``lam`` (weights parametrized with different ``lam`` are summed
    per ``lam``). Refused for a module without any: a loss that silently adds zero hides
    a forgotten :func:`orthogonalise`.
    """
    found = list(_parametrized(module))
    check(bool(found), f"{type(module).__name__} has no Ortho-GConv weights: call orthogonalise on it first")
    by_lam: dict[float, list[Tensor]] = {}
    for _, owner, attr, parametrization in found:
        by_lam.setdefault(parametrization.settings.lam, []).append(parametrization.penalty(getattr(owner, attr)))
    return sum(lam * torch.stack(terms).sum(0) for lam, terms in by_lam.items())


def _settings(settings: OrthoSettings | None, profile: str | None, overrides: dict[str, object]) -> OrthoSettings:
    unknown = sorted(set(overrides) - set(ORTHO_FIELDS))
    if unknown:
        raise ConfigError(f"unknown Ortho-GConv setting {unknown[0]!r}; valid: {', '.join(ORTHO_FIELDS)}")
    check(settings is None or profile is None, f"pass settings or profile={profile!r}, not both")
    if settings is not None:
        check(isinstance(settings, OrthoSettings), f"settings={settings!r} must be an OrthoSettings")
        return dataclasses.replace(settings, **overrides)
    base = {k: v for k, v in profile_values(profile).items() if k in ORTHO_FIELDS} if profile else {}
    return OrthoSettings(**{**base, **overrides})


def _chosen(module: nn.Module, select: Selector) -> Iterator[tuple[str, nn.Module, str, Tensor]]:
    """``(qualified name, owner, name, weight)`` of each selected parameter.

    Parametrized weights live in their owner's ``parametrizations`` (not among its own
    parameters), so a second call never stacks a transform on one; lazy parameters have
    no shape yet and are skipped.
    """
    for prefix, owner in list(module.named_modules()):
        if isinstance(owner, (parametrize.ParametrizationList, OrthoGConvWeight)):
            continue
        for name, weight in list(owner.named_parameters(recurse=False)):
            if isinstance(weight, nn.parameter.UninitializedParameter):
                continue
            if select(prefix, owner, name, weight):
                yield (f"{prefix}.{name}" if prefix else name), owner, name, weight


def _parametrized(module: nn.Module) -> Iterator[tuple[str, nn.Module, str, OrthoGConvWeight]]:
    """``(qualified name, owner, name, parametrization)`` of each Ortho-GConv weight."""
    for prefix, owner in module.named_modules():
        if not parametrize.is_parametrized(owner):
            continue
        for name, chain in owner.parametrizations.items():
            for parametrization in chain:
                if isinstance(parametrization, OrthoGConvWeight):
                    yield (f"{prefix}.{name}" if prefix else name), owner, name, parametrization


def _check_weight(name: str, weight: Tensor, settings: OrthoSettings) -> None:
    shape = "x".join(map(str, weight.shape))
    check(weight.dim() == 2 and weight.shape[0] == weight.shape[1],
          f"{name} is {shape}: Ortho-GConv needs a square 2-D weight (its hybrid init mixes in I, its target is cI)")
    check(weight.is_floating_point(), f"{name} is {weight.dtype}: Ortho-GConv needs a floating-point weight")
    check(weight.shape[0] % settings.norm_groups == 0,
          f"norm_groups={settings.norm_groups} must divide the width {weight.shape[0]} of {name}")


def _target(settings: OrthoSettings, weight: Tensor, shared: dict[int, nn.Parameter | Tensor]) -> Tensor:
    """The initial regulariser target of one weight: its own ``c = 1``, or its width's shared
    all-ones matrix (``ones``)."""
    d = weight.shape[0]
    if settings.target == "ones" and d in shared:
        return shared[d]
    target = ortho_target(settings, 1, d)[0].to(weight)
    target = nn.Parameter(target) if settings.target_trainable else target
    if settings.target == "ones":
        shared[d] = target
    return target
