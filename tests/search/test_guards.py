"""The node wait's setting is checked at the edge, like every other input (no Ray starts)."""

from __future__ import annotations

import pytest

from orthotune.cli import main


@pytest.mark.parametrize("value", ["soon", "0", "-5", "nan"])
def test_a_bad_node_wait_is_one_line_before_ray_starts(monkeypatch, capsys, tmp_path, value):
    import ray

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    monkeypatch.setenv("ORTHOTUNE_NODE_WAIT_S", value)
    code = main(["launch", "--space", "quick", "--store", str(tmp_path / "store")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("orthotune launch: error: ORTHOTUNE_NODE_WAIT_S=") and "seconds > 0" in err[0]
    assert not (tmp_path / "store").exists()
