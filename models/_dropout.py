"""Dropout for packed states: each pack slot's mask from its own random stream.

Drawing masks is a large share of a packed epoch (Ortho-GConv's packs draw one per slot), so
:func:`dropout` takes two decisions from each 31-bit draw; :func:`dropout_streams` gives each
slot a generator of its own, so a run's masks do not depend on the slots beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from orthotune.core import check

#: Random bits per dropout decision; ``p`` is applied as ``round(p * 2**15) / 2**15``.
DROPOUT_BITS = 15


def dropout(x: Tensor, p: float, training: bool, streams: Sequence[torch.Generator] | None = None) -> Tensor:
    """``F.dropout``'s result: zero each element with probability ``p``, scale the rest.

    Ortho-GConv's packs draw a mask per pack, so drawing masks is a large share of an
    epoch. ``F.dropout`` (``bernoulli_``) and ``torch.rand`` draw one 32-bit number per
    element; here each 31-bit draw of ``random_`` gives two 15-bit uniforms (the low
    16 bits and the high 15, each masked to 15 bits), about twice as fast end to end.
    The drop probability is ``p`` rounded to a multiple of ``2**-15`` (exact for 0.5;
    off by at most ``1.6e-5`` otherwise); a different random stream from torch's.

    ``streams``: one generator per pack slot (the leading dimension of ``x``; a 2-D ``x``
    is one slot's): each slot's mask is drawn from its own stream, so a run's masks, and
    its result, do not depend on the slots beside it. Without, one draw from torch's
    default generator covers the whole tensor.
    """
    if not training or p == 0.0:
        return x
    count = x.numel()
    if streams is None:
        draws = torch.empty((count + 1) // 2, dtype=torch.int32, device=x.device).random_()
        uniform = draws.view(torch.int16)[:count]
    else:
        slots = len(streams)
        per_slot = count // slots
        check(per_slot * slots == count, f"{slots} dropout streams for a tensor of {count} elements")
        draws = torch.empty(slots, (per_slot + 1) // 2, dtype=torch.int32, device=x.device)
        for row, stream in zip(draws, streams):
            row.random_(generator=stream)
        uniform = draws.view(torch.int16)[:, :per_slot]
    # the comparison written straight into a float mask (1.0 or 0.0, then scaled in place): the
    # values of ``keep * scale`` without a boolean pass between (a mixed bool-float product took
    # 1.2-1.7x as long; a boolean mask made float, 21 against 10 ms on [64, 2708, 64], one thread)
    keep = torch.empty(uniform.shape, dtype=torch.get_default_dtype(), device=x.device)
    torch.ge(uniform.bitwise_and_((1 << DROPOUT_BITS) - 1), round(p * (1 << DROPOUT_BITS)), out=keep)
    return x * keep.view_as(x).mul_(1.0 / (1.0 - p))


#: Added to a run's seed for its dropout stream, so its masks are not drawn from the
#: sequence its initialisation drew from (the golden ratio's 64 bits).
DROPOUT_STREAM_OFFSET = 0x9E3779B97F4A7C15


def dropout_streams(seeds: Sequence[int], device: torch.device) -> list[torch.Generator]:
    """One dropout generator per pack slot on ``device``, from each run's own seed."""
    return [torch.Generator(device=device).manual_seed((seed + DROPOUT_STREAM_OFFSET) % 2**64) for seed in seeds]
