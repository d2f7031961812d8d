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


def test_a_journal_whose_last_write_was_torn_is_cut_back_to_its_last_whole_line(tmp_path):
    """A full disk (or a kill) can leave the Optuna journal's last line half-written; Optuna
    skips it, but its next append would follow it and make the journal unreadable."""
    import optuna

    from orthotune.search._live import optuna_storage

    journal = tmp_path / "s.journal"
    storage = optuna_storage(str(journal))
    optuna.create_study(storage=storage, study_name="a").optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"op_code": 5, "worker_id": "torn')  # a write the disk could not finish
    storage = optuna_storage(str(journal))
    assert journal.read_bytes() == whole
    optuna.load_study(storage=storage, study_name="a").optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    assert len(optuna.load_study(storage=optuna_storage(str(journal)), study_name="a").trials) == 3


def test_a_database_password_in_the_optuna_storage_url_is_refused_unechoed(monkeypatch, capsys, tmp_path):
    import ray

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    url = "postgresql://orthotune:hunter2zq@db.example:5432/studies"
    code = main(["launch", "--space", "quick", "--store", str(tmp_path / "store"), "--optuna-storage", url])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "carries a password" in err[0] and "PGPASSWORD" in err[0] and "hunter2zq" not in err[0]
    assert "postgresql://orthotune:***@db.example:5432/studies" in err[0]
    assert not (tmp_path / "store").exists()
