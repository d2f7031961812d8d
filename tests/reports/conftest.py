from __future__ import annotations

import pytest
from report_stores import build_real_store


@pytest.fixture(scope="session")
def real_store(tmp_path_factory, data_root):
    """A store from a small real search (see report_stores.real_configs)."""
    return build_real_store(tmp_path_factory.getbasetemp() / "real-store")
