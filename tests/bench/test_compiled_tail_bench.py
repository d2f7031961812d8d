"""The torch.compile bench compiles a packed layer's elementwise tail, checks it against eager
and times both."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from required import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # inductor builds two C++ kernels (10-20 s on 2 cores)
def test_the_compiled_tail_equals_eager_where_it_should_and_both_are_timed():
    skip_or_fail(None if shutil.which("c++") else "no C++ compiler (c++) on this machine", "ORTHOTUNE_REQUIRE_COMPILER")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "compiled_tail.py"), "--cases", "small",
                           "--repeats", "2", "--json"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.splitlines()[-1])
    small = figures["cases"]["small"]
    assert figures["device"] == "cpu" and small["shape"] == [4, 300, 16]
    # elementwise results are exact either way; only the bias's gradient, a sum, may round differently
    assert small["eval_same_bits"] == [True] and small["train_same_bits"][:2] == [True, True]
    assert small["train_max_abs_diff"] < 1e-4
    assert min(small["eval_compile_s"], small["train_compile_s"]) > 0
    parts = ("eval", "train", "forward_with_mask", "forward_with_state")
    assert min(small[f"{part}_{mode}_ms"] for part in parts for mode in ("eager", "compiled")) > 0
