"""Space files fuzzed (Hypothesis): whatever a YAML file holds, ``orthotune launch --space FILE``
answers with one line and exit 2, or goes on to a valid search; never a traceback or a hang.

A valid search is run for real up to the moment Ray would start training: the inputs are
checked, the store made, the lease taken, the plan built (searchers, schedulers, every grid
point counted) and the Tuner made; only Ray's start and ``Tuner.fit`` are replaced."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from fuzzing import examples, near_valid_spaces, run_command, stop_before_ray, valid_spaces, yaml_like
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orthotune.core import ConfigError, OrthotuneError
from orthotune.spaces import parse_space
from orthotune.spaces._space import SearchSpace

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture
def no_ray(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # relative paths a fuzzed space names land here, not in the checkout
    stop_before_ray(monkeypatch)


@pytest.mark.slow
@settings(SETTINGS, max_examples=examples(200))
@given(values=st.one_of(yaml_like(), near_valid_spaces(), valid_spaces()))
def test_parse_space_answers_any_mapping_with_a_space_or_one_line(values):
    try:
        space = parse_space(values)
    except OrthotuneError as error:
        assert "\n" not in str(error) and str(error), repr(error)
        return
    assert isinstance(space, SearchSpace) and space.cells()


@pytest.mark.slow
def test_a_space_counts_its_grid_as_building_it_would():
    """Near-valid spaces are nearly all refused (the property ends there), so spaces valid by
    construction are drawn too; the counts after the run show that examples reached both
    checks, the grid's count and a continuous space's refusal to count."""
    reached: Counter[str] = Counter()

    @settings(SETTINGS, max_examples=examples(200))
    @given(values=st.one_of(near_valid_spaces(), valid_spaces()))
    def counts_as_built(values):
        try:
            space = parse_space(values)
        except OrthotuneError:
            return
        for part in [space, *space.cells()]:
            try:
                points = part.grid()
            except ConfigError:  # a continuous dimension: no grid, and no count
                with pytest.raises(ConfigError):
                    part.grid_size()
                reached["continuous"] += 1
                continue
            assert part.grid_size() == len(points), part.name
            reached["grid"] += 1

    counts_as_built()
    assert reached["grid"] > 0 and reached["continuous"] > 0, reached


@settings(SETTINGS, max_examples=examples(60))
@given(values=st.one_of(near_valid_spaces(), yaml_like(12)),
       searcher=st.sampled_from(["optuna", "random", "grid"]), scheduler=st.sampled_from(["asha", "fifo"]))
@pytest.mark.slow
def test_launch_answers_any_space_file_in_one_line_or_searches(no_ray, capsys, values, searcher, scheduler):
    with tempfile.TemporaryDirectory(prefix="ot-fuzz-") as folder:
        space = Path(folder) / "space.yaml"
        space.write_text(yaml.safe_dump(values))
        outcome, _, line = run_command(["launch", "--space", str(space), "--store", f"{folder}/store",
                                        "--searcher", searcher, "--scheduler", scheduler, "--progress", "off"],
                                       capsys)
        if outcome == "refused":
            assert not (Path(folder) / "store" / "searches").exists()  # refused before any work


@settings(SETTINGS, max_examples=examples(80))
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                     st.sampled_from([b"datasets: &a [cora]\nbackbones: *a\n", b"a: " + b"[" * 200,
                                      b"!!python/object:os.system x", b"datasets: [cora]\n\tbackbones: x",
                                      b"{" * 5000, b"key: value\n" * 2000])))
@pytest.mark.slow
def test_any_bytes_as_a_space_file_are_one_line(no_ray, capsys, raw):
    with tempfile.TemporaryDirectory(prefix="ot-fuzz-") as folder:
        space = Path(folder) / "space.yaml"
        space.write_bytes(raw)
        run_command(["launch", "--space", str(space), "--store", f"{folder}/store", "--progress", "off"], capsys)
