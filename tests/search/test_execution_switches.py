"""The GPU switches (TF32, deterministic, CUDA graph) through a search: a flag given wins over
the space's ``execution`` section, which wins over ``TrainOptions``' default; the record holds
the values used, so ``--resume`` keeps them; every trial and the GPU-share measurement train
with them."""

import json
import types

import pytest
from ray import tune

from orthotune.core import OrthotuneError, TrainConfig
from orthotune.search import LaunchOptions
from orthotune.spaces import default_config, parse_space
from orthotune.training import EXECUTION_SWITCHES, TrainOptions

SPACE = {"name": "tiny", "datasets": ["cora"], "backbones": ["gcn"], "depths": [2], "repeats": [0],
         "train": {"epochs": 20, "hidden": 8}, "asha": {"grace_period": 5}, "samples": 2}
DEFAULTS = {name: getattr(TrainOptions(), name) for name in EXECUTION_SWITCHES}  # TrainOptions' own


def options(execution: dict | None = None, **kwargs) -> LaunchOptions:
    space = {**SPACE, **({"execution": execution} if execution is not None else {})}
    return LaunchOptions(store="unused", name="s", space=parse_space(space), **kwargs)


def test_without_flag_or_section_the_switches_are_trainoptions_defaults():
    assert options().execution() == DEFAULTS
    assert DEFAULTS == {"tf32": True, "deterministic": False, "cuda_graph": False}  # the lead's, unchanged


def test_the_space_sets_what_no_flag_gives_and_a_flag_given_wins():
    flipped = {name: not value for name, value in DEFAULTS.items()}
    assert options(flipped).execution() == flipped
    assert options({"tf32": False}).execution() == {**DEFAULTS, "tf32": False}
    given = options(flipped, tf32=True, deterministic=False)  # as --tf32 --no-deterministic
    assert given.execution() == {"tf32": True, "deterministic": False, "cuda_graph": flipped["cuda_graph"]}
    assert (given.tf32, given.deterministic, given.cuda_graph) == (True, False, flipped["cuda_graph"])


def test_the_record_holds_the_values_used_and_resume_keeps_them():
    launched = options({"cuda_graph": True}, tf32=False)
    meta = json.loads(json.dumps(launched.to_meta()))  # as the store keeps it
    assert (meta["tf32"], meta["deterministic"], meta["cuda_graph"]) == (False, DEFAULTS["deterministic"], True)
    resumed = LaunchOptions.from_meta(meta)
    assert resumed.execution() == launched.execution() == {**DEFAULTS, "tf32": False, "cuda_graph": True}
    # the record's values stand even where a later default would differ: they are booleans, not "unset"
    assert all(isinstance(meta[name], bool) for name in EXECUTION_SWITCHES)


def test_a_record_from_before_the_switches_resumes_at_its_space_and_the_defaults():
    meta = json.loads(json.dumps(options({"deterministic": True}).to_meta()))
    for name in EXECUTION_SWITCHES:
        del meta[name]
    assert LaunchOptions.from_meta(meta).execution() == {**DEFAULTS, "deterministic": True}


def test_a_switch_that_is_not_a_boolean_is_refused_in_one_line():
    meta = options().to_meta()
    with pytest.raises(OrthotuneError, match=r"^tf32='no' must be true or false$"):
        LaunchOptions.from_meta({**meta, "tf32": "no"})


def test_start_or_resume_continues_a_record_from_before_the_switches_and_refuses_other_switches():
    from orthotune.search._start_or_resume import _refuse_other_options

    given = options({"cuda_graph": True})
    stored = json.loads(json.dumps(given.to_meta()))
    _refuse_other_options(stored, given)
    older = {k: v for k, v in stored.items() if k not in EXECUTION_SWITCHES}
    _refuse_other_options(older, given)  # resolved as its resumed search would: the same switches
    with pytest.raises(OrthotuneError, match="tf32: stored"):
        _refuse_other_options(older, options({"cuda_graph": True}, tf32=not DEFAULTS["tf32"]))


def test_every_trial_trains_with_the_searchs_switches(monkeypatch):
    from orthotune.search._trainable import TrialContext
    from orthotune.search._tuner import _trainable

    monkeypatch.setattr(tune, "with_parameters", lambda fn, **given: given)  # what the trials are handed
    monkeypatch.setattr(tune, "with_resources", lambda trainable, resources: trainable)
    chosen = options({"deterministic": True}, tf32=False)
    context = _trainable(chosen)["context"]
    assert context.execution == chosen.execution()
    trained = context.train_options()
    assert (trained.tf32, trained.deterministic, trained.cuda_graph) == (False, True, DEFAULTS["cuda_graph"])
    assert trained.report_every == chosen.report_every == trained.grad_norms_every
    plain = TrialContext(data_root=None, report_every=5).train_options()  # none given: TrainOptions' defaults
    assert {name: getattr(plain, name) for name in EXECUTION_SWITCHES} == DEFAULTS and plain.report_every == 5


def test_the_gpu_share_measurement_trains_with_the_searchs_switches(monkeypatch):
    import ray

    import orthotune.search._gpu_share as share

    seen = []
    monkeypatch.setattr(share, "measure_cell_cost",
                        lambda *args: seen.append(args[5]) or types.SimpleNamespace(to_dict=dict))
    config = default_config(options().space.cells()[0])
    share.measure_task(config, None, 1, 2, 25, False, {"tf32": False, "cuda_graph": True})
    assert (seen[0].tf32, seen[0].cuda_graph, seen[0].sync_every) == (False, True, 25)
    share.measure_task(config, None, 1, 2, 25)
    assert {name: getattr(seen[1], name) for name in EXECUTION_SWITCHES} == DEFAULTS
    # measure_shares hands each cell's task the search's switches
    sent = []
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"GPU": 1})
    monkeypatch.setattr(ray, "remote", lambda **kw: lambda fn: types.SimpleNamespace(remote=lambda *a: sent.append(a)))
    monkeypatch.setattr(ray, "get", lambda ref: (_ for _ in ()).throw(RuntimeError("not measured here")))
    monkeypatch.setattr(share, "_cpus_per_gpu", lambda: 8.0)
    chosen = options(deterministic=True)
    share.measure_shares(chosen, None)
    assert sent and all(args[-1] == chosen.execution() for args in sent)
    assert TrainConfig.from_dict(sent[0][0]).dataset == "cora"
