"""The group-sequential confirmation test against published boundary constants (Jennison &
Turnbull 2000, Tables 2.1 and 2.3: two-sided alpha 0.05, equally spaced looks) and the
sequential p-value's agreement with the boundaries it inverts."""

from __future__ import annotations

import numpy as np
import pytest

from orthotune.core import ConfigError
from orthotune.reports._sequential import nominal_levels, sequential_p, z_boundaries

#: Pocock's constant C_P(K, 0.05) and O'Brien-Fleming's C_B(K, 0.05) for K looks.
POCOCK = {2: 2.178, 3: 2.289, 4: 2.361, 5: 2.413}
OBRIEN_FLEMING = {2: 1.977, 3: 2.004, 4: 2.024, 5: 2.040}


@pytest.mark.parametrize("looks", [2, 3])
def test_pocock_boundaries_are_the_published_ones(looks: int) -> None:
    assert z_boundaries("pocock", range(1, looks + 1)) == pytest.approx([POCOCK[looks]] * looks, abs=1.5e-3)


@pytest.mark.slow
@pytest.mark.parametrize("looks", [2, 3])
def test_obrien_fleming_boundaries_are_the_published_ones(looks: int) -> None:
    expected = [OBRIEN_FLEMING[looks] * np.sqrt(looks / j) for j in range(1, looks + 1)]
    assert z_boundaries("obrien-fleming", range(1, looks + 1)) == pytest.approx(expected, abs=1.5e-3)
    # the three-look values the background doc quotes: 3.471 / 2.454 / 2.004
    if looks == 3:
        assert z_boundaries("obrien-fleming", [5, 10, 15]) == pytest.approx([3.471, 2.454, 2.004], abs=1.5e-3)


def test_bonferroni_splits_alpha_over_the_looks() -> None:
    assert nominal_levels("bonferroni", [5, 10, 15]) == pytest.approx([0.05 / 3] * 3)
    assert sequential_p("bonferroni", [5, 10, 15], [0.3, 0.01]) == pytest.approx(0.03)
    assert sequential_p("bonferroni", [5, 10, 15], [0.9]) == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["pocock", "obrien-fleming"])
def test_the_sequential_p_is_alpha_exactly_at_the_boundary(shape: str) -> None:
    """A p-value equal to a look's nominal level at alpha gives back alpha at any look."""
    levels = nominal_levels(shape, [5, 10, 15], 0.05)
    for j in range(3):
        taken = [0.9] * j + [float(levels[j])]
        assert sequential_p(shape, [5, 10, 15], taken) == pytest.approx(0.05, abs=2e-4)
    # a smaller p gives a smaller sequential p; a later look never undoes an earlier crossing
    assert sequential_p(shape, [5, 10, 15], [float(levels[0]) / 10]) < 0.05
    assert sequential_p(shape, [5, 10, 15], [float(levels[0]), 0.9]) == pytest.approx(0.05, abs=2e-4)


def test_bad_designs_fail_with_one_line() -> None:
    with pytest.raises(ConfigError, match="unknown group-sequential boundary 'haybittle'; valid: pocock"):
        nominal_levels("haybittle", [5, 10])
    with pytest.raises(ConfigError, match="must be increasing"):
        z_boundaries("pocock", [10, 5])
    with pytest.raises(ConfigError, match="3 p-values for 2 planned looks"):
        sequential_p("pocock", [5, 10], [0.1, 0.1, 0.1])
