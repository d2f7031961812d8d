"""The service's own overhead in a plan: a trial's cost with it by hand, a trial group paying
it once, the reports ``report_every`` makes, the file that carries it to a machine without
Ray, the cache, and the note where it is not included (never a silent zero)."""

import json

import pytest

from orthotune.core import OrthotuneError
from orthotune.plan import PlanEstimate, Resources, ServiceOverhead, read_service_overhead
from orthotune.plan import _overhead as overhead
from orthotune.plan._asha import asha_expected_epochs, expected_epochs, reports
from orthotune.plan._estimate import CellEstimate

ABOUT = {"source": "file overhead.json", "measured": {"date": "2026-11-28"}}


def cell(trials=10, configs_per_trial=1, expected_reports=4.0, **kwargs):
    values = {"cell": "cora/gcn/2/ortho", "arm": "ortho", "repeats": 5, "epochs": 100, "patience": 30,
              "expected_epochs": 40.0, "seconds_per_epoch": 0.1, "setup_s": 0.5, "peak_bytes": None,
              "device": "cpu", "shape": "s"}
    return CellEstimate(trials=trials, configs_per_trial=configs_per_trial, expected_reports=expected_reports,
                        **{**values, **kwargs})


def plan(*cells, slots=1):
    return PlanEstimate("s", "asha", "optuna", cells, Resources(cpus=slots), 1.0, 0.0, None, start_s=0.0)


# -- the arithmetic, by hand -------------------------------------------------------------------

def test_a_trials_cost_with_the_service_is_setup_epochs_per_trial_and_reports():
    bare = plan(cell())
    served = bare.with_service(0.25, 0.01, ABOUT)
    # trainer: 0.5 + 40 x 0.1 = 4.5 s; service: 0.25 + 4 reports x 0.01 = 0.29 s
    assert bare.cells[0].trial_s == pytest.approx(4.5)
    assert served.cells[0].trainer_s == pytest.approx(4.5)
    assert served.cells[0].service_s == pytest.approx(0.29)
    assert served.cells[0].trial_s == pytest.approx(4.79)
    totals = served.totals()
    assert totals["core_s"] == pytest.approx(10 * 4.79)
    assert totals["service_s"] == pytest.approx(10 * 0.29)
    assert totals["service_share"] == pytest.approx(0.29 / 4.79)
    assert totals["wall_s"] == pytest.approx(10 * 4.79)  # one slot: one trial after another
    assert served.to_dict()["service_overhead"] == {"included": True, **ABOUT, "per_trial_s": 0.25,
                                                    "per_report_s": 0.01}


def test_a_trial_group_pays_the_per_trial_overhead_once():
    single = plan(cell(trials=10, configs_per_trial=1)).with_service(1.0, 0.0, ABOUT)
    grouped = plan(cell(trials=10, configs_per_trial=5)).with_service(1.0, 0.0, ABOUT)
    assert single.totals()["tune_trials"] == 10 and grouped.totals()["tune_trials"] == 2
    assert single.totals()["service_s"] == pytest.approx(10.0)
    assert grouped.totals()["service_s"] == pytest.approx(2.0)  # five configs, one Ray trial, one overhead


def test_report_every_sets_the_reports_as_the_trainable_makes_them():
    # one every report_every epochs, the last with the final report
    assert [reports(e, 10) for e in (1, 9, 10, 11, 100)] == [1, 1, 1, 2, 10]
    # FIFO: every trial trains to its cap
    assert [expected_epochs(False, 6, 100, 10, 3, every, count_reports=True) for every in (1, 10, 30)] == [100, 10, 4]
    # ASHA, 6 trials, cap 100, grace 10, rf 3: 6 to 10, 3.15 on to 30, 2.00694 to 90, 1.50309 to 100
    assert asha_expected_epochs(6, 100, 10, 3, 10, True) == pytest.approx(25.84475 / 6, rel=1e-5)
    # every 20: stops at 20, 40 and 100 (90 rounded up to a report, the cap): 1, 2, 5 and 5 reports
    assert asha_expected_epochs(6, 100, 10, 3, 20, True) == pytest.approx((6 + 3.15 + 3 * 2.00694) / 6, rel=1e-5)
    fewer = plan(cell(expected_reports=2.0)).with_service(0.0, 0.5, ABOUT)
    more = plan(cell(expected_reports=20.0)).with_service(0.0, 0.5, ABOUT)
    assert (fewer.cells[0].service_s, more.cells[0].service_s) == (1.0, 10.0)


def test_the_table_and_the_total_line_show_the_overheads_share():
    served = plan(cell()).with_service(0.25, 0.01, ABOUT)
    assert "the service's overhead included (6.1%)" in served.total_line()
    assert "service s" in served.table().splitlines()[0]
    assert ("the service's overhead included: 0.250 s per Ray trial + 0.0100 s per report (from file overhead.json, "
            "measured 2026-11-28): 2.9 s, 6.1% of the trials' time") in served.table()


