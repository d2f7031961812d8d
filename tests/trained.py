"""Training results paired with their configs for comparisons: a comparison loop over a
dropped, extra, reordered or empty result would otherwise pass by comparing less."""

from __future__ import annotations

from collections.abc import Sequence

from orthotune.core import ConfigResult, TrainConfig


def per_config(configs: Sequence[TrainConfig], *trained: Sequence[ConfigResult]) -> list[tuple]:
    """``(config, result, ...)`` for each config, one result from each list in ``trained``,
    after checking that each list holds exactly one result per config, in the configs' order,
    each with one run per repeat of its config."""
    configs = list(configs)
    assert configs, "no configs: nothing would be compared"
    for results in trained:
        assert [r.config for r in results] == configs, f"{len(results)} results for {len(configs)} configs"
        for result in results:
            assert [(run.split, run.seed) for run in result.runs] == result.config.runs(), result.config
    return list(zip(configs, *trained, strict=True))
