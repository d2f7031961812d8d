"""The Makefile's entry points: `make demo` names its search once, so the launch, both
reports and the closing message speak of one search and one folder; `make test` builds the
manual strictly besides ruff and pytest."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make not on PATH")
def test_demo_names_one_search_whatever_the_clock_does(tmp_path):
    # a `date` that answers a new second on every call: a search name computed per use
    # (a recursive make variable) would differ between the demo's lines
    counter = tmp_path / "count"
    counter.write_text("0")
    fake = tmp_path / "date"
    fake.write_text(f'#!/bin/sh\nn=$(cat {counter}); echo $((n + 1)) > {counter}; echo "20260101-0000$n"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SEARCH", None)
    # -n prints the recipe without running it; -o setup leaves the venv out of it
    dry = subprocess.run(["make", "-n", "-o", "setup", "-o", ".venv/bin/orthotune", "demo"], cwd=ROOT,
                         env=env, capture_output=True, text=True, check=True).stdout
    names = set(re.findall(r"quick-[0-9-]+", dry))
    assert len(names) == 1, names
    assert dry.count(next(iter(names))) >= 5  # launch, two reports (search and folder), message


@pytest.mark.skipif(shutil.which("make") is None, reason="make not on PATH")
def test_make_test_builds_the_manual_strictly_then_lints_and_tests():
    # CI runs the suite inside `make test`: a make started from there (MAKELEVEL 1) prints
    # "make[1]: Entering directory" first unless told not to
    env = {**os.environ, "MAKELEVEL": "1"}
    dry = subprocess.run(["make", "--no-print-directory", "-n", "-o", "setup", "-o", ".venv/bin/orthotune", "test"],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    steps = [line for line in dry.splitlines() if line.strip()]
    assert [next(i for i, line in enumerate(steps) if word in line)
            for word in ("mkdocs build --strict", "ruff check", "pytest")] == [0, 1, 2], steps
