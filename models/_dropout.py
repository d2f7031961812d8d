"""Dropout for packed states: each pack slot's mask from its own random stream.

Drawing masks is a large share of a packed epoch (every slot draws its own), so :func:`dropout`
takes several decisions from each draw, and :func:`dropout_streams` gives each slot a stream of
its own, so a run's masks do not depend on the slots beside it. On a CPU a slot's stream is
numpy's SFC64 (four 16-bit decisions per 64-bit draw); on a GPU a torch generator (two 15-bit
decisions per 31-bit ``random_`` draw, where torch's Philox is fast and a CUDA graph can
register it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from orthotune.core import check

#: Random bits per dropout decision from a torch generator (a GPU's streams, and one-run models'
#: dropout from torch's default generator); ``p`` is applied as ``round(p * 2**15) / 2**15``.
DROPOUT_BITS = 15
#: Random bits per dropout decision from a CPU slot's SFC64 stream; ``p`` is applied as
#: ``round(p * 2**16) / 2**16``.
CPU_DROPOUT_BITS = 16

#: A slot's dropout stream: numpy's SFC64 on a CPU, a torch generator on a GPU.
Stream = torch.Generator | np.random.BitGenerator


def dropout(x: Tensor, p: float, training: bool, streams: Sequence[Stream] | None = None) -> Tensor:
    """``F.dropout``'s result: zero each element with probability ``p``, scale the rest.

    ``F.dropout`` (``bernoulli_``) and ``torch.rand`` draw one 32-bit number per element;
    here each draw gives several decisions (:data:`DROPOUT_BITS`, :data:`CPU_DROPOUT_BITS`),
    so ``p`` is rounded to a multiple of ``2**-15`` or ``2**-16`` (exact for 0.5; off by at most
    ``1.6e-5`` otherwise), from other random streams than torch's.

    ``streams``: one per pack slot (the leading dimension of ``x``; a 2-D ``x`` is one slot's),
    from :func:`dropout_streams`: each slot's mask is drawn from its own stream, so a run's
    masks, and its result, do not depend on the slots beside it. Without, one draw from torch's
    default generator covers the whole tensor.
    """
    if not training or p == 0.0:
        return x
    if streams is not None and not isinstance(streams[0], torch.Generator):
        keep = _keep_from_bit_generators(x, p, streams)
    else:
        keep = _keep_from_torch(x, p, streams)
    return x * keep.view_as(x).mul_(1.0 / (1.0 - p))


def _per_slot(x: Tensor, streams: Sequence[Stream]) -> int:
    slots, count = len(streams), x.numel()
    per_slot = count // slots
    check(per_slot * slots == count, f"{slots} dropout streams for a tensor of {count} elements")
    return per_slot


def _keep_from_torch(x: Tensor, p: float, streams: Sequence[torch.Generator] | None) -> Tensor:
    """1.0 where an element stays: two 15-bit uniforms from each 31-bit draw of ``random_`` (its
    low 16 bits and its high 15, each masked to 15 bits)."""
    if streams is None:
        count = x.numel()
        draws = torch.empty((count + 1) // 2, dtype=torch.int32, device=x.device).random_()
        uniform = draws.view(torch.int16)[:count]
    else:
        per_slot = _per_slot(x, streams)
        draws = torch.empty(len(streams), (per_slot + 1) // 2, dtype=torch.int32, device=x.device)
        for row, stream in zip(draws, streams):
            row.random_(generator=stream)
        uniform = draws.view(torch.int16)[:, :per_slot]
    # the comparison written straight into a float mask (1.0 or 0.0, then scaled in place): the
    # values of ``keep * scale`` without a boolean pass between (a mixed bool-float product took
    # 1.2-1.7x as long; a boolean mask made float, 21 against 10 ms on [64, 2708, 64], one thread)
    keep = torch.empty(uniform.shape, dtype=torch.get_default_dtype(), device=x.device)
    return torch.ge(uniform.bitwise_and_((1 << DROPOUT_BITS) - 1), round(p * (1 << DROPOUT_BITS)), out=keep)


def _keep_from_bit_generators(x: Tensor, p: float, streams: Sequence[np.random.BitGenerator]) -> Tensor:
    """1.0 where an element stays: its field of :func:`dropout_fields` is at least
    :func:`dropout_threshold`."""
    per_slot = _per_slot(x, streams)
    lanes = dropout_fields(streams, per_slot)[:, :per_slot]
    keep = torch.empty(lanes.shape, dtype=torch.get_default_dtype())
    threshold = dropout_threshold(p)
    if threshold > torch.iinfo(torch.int16).max:  # p within 2**-17 of 1: every element drops
        return keep.zero_()
    return torch.ge(lanes, threshold, out=keep)


def dropout_threshold(p: float) -> int:
    """The least signed 16-bit field of :func:`dropout_fields` that keeps its element at drop
    probability ``p``: ``round(p * 2**16) - 2**15`` (above the int16 range for ``p`` within
    ``2**-17`` of 1)."""
    return round(p * (1 << CPU_DROPOUT_BITS)) - (1 << (CPU_DROPOUT_BITS - 1))


def dropout_fields(streams: Sequence[np.random.BitGenerator], per_slot: int) -> Tensor:
    """``[slots, 4 * ceil(per_slot / 4)]`` signed 16-bit uniforms, a row per slot: the 16-bit
    fields (low first) of its bit generator's next 64-bit draws.

    SFC64's raw draws cost a third of torch's ``random_`` per decision (one thread, a Cora slot's
    ``[2708, 64]`` mask: 0.17 against 0.48 ms). They are copied into one buffer, so what reads
    them is one kernel whatever the pack size."""
    draws = torch.empty(len(streams), -(-per_slot // 4), dtype=torch.int64)
    host = draws.numpy().view(np.uint64)
    for row, stream in zip(host, streams):
        row[:] = stream.random_raw(row.shape[0])
    return draws.view(torch.int16)


#: Added to a run's seed for its dropout stream, so its masks are not drawn from the
#: sequence its initialisation drew from (the golden ratio's 64 bits).
DROPOUT_STREAM_OFFSET = 0x9E3779B97F4A7C15


def dropout_streams(seeds: Sequence[int], device: torch.device) -> list[Stream]:
    """One dropout stream per pack slot on ``device``, from each run's own seed: numpy's SFC64
    on a CPU, a torch generator elsewhere."""
    offset = [(seed + DROPOUT_STREAM_OFFSET) % 2**64 for seed in seeds]
    if device.type == "cpu":
        return [np.random.SFC64(seed) for seed in offset]
    return [torch.Generator(device=device).manual_seed(seed) for seed in offset]


def stream_device(stream: Stream) -> torch.device:
    """Where a stream's draws land (a bit generator's on the CPU)."""
    return stream.device if isinstance(stream, torch.Generator) else torch.device("cpu")
