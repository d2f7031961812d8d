"""The compiled-dropout bench builds its kernel, gives the trainer's bits and prints its figures."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from required import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # compiles a C++ kernel against torch's headers (about 50 s on 2 cores)
def test_the_compiled_kernel_gives_the_trainers_bits_and_both_are_timed():
    skip_or_fail(None if shutil.which("c++") else "no C++ compiler (c++) on this machine", "ORTHOTUNE_REQUIRE_COMPILER")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "fused_dropout.py"), "--cases", "small",
                           "--repeats", "2", "--json"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.splitlines()[-1])
    small = figures["cases"]["small"]
    assert figures["build_seconds"] > 0 and small["shape"] == [4, 300, 16]
    assert small["same_bits"] is True
    assert min(small["trainer_ms"], small["draws_ms"], small["compiled_apply_ms"], small["copy_ms"]) > 0
