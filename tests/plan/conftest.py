"""The plan tests' shared fixture: a fresh cost cache and the measurements counted."""

import pytest
from no_probe import NoProbe


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """A fresh cost cache, and the measurements made counted (not timed)."""
    import orthotune.plan._cache as kept
    import orthotune.plan._costing as costing
    import orthotune.plan._measuring as measuring

    calls = []
    real = measuring.measure
    monkeypatch.setattr(kept, "plan_cache", lambda: tmp_path / "cache")
    monkeypatch.setattr(costing, "StartProbe", NoProbe)  # a fresh interpreter's imports: not here
    monkeypatch.setattr(costing, "streams", lambda *args, **kwargs: 1)  # measured here, so counted
    monkeypatch.setattr(measuring, "measure", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    return calls
