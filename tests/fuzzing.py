"""What the fuzz tests share: strategies for YAML-like values biased towards orthotune's own
keys and names, and a run of the real ``orthotune`` command that must end in one line or a
valid search (never a traceback, never a hang)."""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import strategies as st

from orthotune.cli import main
from orthotune.core import DATASETS, TrainConfig, declared
from orthotune.core._backbones import TASKS

#: Longest one example may take before it counts as a hang.
HANG_S = 20
#: Scales every fuzz test's number of examples: the suite keeps them few (it runs in CI's fast
#: subset); ``ORTHOTUNE_FUZZ_SCALE=50`` hunts longer.
SCALE = int(os.environ.get("ORTHOTUNE_FUZZ_SCALE", "1"))


def examples(count: int) -> int:
    return count * SCALE

DATASET_NAMES = DATASETS.names()
BACKBONES = sorted({b for task in TASKS for b in TASKS.get(task).backbones})
FIELDS = [f.name for f in declared(TrainConfig)]
SPACE_KEYS = ["name", "datasets", "setting", "repeats", "backbones", "depths", "original", "ortho", "train", "asha",
              "samples", "variants", "grace_period", "reduction_factor", "low", "high", "step", "log", "arms",
              "profile", *FIELDS]

#: Numbers a person (or a typo) writes: edges of every rule, huge, tiny, non-finite.
NUMBERS = st.one_of(st.integers(-3, 3000), st.integers(), st.sampled_from([0.0, -0.0, 1e-300, 1e300, 5e-4]),
                    st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 1))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12),
                    st.sampled_from([*DATASET_NAMES, *BACKBONES, "full", "semi", "cv10", "official", "paper",
                                     "default", "ortho", "original", "gcn", "cora"]))
KEYS = st.one_of(st.sampled_from(SPACE_KEYS), st.text(max_size=8), st.integers(-2, 2), st.booleans())


def yaml_like(max_leaves: int = 25) -> st.SearchStrategy:
    """Nested mappings and lists of scalars, keys mostly orthotune's."""
    return st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(KEYS, inner, max_size=6)),
                        max_leaves=max_leaves)


def ranges() -> st.SearchStrategy:
    """A searched value: a list of choices or a {low, high, step?, log?} range, odd ones included."""
    bound = st.one_of(st.integers(-5, 10**6), st.floats(-1, 1e6, allow_nan=False), st.sampled_from([10**12]))
    step = st.one_of(st.none(), st.integers(1, 1000), st.floats(1e-12, 10), st.sampled_from([1e-9, 1e-6]))
    rng = st.fixed_dictionaries({"low": bound, "high": bound},
                                optional={"step": step, "log": st.booleans()})
    return st.one_of(SCALARS, st.lists(SCALARS, min_size=1, max_size=4), rng)


def near_valid_spaces() -> st.SearchStrategy:
    """Spaces shaped like real ones (required keys present, known names), with values drawn
    from the whole range of what a file can hold: most are refused, some are valid."""
    ortho_keys = st.sampled_from(["T", "beta", "lam"])
    train_keys = st.sampled_from(["lr", "dropout", "hidden", "epochs", "patience", "weight_decay", "batch_size",
                                  "alpha", "theta", "input_dropout"])
    return st.fixed_dictionaries(
        {"datasets": st.one_of(st.lists(st.sampled_from(DATASET_NAMES), min_size=1, max_size=2), SCALARS),
         "backbones": st.one_of(st.lists(st.sampled_from(BACKBONES), min_size=1, max_size=2), SCALARS),
         "depths": st.one_of(st.lists(st.integers(-1, 80), min_size=1, max_size=3), SCALARS)},
        optional={"ortho": st.dictionaries(ortho_keys, ranges(), max_size=3),
                  "train": st.dictionaries(train_keys, ranges(), max_size=4),
                  "samples": st.one_of(st.integers(-1, 40), SCALARS),
                  "repeats": st.one_of(st.lists(st.integers(-1, 12), min_size=1, max_size=3), SCALARS),
                  "original": st.one_of(st.booleans(), SCALARS),
                  "asha": st.dictionaries(st.sampled_from(["grace_period", "reduction_factor", "x"]),
                                          st.one_of(st.integers(-1, 500), SCALARS), max_size=2),
                  "setting": st.sampled_from(["full", "semi", "cv10", "official", "bogus"])})


def _searched(ints: tuple[int, int] | None = None, floats: tuple[float, float] | None = None) -> st.SearchStrategy:
    """A searched value inside ``[low, high]`` by construction: a fixed value, a list of
    choices, an integer range (a grid), a float range with a step (a grid) or without one,
    log scaled or not (continuous: no grid)."""
    if ints is not None:
        low, high = ints
        value = st.integers(low, high)
        bounds = st.lists(value, min_size=2, max_size=2).map(sorted)
        return st.one_of(value, st.lists(value, min_size=1, max_size=3),
                         st.builds(lambda b, step: {"low": b[0], "high": b[1], **step}, bounds,
                                   st.sampled_from([{}, {"step": 1}, {"step": 2}])))
    low, high = floats
    value = st.floats(low, high)
    bounds = st.lists(value, min_size=2, max_size=2).map(sorted)
    ranged = st.builds(lambda b, extra: {"low": b[0], "high": b[1], **extra}, bounds,
                       st.sampled_from([{}, {"step": (high - low) / 4}, {"step": (high - low) / 3}]))
    logged = st.builds(lambda b: {"low": b[0], "high": b[1], "log": True},
                       st.lists(st.floats(max(low, 1e-4), high), min_size=2, max_size=2).map(sorted))
    return st.one_of(value, st.lists(value, min_size=1, max_size=3), ranged, logged)


