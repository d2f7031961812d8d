"""A space's ``split`` key: the random setting's split rule for its file and PyG datasets."""

import pytest

from orthotune.core import ConfigError, TrainConfig
from orthotune.spaces import parse_space

BASE = {"datasets": ["file:graphs/cora.npz", "cora"], "backbones": ["gcn"], "depths": [2]}


def test_the_rule_reaches_the_random_datasets_configs_only():
    space = parse_space({**BASE, "split": {"train": 0.5, "val": 0.25, "stratify": True}})
    random, full = (space.protocol(d) for d in space.datasets)
    assert random == {"setting": "random", "splits": [0, 1, 2, 3, 4], "split_train": 0.5, "split_val": 0.25,
                      "split_stratify": True}
    assert full == {"setting": "full", "splits": [0, 1, 2, 3, 4]}
    first = TrainConfig.from_dict(space.grid()[0])
    assert (first.split_train, first.split_val, first.split_stratify, first.split_per_class) == (0.5, 0.25, True, 0)
    assert parse_space(space.to_dict()) == space  # kept in the search record, so a resume draws the same splits


@pytest.mark.parametrize("split, message", [
    ({"train": 0.9, "val": 0.2}, "split_train=0.9 + split_val=0.2 must be below 1"),
    ({"trian": 0.5}, "unknown key 'trian'; valid: per_class, stratify, train, val"),
    (0.5, "split must be a mapping"),
    ({"per_class": -1}, "split_per_class=-1 must be an integer >= 0"),
])
def test_a_bad_rule_is_one_line(split, message):
    with pytest.raises(ConfigError, match=message.replace("+", r"\+")):
        parse_space({**BASE, "split": split})


def test_a_rule_without_a_random_dataset_is_refused():
    with pytest.raises(ConfigError, match="split applies to datasets in the random setting; none of cora is"):
        parse_space({**BASE, "datasets": ["cora"], "split": {"train": 0.5}})