def test_without_the_overhead_the_plan_says_so_and_the_json_too():
    bare = plan(cell()).without_service("no Ray here to measure it")
    assert "the service's overhead not included" in bare.total_line()
    assert ("the service's overhead (Ray Tune per trial and per report) not included: no Ray here to measure it"
            in bare.table())
    assert bare.to_dict()["service_overhead"] == {"included": False, "note": "no Ray here to measure it"}
    assert bare.totals()["service_s"] is None and bare.totals()["service_share"] is None
    assert "not included" in plan(cell()).total_line()  # a plan built without a word about it: not included either


# -- where the figures come from ---------------------------------------------------------------

def test_a_good_file_is_read(tmp_path):
    path = tmp_path / "overhead.json"
    path.write_text(json.dumps({"per_trial_s": 0.12, "per_report_s": 0.004, "measured": {"date": "2026-11-28"},
                                "runs": []}))
    assert read_service_overhead(str(path)) == ServiceOverhead(0.12, 0.004, "file overhead.json",
                                                               {"date": "2026-11-28"})


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    (b"\x00\xff\xfe binary", "not a text file"),
    (b"{per_trial_s: 1", "not JSON"),
    (b"[1, 2]", "a JSON object with per_trial_s and per_report_s expected"),
    (b'{"per_trial_s": 0.1}', "per_report_s=None must be a finite number of seconds >= 0"),
    (b'{"per_trial_s": -0.1, "per_report_s": 0.0}', "per_trial_s=-0.1 must be"),
    (b'{"per_trial_s": "0.1", "per_report_s": 0.0}', "per_trial_s='0.1' must be"),
    (b'{"per_trial_s": NaN, "per_report_s": 0.0}', "per_trial_s=nan must be"),
])
def test_a_bad_file_is_one_line_naming_it(tmp_path, content, message):
    path = tmp_path / "overhead.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(OrthotuneError) as error:
        read_service_overhead(str(path))
    assert str(error.value).startswith(f"service overhead file {path}: ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_file_comes_first_then_the_kept_measurement_then_a_note(monkeypatch, tmp_path):
    import orthotune.plan._cache as kept

    monkeypatch.setattr(kept, "plan_cache", lambda: tmp_path)
    monkeypatch.setattr(overhead, "measure_here", lambda data_root: pytest.fail("measured"))
    monkeypatch.setattr(overhead.importlib.util, "find_spec", lambda name: object())  # Ray is here
    assert overhead.service_overhead(None, measure=False) == \
        "not measured in this environment yet (orthotune plan measures it)"
    monkeypatch.setattr(overhead.importlib.util, "find_spec", lambda name: None)
    assert overhead.service_overhead(None, measure=True).startswith("no Ray here to measure it; give "
                                                                    "--service-overhead FILE")
    kept.write_json(overhead.cache_path(), {"per_trial_s": 0.2, "per_report_s": 0.003, "measured": {}})
    assert overhead.service_overhead(None, measure=False) == ServiceOverhead(0.2, 0.003, "cache", {})
    path = tmp_path / "given.json"
    path.write_text('{"per_trial_s": 0.5, "per_report_s": 0.0}')
    assert overhead.service_overhead(str(path), measure=False).per_trial_s == 0.5


def test_a_failed_measurement_is_a_note_not_a_zero(monkeypatch, tmp_path):
    import orthotune.plan._cache as kept

    monkeypatch.setattr(kept, "plan_cache", lambda: tmp_path)
    monkeypatch.setattr(overhead, "PROBE_MODULE", "orthotune.plan.no_such_probe")
    result = overhead.service_overhead(None, measure=True)
    assert isinstance(result, str) and result.startswith("its measurement failed here")
    assert not overhead.cache_path().exists()


@pytest.mark.slow
def test_the_probe_measures_small_searches_and_the_plan_keeps_it(monkeypatch, tmp_path):
    """The real probe: searches on a local Ray, then the same environment reads it back."""
    import orthotune.plan._cache as kept

    monkeypatch.setattr(kept, "plan_cache", lambda: tmp_path)
    measured = overhead.service_overhead(None, measure=True)
    assert isinstance(measured, ServiceOverhead), measured
    assert measured.source == "measured here" and measured.per_trial_s >= 0 and measured.per_report_s >= 0
    kept_values = json.loads(overhead.cache_path().read_text())
    assert len(kept_values["runs"]) == 6 and all(r["search_s"] > r["trainer_s"] > 0 for r in kept_values["runs"])
    assert kept_values["measured"]["ray"] and kept_values["measured"]["date"]
    again = overhead.service_overhead(None, measure=True)
    assert again.source == "cache" and again.per_trial_s == measured.per_trial_s
