"""Checks that need something of the machine (a headless browser, Slurm, root to mount a
filesystem): without it the test skips with one line saying why, and where CI sets the
check's ``ORTHOTUNE_REQUIRE_*`` variable it fails instead, so CI never passes by skipping."""

from __future__ import annotations

import os

import pytest


def skip_or_fail(missing: str | None, switch: str) -> None:
    """Nothing where ``missing`` is None; else skip saying ``missing`` (why the check cannot
    run here), or fail where ``$switch`` is set."""
    __tracebackhide__ = True  # the skip or failure is reported where the check was asked for
    if missing is None:
        return
    if os.environ.get(switch):
        pytest.fail(f"{missing} (${switch} is set: required)")
    pytest.skip(missing)
