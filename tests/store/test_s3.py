"""The store on a real S3 API: moto's threaded server on 127.0.0.1, checking signatures,
reached through pyarrow's S3 filesystem with credentials and endpoint from the environment,
as a user sets them. No Ray here (tests/search/test_s3_search.py runs searches on it)."""

from __future__ import annotations

import threading

import pyarrow.fs as pafs
import pytest

from orthotune.cli import main
from orthotune.core import OrthotuneError
from orthotune.store import Lease, Store, check_store, lease_info, quarantine
from orthotune.store._lease import LeaseHeld


def row(search: str, trial_id: str, **columns) -> dict:
    return {"search": search, "trial_id": trial_id, "status": "completed", "dataset": "cora",
            "setting": "full", "backbone": "gcn", "depth": 2, "val_acc": 0.5, **columns}


def objects(store: Store) -> dict[str, bytes]:
    """Every object under the store's root, by key relative to it."""
    found = {}
    for info in store.fs.get_file_info(pafs.FileSelector(store.root, recursive=True)):
        if info.type == pafs.FileType.File:
            with store.fs.open_input_stream(info.path) as stream:
                found[info.path[len(store.root) + 1:]] = stream.read()
    return found


@pytest.mark.slow
def test_rows_go_to_s3_and_come_back_and_a_corrupt_object_is_skipped_named_and_quarantined(s3, capsys):
    store = Store.open(s3, create=True)
    assert isinstance(store.fs, pafs.S3FileSystem)
    for i in range(3):
        store.write_trial(row("s", f"t{i}"), [{"repeat": 0, "epoch": 1, "val_acc": 0.5}])
    store.save_search_meta("s", {"state": "finished"})
    again = Store.open(s3)  # a second client, as another command would
    assert sorted(again.read("trials")["trial_id"].to_pylist()) == ["t0", "t1", "t2"]
    assert again.read("epochs", search="s").num_rows == 3
    assert [k for k in objects(store) if ".tmp-" in k] == []  # every temporary moved into place
    bad = "trials/search=s/trial-t1.parquet"
    with store.fs.open_output_stream(store.path(bad)) as sink:
        sink.write(objects(store)[bad][:100])  # a torn object, as an interrupted upload by hand leaves
    capsys.readouterr()
    assert sorted(Store.open(s3).read("trials")["trial_id"].to_pylist()) == ["t0", "t2"]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and store.path(bad) in err[0] and "orthotune store check --store" in err[0], err
    problems = check_store(store)
    assert [p.path for p in problems] == [bad]
    assert quarantine(store, problems)[0][0] == bad
    assert check_store(store) == [] and bad not in objects(store)
    assert sorted(Store.open(s3).read("trials")["trial_id"].to_pylist()) == ["t0", "t2"]


@pytest.mark.slow
def test_a_trial_and_the_searchs_summary_go_up_in_three_requests_each_object_whole(s3):
    """The driver's write of an ended trial: its epochs, its row and the search's summary, one
    PUT each (no folder markers, no temporary copied into place, no existence checks)."""
    import logging

    store = Store.open(s3, create=True)
    requests: list[str] = []

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            requests.append(record.getMessage().split('"')[1] if '"' in record.getMessage() else record.getMessage())

    log = logging.getLogger("werkzeug")  # moto's server logs one line per request
    level, handler = log.level, Count()
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        for i in range(3):
            store.write_trial(row("s", f"t{i}"), [{"repeat": 0, "epoch": e, "val_acc": 0.5} for e in (1, 2)])
            store.write_summary("s", {"completed": i + 1})
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    assert len(requests) == 9 and all(r.startswith("PUT ") for r in requests), requests
    assert sorted(o for o in objects(store) if o.startswith(("trials/", "epochs/"))) == sorted(
        f"{table}/search=s/trial-t{i}.parquet" for table in ("trials", "epochs") for i in range(3))
    assert store.read("epochs", search="s").num_rows == 6 and store.summary("s") == {"completed": 3}


