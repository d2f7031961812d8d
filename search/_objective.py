"""What trials are ranked by: the objective every report carries, ASHA's time attribute and
its rung score (the objective with ties broken by validation loss)."""

from __future__ import annotations

import math
from collections.abc import Sequence

#: ASHA's time attribute; the objective every report carries is core's ``OBJECTIVE``.
TIME_ATTR = "epoch"
#: What ASHA ranks trials by: the objective, ties broken by validation loss (``rung_score``).
RUNG_SCORE = "rung_score"
#: Weight of the tie-break: below the smallest step between two distinct objectives (a mean
#: over R repeats of accuracies over n validation items moves in steps of 1 / (n R), at least
#: 1e-6 for every dataset and repeat count orthotune runs), so it never reorders those.
_TIE_WEIGHT = 1e-7


def rung_score(objective: float, min_val_losses: Sequence[float]) -> float:
    """``objective`` with ties broken by the lower mean of each repeat's lowest validation loss.

    A deep model predicts the majority class for its first tens of epochs, so at ASHA's early
    rungs whole cells tie on validation accuracy; ASHA stops only trials strictly below its
    cutoff, so on a tie it stops none and the early rungs save nothing (measured on Cora
    GCN-8: no trial stopped before epoch 90). The loss still tells them apart. It is squashed
    into [0, 1) so the tie-break stays below any step of the objective; no loss yet (or a
    non-finite one) counts as the worst.
    """
    finite = [v for v in min_val_losses if math.isfinite(v)]
    loss = sum(finite) / len(finite) if finite and len(finite) == len(min_val_losses) else math.inf
    squashed = loss / (1.0 + loss) if math.isfinite(loss) and loss >= 0 else 1.0
    return objective - _TIE_WEIGHT * squashed
