"""What a resumed search must leave in its store, shared by the failure scenarios (a full
disk, a lost node): every trial once, no config trained twice, and the rows stored before the
failure untouched."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from orthotune.store import Store


def stored(store: Path, name: str) -> list[dict]:
    """Search ``name``'s trial rows (none until the store's creator has written its marker)."""
    created = (store / "orthotune-store.json").exists()
    return Store.open(str(store)).read("trials", search=name).to_pylist() if created else []


def assert_whole(trials: list[dict], total: int, before: dict[str, object]) -> None:
    """``total`` trials, each once and each a different config; ``before`` (trial id ->
    ``finished_at``) names rows stored before the failure, which must not have been rewritten."""
    ids = [t["trial_id"] for t in trials]
    assert len(ids) == len(set(ids)) == total, Counter(ids)
    assert len({(t["ortho"], t["T"], t["lr"]) for t in trials}) == total  # no config trained twice
    assert all(t["finished_at"] == before[t["trial_id"]] for t in trials if t["trial_id"] in before)
