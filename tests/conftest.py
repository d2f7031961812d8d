from __future__ import annotations

from pathlib import Path

import pytest
import torch

DATA_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Processed datasets go to a per-session cache, never into the data root."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ORTHOTUNE_CACHE", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("ORTHOTUNE_DATA_ROOT", str(DATA_ROOT))
    torch.set_num_threads(1)
    yield
    mp.undo()


@pytest.fixture(scope="session")
def data_root():
    from orthotune.training import DataRoot

    if not DATA_ROOT.is_dir():
        pytest.fail(f"benchmark data not found beside the repository: {DATA_ROOT}")
    return DataRoot.resolve(DATA_ROOT)


@pytest.fixture(scope="session")
def cora(data_root):
    from orthotune.training import load_node_data

    return load_node_data("cora", "full", data_root)
