"""A plan measures with the search's GPU switches, and its caches (each shape's cost and the
whole plan) are keyed by them: a TF32-off plan never reads a TF32-on measurement."""

import pytest
from no_probe import NoProbe

from orthotune.plan import plan_search
from orthotune.search import LaunchOptions
from orthotune.spaces import parse_space
from orthotune.training import EXECUTION_SWITCHES, TrainOptions

SPACE = {"name": "tiny", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2],
         "original": True, "train": {"hidden": 8, "epochs": 10, "patience": 10},
         "asha": {"grace_period": 5, "reduction_factor": 2}, "samples": 1}
DEFAULTS = {name: getattr(TrainOptions(), name) for name in EXECUTION_SWITCHES}


def options(execution=None, **kwargs):
    space = {**SPACE, **({"execution": execution} if execution else {})}
    return LaunchOptions(store="unused", name="plan-test", space=parse_space(space), **kwargs)


def test_the_plans_key_and_each_shapes_key_differ_with_any_switch():
    import torch

    from orthotune.core import TrainConfig
    from orthotune.plan._costing import _plan_key, _shape
    from orthotune.plan._measuring import Method

    config, cpu = TrainConfig(dataset="cora", depth=2), torch.device("cpu")
    plain = options()
    for name, default in DEFAULTS.items():
        flipped = options(**{name: not default})
        assert _plan_key(flipped, 1, False, False) != _plan_key(plain, 1, False, False), name
        assert _shape(config, flipped, cpu, Method()) != _shape(config, plain, cpu, Method()), name
    # set in the space file or on the command line: the same switches, the same shapes
    assert _shape(config, options({"tf32": False}), cpu, Method()) == _shape(config, options(tf32=False), cpu,
                                                                              Method())


@pytest.mark.slow
def test_the_measurement_trains_with_the_switches(monkeypatch, tmp_path):
    import orthotune.plan._cache as kept
    import orthotune.plan._costing as costing
    import orthotune.plan._measuring as measuring

    methods, real = [], measuring.measure
    monkeypatch.setattr(kept, "plan_cache", lambda: tmp_path / "cache")
    monkeypatch.setattr(costing, "StartProbe", NoProbe)
    monkeypatch.setattr(costing, "streams", lambda *args, **kwargs: 1)  # measured in this process
    monkeypatch.setattr(measuring, "measure", lambda config, method, *rest: methods.append(method)
                        or real(config, method, *rest))
    plan_search(options())
    assert len(methods) == 1 and dict(methods[0].execution) == DEFAULTS
    assert plan_search(options()).cells[0].cached and len(methods) == 1  # the same switches: read back
    plan_search(options(tf32=not DEFAULTS["tf32"], deterministic=True))
    assert len(methods) == 2  # other switches: measured again, with them
    trained = methods[1].train_options()
    assert (trained.tf32, trained.deterministic) == (not DEFAULTS["tf32"], True)
    assert trained.report_every == methods[1].report_every


@pytest.mark.parametrize("name", list(EXECUTION_SWITCHES))
def test_a_method_without_switches_trains_at_trainoptions_defaults(name):
    from orthotune.plan._measuring import Method

    assert getattr(Method().train_options(), name) == DEFAULTS[name]
    assert getattr(Method(execution=((name, not DEFAULTS[name]),)).train_options(), name) == (not DEFAULTS[name])