#: Values every backbone reads, each within its rule.
ORTHO_VALUES = {"T": _searched(ints=(1, 8)), "beta": _searched(floats=(0.1, 1.0)), "lam": _searched(floats=(0.0, 1e-2))}
TRAIN_VALUES = {"lr": _searched(floats=(1e-3, 0.1)), "dropout": _searched(floats=(0.0, 0.8)),
                "hidden": _searched(ints=(8, 64)), "epochs": _searched(ints=(1, 50))}
#: Datasets and backbones of one task: crossed, every pair trains.
TASK_CELLS = {"node": (("cora", "citeseer", "texas"), ("gcn", "jknet", "gcnii", "sage", "appnp")),
              "graph": (("proteins", "dd"), ("gunet",))}


def _values(kinds: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    return st.fixed_dictionaries({}, optional=kinds)


def _cells(task: str) -> st.SearchStrategy:
    datasets, backbones = TASK_CELLS[task]
    some = lambda names: st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)  # noqa: E731
    arms = st.sampled_from([(True, True), (True, False), (False, True)])  # (original, ortho): one at least
    return st.builds(
        lambda d, b, depths, arm, ortho, train, samples, extra: {
            "datasets": d, "backbones": b, "depths": depths, "original": arm[0], "train": train,
            "samples": samples, **({"ortho": ortho} if arm[1] else {}), **extra},
        some(datasets), some(backbones), st.lists(st.integers(2, 8), min_size=1, max_size=3, unique=True), arms,
        _values(ORTHO_VALUES), _values(TRAIN_VALUES), st.integers(1, 6),
        st.fixed_dictionaries({}, optional={"reference": st.booleans(),
                                            "variants": st.lists(_values(TRAIN_VALUES), min_size=1, max_size=2)}))


def _named_variants(space: dict) -> dict:
    """Variants get names of their own (a name given twice to one cell is refused)."""
    if "variants" in space:
        space["variants"] = [{"name": f"v{i}", **values} for i, values in enumerate(space["variants"])]
    return space


def valid_spaces() -> st.SearchStrategy:
    """Spaces every rule accepts, by construction (each value within its field's rule, the
    datasets and backbones of one task, one arm at least, variants named apart): the
    properties that need a parsed space reach their asserts on each of these."""
    return st.sampled_from(sorted(TASK_CELLS)).flatmap(_cells).map(_named_variants)


class Hang(Exception):
    pass


@contextmanager
def no_hang(seconds: int = HANG_S) -> Iterator[None]:
    """Fail the example (rather than the whole run) when it takes longer than ``seconds``."""
    def stop(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


class Reached(BaseException):
    """Raised where the command would start its real work (training, Ray): the input was valid.
    A BaseException, so no ``except Exception`` on the way turns it into an error line."""


def run_command(argv: list[str], capsys) -> tuple[str, int | None, str]:
    """``("valid", None, "")`` where the command reached its work, or ``("refused", code, line)``.
    Fails on a traceback, a hang, an exit 1 ("unexpected error") or more than one line."""
    capsys.readouterr()
    try:
        with no_hang():
            code = main(argv)
    except Reached:
        return "valid", None, ""
    except SystemExit as usage:  # argparse's own usage errors
        code = usage.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert code == 2, (argv, code, err)
    assert len(lines) == 1 and lines[0].startswith("orthotune"), (argv, err)
    return "refused", code, lines[0]


def finite(value: float) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def stop_before_ray(monkeypatch) -> None:
    """Everything of `launch` runs except Ray: its start says the cluster fits 2 trials, and
    the Tuner's fit (where trials would train), or any use of Ray after the inputs were
    checked, raises :class:`Reached`."""
    import ray
    from ray import tune

    def fit(self):
        raise Reached

    def init(*args, **kwargs):  # a trial group's rung board is a Ray actor, made with the Tuner
        raise Reached

    def plan_total(options):  # the plan's checks run; its measuring (a few epochs per cell) does not
        from orthotune.search import check_inputs, check_store

        check_inputs(options)
        check_store(options)

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr("orthotune.search._launch.start_ray", lambda options: 2)
    monkeypatch.setattr("orthotune.cli.launch._plan_total", plan_total)
    monkeypatch.setattr(tune.Tuner, "fit", fit)


def stop_before_training(monkeypatch) -> None:
    """`train` runs up to the training loop, which raises :class:`Reached`."""
    import orthotune.training

    def run_configs(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(orthotune.training, "run_configs", run_configs)
