"""Config files and command-line values fuzzed (Hypothesis): ``train --config FILE`` with any
file, and ``train``/``launch`` with any values for their options, answer in one line with
exit 2 or reach their real work (the training loop; Ray's start); never a traceback or a hang.
Nothing trains and Ray never starts here."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml
from fuzzing import (
    BACKBONES,
    DATASET_NAMES,
    FIELDS,
    NUMBERS,
    SCALARS,
    examples,
    run_command,
    stop_before_ray,
    stop_before_training,
    yaml_like,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orthotune.core import TrainConfig, declared

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FLAGS = {"splits": "--split", "seeds": "--seed"}
TRAIN_FLAGS = ["--" + f.name.replace("_", "-") if f.name not in FLAGS else FLAGS[f.name] for f in declared(TrainConfig)]
LAUNCH_FLAGS = ["--samples", "--searcher", "--scheduler", "--seed", "--cpus-per-trial", "--gpus-per-trial",
                "--concurrency", "--configs-per-trial", "--report-every", "--retries", "--datasets", "--name",
                "--optuna-storage", "--address"]
#: What a word on a command line can be: numbers in every spelling, names, junk.
WORDS = st.one_of(NUMBERS.map(str), st.sampled_from([*DATASET_NAMES, *BACKBONES, "auto", "nan", "inf", "-inf", "1e999",
                                                     "0x10", "1_000", "", "--", "-1", "true", "off", "optuna",
                                                     "grid", "asha", "ray://x:1", "sqlite:///x.db"]),
                  st.text(max_size=10))


def configs() -> st.SearchStrategy:
    """Config mappings: declared keys with values of any kind, now and then a stray key."""
    value = st.one_of(SCALARS, st.lists(st.one_of(st.integers(-2, 12), SCALARS), max_size=4))
    return st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.sampled_from(["profile", "trial_id", "val_acc"]),
                                     st.text(max_size=6)), value, max_size=8).map(
        lambda c: {"dataset": "cora", **c} if "dataset" not in c and len(c) % 2 else c)


@pytest.fixture
def no_work(monkeypatch, tmp_path):
    # a fuzzed relative path (--optuna-storage 1e999, a store named cora) lands in tmp_path,
    # never in the checkout
    monkeypatch.chdir(tmp_path)
    stop_before_training(monkeypatch)
    stop_before_ray(monkeypatch)


@settings(SETTINGS, max_examples=examples(80))
@given(config=st.one_of(configs(), yaml_like(10), st.lists(configs(), max_size=3)),
       suffix=st.sampled_from([".yaml", ".json"]))
@pytest.mark.slow
def test_train_answers_any_config_file_in_one_line_or_trains(no_work, capsys, config, suffix):
    with tempfile.TemporaryDirectory(prefix="ot-fuzz-") as folder:
        path = Path(folder) / f"config{suffix}"
        path.write_text(json.dumps(config, default=str) if suffix == ".json" else yaml.safe_dump(config))
        run_command(["train", "--config", str(path)], capsys)


@settings(SETTINGS, max_examples=examples(60))
@given(raw=st.one_of(st.binary(max_size=120), st.sampled_from([b"[" * 3000, b'{"a":' * 3000, b"- " * 3000])),
       suffix=st.sampled_from([".yaml", ".json"]))
@pytest.mark.slow
def test_train_answers_any_bytes_as_a_config_file_in_one_line(no_work, capsys, raw, suffix):
    with tempfile.TemporaryDirectory(prefix="ot-fuzz-") as folder:
        path = Path(folder) / f"config{suffix}"
        path.write_bytes(raw)
        outcome, _, _ = run_command(["train", "--config", str(path)], capsys)
        assert outcome == "refused"  # no bytes of this kind make a config


@settings(SETTINGS, max_examples=examples(80))
@given(options=st.lists(st.tuples(st.sampled_from(TRAIN_FLAGS), st.lists(WORDS, min_size=1, max_size=2)),
                        max_size=4))
@pytest.mark.slow
def test_train_answers_any_option_values_in_one_line_or_trains(no_work, capsys, options):
    words = [word for flag, values in options for word in (flag, *values)]
    if "--dataset" not in words:
        words = ["--dataset", "cora", *words]
    run_command(["train", *words], capsys)


@pytest.mark.slow
@settings(SETTINGS, max_examples=examples(60))
@given(options=st.lists(st.tuples(st.sampled_from(LAUNCH_FLAGS), WORDS), max_size=3))
def test_launch_answers_any_option_values_in_one_line_or_searches(no_work, capsys, options):
    words = [word for pair in options for word in pair]
    with tempfile.TemporaryDirectory(prefix="ot-fuzz-") as folder:
        run_command(["launch", "--space", "quick", "--store", f"{folder}/store", "--progress", "off", *words], capsys)
