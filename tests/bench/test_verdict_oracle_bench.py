"""The verdict oracle's bound: the exhaustive search over stops on hand-made per-look gains and
p-values whose answer is known (Holm's coupling included), its relaxed fallback, the bench on a
hand-made store, and a missing store in one line with exit 2."""

import importlib.util
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "reports"))

from report_stores import CURVE_BASE, curve_row, hand_store, shifted  # noqa: E402

GAIN_SIG, GAIN_NS = "gain, significant", "gain, not significant"


def _bench():
    spec = importlib.util.spec_from_file_location("verdict_oracle_bench", ROOT / "bench" / "verdict_oracle.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass of postponed annotations looks its module up there
    spec.loader.exec_module(module)
    return module


oracle_bench = _bench()


def test_holm_leaves_nan_out_of_the_family_and_steps_down():
    adjusted = oracle_bench.holm([math.nan, 0.03, 0.01, 0.04])
    assert math.isnan(adjusted[0]) and adjusted[1:] == pytest.approx([0.06, 0.03, 0.06])


def test_each_pair_stops_at_its_first_look_that_keeps_its_verdict_when_holm_does_not_bind():
    # pair 0: a clear gain from the first look; pair 1: a loss at 20, the fixed budget's
    # non-significant gain from 30 on
    gains = [[0.05, 0.05, 0.05], [-0.02, 0.01, 0.01]]
    pvalues = [[1e-4, 1e-4, 1e-4], [0.2, 0.5, 0.5]]
    bound = oracle_bench.oracle((20, 30, 40), gains, pvalues, [GAIN_SIG, GAIN_NS], need=2)
    assert bound == oracle_bench.Bound((20, 30), 2, True)
    # keeping one verdict of two: both at the first look, pair 0 kept
    assert oracle_bench.oracle((20, 30, 40), gains, pvalues, [GAIN_SIG, GAIN_NS], need=1) == \
        oracle_bench.Bound((20, 20), 1, True)


def test_holm_coupling_makes_a_pair_wait_for_the_others_stops():
    """Both gains are significant alone at 20 (p = 0.03) but not together (Holm: 0.06); one
    pair waiting for 40 (p = 0.001) carries the other: 20 + 40, not 20 + 20. The relaxed bound
    drops the coupling, so it says 20 + 20: lower, still a bound."""
    gains = [[0.02, 0.02], [0.02, 0.02]]
    pvalues = [[0.03, 0.001], [0.03, 0.001]]
    fixed = [GAIN_SIG, GAIN_SIG]
    assert oracle_bench.verdicts([0.02, 0.02], [0.03, 0.03]) == [GAIN_NS, GAIN_NS]
    assert oracle_bench.oracle((20, 40), gains, pvalues, fixed, need=2) == oracle_bench.Bound((20, 40), 2, True)
    assert oracle_bench.oracle((20, 40), gains, pvalues, fixed, need=1) == oracle_bench.Bound((20, 40), 2, True)
    relaxed = oracle_bench.oracle((20, 40), gains, pvalues, fixed, need=2, limit=1)
    assert relaxed == oracle_bench.Bound((20, 20), 2, False)


def test_holm_coupling_can_keep_a_non_significant_verdict_and_ties_go_to_more_kept():
    """Pair 1's raw p of 0.03 at 20 is significant alone, not beside pair 0's larger p of 0.3
    at 40 (Holm: 2 x 0.03 = 0.06): it keeps the fixed budget's non-significant gain at 20
    only while pair 0 waits (at 20 pair 0's p of 0.001 is significant: changed)."""
    gains = [[0.05, 0.01], [0.02, 0.01]]
    pvalues = [[1e-3, 0.3], [0.03, 0.3]]
    fixed = [GAIN_NS, GAIN_NS]
    assert oracle_bench.verdicts([0.01, 0.02], [0.3, 0.03]) == [GAIN_NS, GAIN_NS]
    assert oracle_bench.oracle((20, 40), gains, pvalues, fixed, need=2) == oracle_bench.Bound((40, 20), 2, True)
    # one of two: (20, 40) keeps one for 60 trials, (40, 20) two for the same 60
    assert oracle_bench.oracle((20, 40), gains, pvalues, fixed, need=1) == oracle_bench.Bound((40, 20), 2, True)


def test_no_assignment_keeps_enough_and_the_relaxed_bound_never_exceeds_the_exact_one():
    gains, pvalues = [[-0.01, -0.01]], [[0.5, 0.5]]
    assert oracle_bench.oracle((20, 40), gains, pvalues, [GAIN_SIG], need=1) is None
    assert oracle_bench.oracle((20, 40), gains, pvalues, [GAIN_SIG], need=1, limit=1) is None
    rng = random.Random(47)
    looks = (20, 25, 30, 35, 40)
    for _ in range(200):
        pairs = rng.randint(1, 4)
        gains = [[rng.choice((-1, 1)) * rng.random() for _ in looks] for _ in range(pairs)]
        pvalues = [[rng.random() ** 3 for _ in looks] for _ in range(pairs)]
        fixed = oracle_bench.verdicts([g[-1] for g in gains], [p[-1] for p in pvalues])
        need = rng.randint(1, pairs)
        exact = oracle_bench.oracle(looks, gains, pvalues, fixed, need)
        loose = oracle_bench.oracle(looks, gains, pvalues, fixed, need, limit=1)
        assert exact is not None and exact.kept >= need  # every pair at 40 keeps all
        index = [looks.index(k) for k in exact.stops]
        at = oracle_bench.verdicts([g[j] for g, j in zip(gains, index)], [p[j] for p, j in zip(pvalues, index)])
        assert sum(a == f for a, f in zip(at, fixed)) == exact.kept
        assert loose is not None and sum(loose.stops) <= sum(exact.stops)


def _stable_store(root: Path) -> None:
    """One pair, both arms' winner their first trial: a +5 gain at every look (the replay bench's)."""
    rows = []
    for i in range(40):
        val = shifted([0.80 if i == 0 else 0.70] * 5, 0.0, jitter=True)
        rows.append(curve_row(f"o{i}", val, shifted(CURVE_BASE, -0.01 * i), i, lr=0.001 * (i + 1)))
        rows.append(curve_row(f"x{i}", val, shifted(CURVE_BASE, 0.05, jitter=True), i, ortho=True, lr=0.001 * (i + 1)))
    hand_store(root, rows)


@pytest.mark.slow
def test_the_bench_prints_each_pairs_looks_the_bound_and_its_assignment(tmp_path, capsys):
    _stable_store(tmp_path / "s")
    assert oracle_bench.main(["--store", str(tmp_path / "s"), "--search", "hand"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("looks 20, 25, 30, 35, 40 trials per arm")
    (row,) = [line for line in out if line.startswith("cora full gcn depth 2")]
    assert row.count(" S") == 5 and "gain, significant" in row
    assert "oracle: keeps 1 of 1 with 20 of 40 trials (50.0%)" in out
    assert out[-2].split()[-5:] == ["stop", "20", "gain,", "significant", "kept"]
    assert out[-1] == "target 60% of the trials: the bound is 10.0 points below it (or at it)"


@pytest.mark.slow
@pytest.mark.parametrize("where", ["--store", "ORTHOTUNE_STORE"])
def test_a_missing_store_is_one_line_and_exit_2(tmp_path, where):
    missing = tmp_path / "no-store"
    store = ["--store", str(missing)] if where == "--store" else []
    env = {**os.environ, "ORTHOTUNE_STORE": str(missing)} if where != "--store" else dict(os.environ)
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "verdict_oracle.py"), *store, "--search", "x"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: no orthotune store at {str(missing)!r}"]


@pytest.mark.slow
def test_a_missing_search_is_one_line_and_exit_2(tmp_path):
    _stable_store(tmp_path / "s")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "verdict_oracle.py"), "--store", str(tmp_path / "s"),
                           "--search", "nope"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: no search 'nope' in store {str(tmp_path / 's')!r}; searches: hand"]
