"""A space's ``execution`` section: the GPU switches a space file sets (``TrainOptions``' own
declarations), kept through its record; unknown keys and non-booleans refused in one line."""

import pytest

from orthotune.core import ConfigError
from orthotune.spaces import parse_space
from orthotune.training import EXECUTION_SWITCHES

BASE = {"datasets": ["cora"], "backbones": ["gcn"], "depths": [2]}


def test_the_section_sets_the_switches_it_names_and_its_cells_keep_them():
    space = parse_space({**BASE, "execution": {"tf32": False, "deterministic": True, "cuda_graph": True}})
    assert dict(space.execution) == {"tf32": False, "deterministic": True, "cuda_graph": True}
    assert all(dict(cell.execution) == dict(space.execution) for cell in space.cells())
    assert parse_space(space.to_dict()) == space  # a search's record parses back to the same switches
    partial = parse_space({**BASE, "execution": {"tf32": False}})
    assert dict(partial.execution) == {"tf32": False}  # the others left to the command line or the default


def test_a_space_without_the_section_sets_no_switch():
    space = parse_space(BASE)
    assert dict(space.execution) == {} and "execution" not in space.to_dict()
    assert dict(parse_space({**BASE, "execution": None}).execution) == {}


def test_a_space_with_arms_takes_the_section_too():
    space = parse_space({"datasets": ["cora"], "execution": {"deterministic": True},
                         "arms": {"GCN": {"backbone": "gcn", "depth": 2}, "JKNet": {"backbone": "jknet", "depth": 2}},
                         "compare": {"against": "GCN"}})
    assert dict(space.execution) == {"deterministic": True}
    assert parse_space(space.to_dict()).execution == space.execution


def test_an_unknown_switch_is_refused_naming_the_valid_ones():
    with pytest.raises(ConfigError) as refused:
        parse_space({**BASE, "execution": {"tf32": True, "bf16": True}})
    message = str(refused.value)
    assert "\n" not in message and "'bf16'" in message
    assert "valid: cuda_graph, deterministic, tf32" in message
    assert set(EXECUTION_SWITCHES) == {"tf32", "deterministic", "cuda_graph"}


@pytest.mark.parametrize("value", ["no", 0, 1, None, [True]])
def test_a_switch_that_is_not_a_boolean_is_refused_with_its_value_and_rule(value):
    with pytest.raises(ConfigError, match=r"^space: execution\.tf32=.* must be true or false$") as refused:
        parse_space({**BASE, "execution": {"tf32": value}})
    assert repr(value) in str(refused.value)


def test_a_section_that_is_not_a_mapping_is_refused():
    with pytest.raises(ConfigError, match="execution: expected a mapping, got list"):
        parse_space({**BASE, "execution": ["tf32"]})
