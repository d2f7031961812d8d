"""Running a bench script from a test: its own process, its JSON line back."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from required import skip_or_fail

ROOT = Path(__file__).resolve().parents[1]


def compiled_bench(script: str, *args: str, timeout: int = 900) -> dict:
    """``bench/<script> *args --json`` where it needs a C++ compiler (skipped without one,
    unless ``ORTHOTUNE_REQUIRE_COMPILER`` makes that a failure); the figures it prints."""
    skip_or_fail(None if shutil.which("c++") else "no C++ compiler (c++) on this machine", "ORTHOTUNE_REQUIRE_COMPILER")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args, "--json"], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])
