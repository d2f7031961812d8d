"""The benchmarks' one hook: it wraps the driver's parts and collects the workers' timings
while inside, and restores everything after; search's face lists none of it."""

import os
from types import SimpleNamespace

import orthotune.search
from orthotune.search._recorder import StoreRecorder
from orthotune.search._trainable import TIMINGS_ENV
from orthotune.search.instrumentation import DRIVER_PARTS, TRIAL_END, instrumented


def test_the_hook_wraps_each_part_and_collects_timings_then_restores(monkeypatch):
    monkeypatch.delenv(TIMINGS_ENV, raising=False)
    originals = {(cls, name): getattr(cls, name) for cls, names in DRIVER_PARTS.values() for name in names}
    originals[TRIAL_END] = getattr(*TRIAL_END)
    wrapped, collected = [], []

    def wrap(part, method):
        wrapped.append(part)
        return method

    ended = SimpleNamespace(last_result={"timings": {"pid": 1, "train_s": 2.0}})
    with instrumented(wrap, collected.append):
        assert os.environ[TIMINGS_ENV] == "1"  # the workers Ray starts now send their timings
        assert getattr(*TRIAL_END) is not originals[TRIAL_END]
        recorder = StoreRecorder("unused", "search")
        written = []
        recorder._write = lambda trial, error: written.append(trial)  # no store here
        recorder.on_trial_complete(0, [], ended)
        assert written == [ended]  # the recorder's own work goes on
    assert collected == [{"pid": 1, "train_s": 2.0}]
    assert list(dict.fromkeys(wrapped)) == list(DRIVER_PARTS)
    assert len(wrapped) == sum(len(names) for _, names in DRIVER_PARTS.values())
    assert TIMINGS_ENV not in os.environ
    assert all(getattr(cls, name) is method for (cls, name), method in originals.items())


def test_search_lists_no_instrument_of_the_benchmarks():
    assert not {"DRIVER_PARTS", "TRIAL_END", "TIMINGS_ENV", "instrumented"} & set(orthotune.search.__all__)
