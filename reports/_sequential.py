"""A test on fresh repeats that stays valid when one looks more than once: group-sequential
boundaries over a few planned looks (Pocock 1977; O'Brien & Fleming 1979; Bonferroni's split).

Confirmation retrains each stopped pair's two winners on repeats the search never used and
looks at the paired differences after n_1 < n_2 < ... < n_K of them (K = 2 or 3 planned
looks). Each look's paired t-test p-value is compared with that look's nominal level, set so
that the chance of crossing at *any* look is ``alpha`` under the null:

- ``bonferroni``: alpha / K at every look; valid under any dependence between the looks
  (the union bound), so exact-conservative with Student's t at any number of repeats;
- ``pocock``: one z boundary c at every look, P(max_j |Z_j| >= c) = alpha for the
  Brownian-motion statistics of a normal mean at information fractions t_j = n_j / n_K
  (corr(Z_i, Z_j) = sqrt(t_i / t_j)); a look's nominal level is 2 (1 - Phi(c)), applied to
  the t-test's p (the usual unknown-variance approximation; the A/A test measures it at 5,
  10 and 15 repeats);
- ``obrien-fleming``: boundaries C sqrt(t_K / t_j), strict early, near alpha at the end.

:func:`sequential_p` turns the looks taken into one p-value (the smallest alpha at which the
design would have rejected by then), which Holm takes unchanged. Checked against Jennison &
Turnbull's published constants (Tables 2.1 and 2.3) in ``tests/reports/test_sequential.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from orthotune.core import Registry, check

#: A boundary's shape: the weights w_j (boundary c_j = C w_j) at information fractions t.
Shape = Callable[[np.ndarray], np.ndarray]
BOUNDARIES: Registry[Shape | None] = Registry("group-sequential boundary")
BOUNDARIES.add("pocock", lambda t: np.ones_like(t))
BOUNDARIES.add("obrien-fleming", lambda t: np.sqrt(t[-1] / t))
BOUNDARIES.add("bonferroni", None)  # no z boundary: alpha / K per look


def crossing_probability(shape: str, looks: Sequence[float], c: float) -> float:
    """P(|Z_j| >= c w_j at some look j) under the null, for the boundary ``shape`` scaled by c
    at ``looks`` (repeats, or any increasing information)."""
    from scipy import stats  # here: `orthotune best` needs no SciPy

    t = np.asarray(looks, dtype=float)
    check(len(t) >= 1 and bool(np.all(np.diff(t) > 0)) and t[0] > 0,
          f"looks {list(looks)}: must be increasing and positive")
    correlation = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    normal = stats.multivariate_normal(np.zeros(len(t)), correlation, allow_singular=True, seed=0, abseps=1e-6,
                                       releps=1e-6)
    w = _weights(shape, t)
    return 1.0 - float(normal.cdf(c * w, lower_limit=-c * w))


def _weights(shape: str, t: np.ndarray) -> np.ndarray:
    weights = BOUNDARIES.get(shape)
    check(weights is not None, f"boundary {shape!r} has no z boundary (its nominal level is alpha / K)")
    return weights(t)


def z_boundaries(shape: str, looks: Sequence[float], alpha: float = 0.05) -> np.ndarray:
    """Two-sided z boundaries c_j = C w_j at ``looks``, with C such that P(|Z_j| >= c_j for
    some j) = ``alpha`` under the null."""
    from scipy import optimize

    scale = optimize.brentq(lambda c: crossing_probability(shape, looks, c) - alpha, 0.5, 10.0, xtol=1e-6)
    return scale * _weights(shape, np.asarray(looks, dtype=float))


def nominal_levels(shape: str, looks: Sequence[float], alpha: float = 0.05) -> np.ndarray:
    """Each look's two-sided nominal level: a look rejects when its p-value is at most this."""
    from scipy import special

    if BOUNDARIES.get(shape) is None:
        return np.full(len(looks), alpha / len(looks))
    return special.erfc(z_boundaries(shape, looks, alpha) / np.sqrt(2.0))


def sequential_p(shape: str, looks: Sequence[float], pvalues: Sequence[float]) -> float:
    """The design's p-value after the looks taken (``pvalues``, the first len(pvalues) of the
    planned ``looks``): the smallest alpha whose design rejects at one of them. A look's p_j
    crosses the boundary scaled by C = z_j / w_j (z_j its two-sided normal quantile), which
    the design of level P(crossing at C) just reaches. Under the null P(sequential_p <= alpha)
    = alpha wherever the analyst stops, at or before the last planned look."""
    from scipy import special

    check(0 < len(pvalues) <= len(looks), f"{len(pvalues)} p-values for {len(looks)} planned looks")
    given = np.asarray(pvalues, dtype=float)
    taken = given[np.isfinite(given)]
    if not len(taken):
        return float("nan")
    if BOUNDARIES.get(shape) is None:
        return float(min(1.0, len(looks) * taken.min()))
    w = _weights(shape, np.asarray(looks, dtype=float))[: len(given)][np.isfinite(given)]
    z = np.sqrt(2.0) * special.erfcinv(np.maximum(taken, 1e-300))
    return min(crossing_probability(shape, looks, scale) for scale in (z / w).tolist())
