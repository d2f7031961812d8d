"""A Ray worker imports the trainable's module to train; libraries it does not train with
stay unloaded (each costs every worker its import time)."""

import subprocess
import sys

import pytest

#: Not needed to train a node or graph task: scikit-learn and SciPy (graph folds only,
#: imported when first split), the searchers' and reports' libraries.
NOT_ON_WORKERS = ("sklearn", "scipy", "optuna", "matplotlib")


@pytest.mark.slow  # a fresh interpreter per module (seconds each)
@pytest.mark.parametrize("module", ["orthotune.search._trainable", "orthotune.training"])
def test_the_worker_path_loads_no_library_it_does_not_train_with(module):
    code = (f"import sys\nimport {module}\n"
            f"print(sorted(m for m in {NOT_ON_WORKERS!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_graph_folds_still_split_with_scikit_learn():
    import torch

    from orthotune.training._graph import make_folds

    labels = torch.tensor([0, 1] * 20)
    folds = make_folds(labels, folds=4, seed=0)
    assert len(folds) == 4
    tests = torch.cat([f.test for f in folds]).sort().values
    assert torch.equal(tests, torch.arange(40))  # every graph tested once


@pytest.mark.slow  # a fresh interpreter (seconds)
def test_a_plan_measures_without_loading_ray():
    """`plan` checks the inputs and measures shapes in its own process with torch alone: Ray
    there would cost the first measurement its import time."""
    code = ("import sys\nimport orthotune.search._inputs, orthotune.plan._costing, orthotune.plan._measuring\n"
            "print(sorted(m for m in ('ray', 'optuna') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
