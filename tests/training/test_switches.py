"""The GPU switches are declared once, on ``TrainOptions`` (type, default, doc), and read from
there by the layers above before torch loads: ``orthotune.training``'s face is light."""

import dataclasses
import json
import subprocess
import sys

import pytest

from orthotune.core import ConfigError
from orthotune.training import EXECUTION_SWITCHES, TrainOptions


def test_the_switches_are_trainoptions_boolean_fields_with_their_defaults_and_docs():
    fields = {f.name: f for f in dataclasses.fields(TrainOptions)}
    assert list(EXECUTION_SWITCHES) == ["tf32", "deterministic", "cuda_graph"]
    for name, declared in EXECUTION_SWITCHES.items():
        assert fields[name] is declared and declared.type == "bool"
        assert getattr(TrainOptions(), name) is declared.default
        assert declared.metadata["switch"] and "\n" not in declared.metadata["switch"]
    assert not {"report_every", "max_pack", "sync_every"} & set(EXECUTION_SWITCHES)  # only the switches


@pytest.mark.parametrize("name", ["tf32", "deterministic", "cuda_graph"])
def test_a_switch_that_is_not_a_boolean_is_refused(name):
    with pytest.raises(ConfigError, match=rf"^{name}='yes' must be true or false$"):
        TrainOptions(**{name: "yes"})


def test_the_face_and_trainoptions_load_without_torch():
    code = ("import json, sys\nfrom orthotune.training import EXECUTION_SWITCHES, TrainOptions\n"
            "TrainOptions(tf32=False)\nprint(json.dumps(sorted(m for m in ('torch', 'torch_geometric') "
            "if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