def test_the_cli_answers_on_an_s3_store(s3, capsys):
    store = Store.open(s3, create=True)
    store.write_trial(row("s", "t0"), [])
    store.save_search_meta("s", {"state": "finished", "options": {"name": "s"}})
    assert main(["status", "--store", s3]) == 0
    assert "s " in capsys.readouterr().out
    assert main(["store", "check", "--store", s3]) == 0
    assert f"store {s3} is clean" in capsys.readouterr().out


def test_a_wrong_secret_is_refused_by_the_server_in_one_line(s3, monkeypatch, capsys):
    Store.open(s3, create=True)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    assert main(["status", "--store", s3]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "ACCESS_DENIED" in err and "not-the-secret" not in err, err


def test_credentials_from_a_profile_are_used(s3, s3_server, monkeypatch, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[orthotune]\naws_access_key_id = {s3_server.key_id}\n"
                           f"aws_secret_access_key = {s3_server.secret}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_PROFILE", "orthotune")
    store = Store.open(s3, create=True)
    store.write_trial(row("s", "t0"), [])
    assert Store.open(s3).read("trials").num_rows == 1


@pytest.mark.parametrize("userinfo", ["AKIDzq7:s3cr3tzq7", "AKIDzq7", "AKIDzq7:s3cr@tzq7"])
def test_a_uri_carrying_credentials_is_refused_without_echoing_them(s3, userinfo):
    uri = s3.replace("s3://", f"s3://{userinfo}@")
    with pytest.raises(OrthotuneError) as refused:
        Store.open(uri, create=True)
    message = str(refused.value)
    assert "carries credentials" in message and "AWS_ACCESS_KEY_ID" in message and "AWS_PROFILE" in message
    assert "zq7" not in message and "s3cr" not in message
    assert s3.removeprefix("s3://") in message  # the bucket and path are named


# -- the lease on an object store -----------------------------------------------------------
#
# S3 has no exclusive create for pyarrow to use, so a lease there is written, read back after
# REMOTE_SETTLE_S and kept only if it still holds our token. On a strongly consistent store
# (S3 and GCS are) the guarantee is: a driver that starts while a live lease exists is refused;
# of drivers whose writes land within the settle pause of each other exactly one keeps the
# lease (the last writer); and a driver whose lease was overwritten anyway (a racer's write
# landed later than that pause) finds out at its next heartbeat.


@pytest.mark.slow
def test_a_second_driver_is_refused_while_the_first_holds_the_lease(s3):
    store = Store.open(s3, create=True)
    with Lease.acquire(store, "s") as held:
        with pytest.raises(LeaseHeld, match="held by driver pid"):
            Lease.acquire(Store.open(s3), "s")
        assert lease_info(store, "s").token == held.token
    assert lease_info(store, "s") is None


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(2))
def test_of_drivers_racing_within_the_settle_pause_exactly_one_keeps_the_lease(s3, round_):
    Store.open(s3, create=True)
    start, outcomes = threading.Barrier(3), []

    def driver() -> None:
        store = Store.open(s3)
        start.wait()
        try:
            outcomes.append(Lease.acquire(store, "s"))
        except LeaseHeld as refused:
            outcomes.append(refused)

    threads = [threading.Thread(target=driver) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if isinstance(o, Lease)]
    assert len(winners) == 1, outcomes
    assert lease_info(Store.open(s3), "s").token == winners[0].token
    winners[0].release()


@pytest.mark.slow
def test_a_driver_whose_lease_was_overwritten_learns_it_at_its_next_heartbeat(s3):
    store = Store.open(s3, create=True)
    first = Lease.acquire(store, "s")
    assert first.heartbeat() and not first.lost
    late = {**first.document, "token": "a-racer-whose-write-landed-late", "pid": first.document["pid"]}
    store.write_json("leases/s.json", late)  # a racer's write landing after our read-back
    assert not first.heartbeat() and first.lost
    first.release()  # not ours any more: left in place
    assert lease_info(store, "s").token == "a-racer-whose-write-landed-late"
