"""The demo benchmark runs make demo's own recipe: the commands `make -n demo` prints."""

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("demo_bench", ROOT / "bench" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("make") is None, reason="make not on PATH")
def test_the_recipe_is_the_demos_launch_then_one_report_of_both_formats(tmp_path):
    commands = _bench().recipe(str(tmp_path / "store"), "bench-demo")
    assert [c[1] for c in commands] == ["launch", "report"]  # the messages (echo) are left out
    launch, report = commands
    assert launch[0].endswith("orthotune") and launch[launch.index("--space") + 1] == "quick"
    for command in commands:
        assert command[command.index("--store") + 1] == str(tmp_path / "store")
    assert report[report.index("--search") + 1] == "bench-demo"
    outputs = [report[i + 1] for i, arg in enumerate(report) if arg == "-o"]
    assert outputs == ["runs/bench-demo/report.md", "runs/bench-demo/report.html"]
