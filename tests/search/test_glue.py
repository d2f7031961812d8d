"""The driver-side callbacks fed fake Tune trials: the store recorder, the progress display and
the TensorBoard writer, each checked on what it leaves (rows, lines, event files)."""

import io
import os
import struct
from collections import Counter
from dataclasses import asdict
from datetime import timedelta

import pytest

from orthotune.core import RunResult, Status
from orthotune.search._launch import prior_elapsed
from orthotune.search._live import TensorBoardLogger, optuna_storage_location
from orthotune.search._options import NO_STORAGE
from orthotune.search._progress import SearchProgress, snapshot
from orthotune.search._recorder import StoreRecorder
from orthotune.store import Store, now

ORTHO = {"dataset": "cora", "backbone": "gcn", "depth": 2, "setting": "full", "splits": [0, 1], "ortho": True,
         "T": 2, "beta": 0.5, "lam": 0.0005, "epochs": 4}
PLAIN = {**{k: v for k, v in ORTHO.items() if k not in ("T", "beta", "lam")}, "ortho": False}
TEXAS = {**PLAIN, "dataset": "texas"}


class FakeTrial:
    """What the callbacks read of a Tune trial."""

    def __init__(self, trial_id, config, status="RUNNING", last_result=None, error_file=None):
        self.trial_id, self.config, self.status = trial_id, config, status
        self.last_result, self.error_file = last_result or {}, error_file


def run(split, val, test=0.5, epochs=4, status=Status.COMPLETED, m_sig=0.9, grad_norms=(1.0, 2.0)):
    return asdict(RunResult(split=split, seed=0, status=status, val_acc=val, test_acc=test, val_loss=1.0,
                            best_epoch=epochs, epochs=epochs, m_sig=m_sig, grad_norms=list(grad_norms)))


def history(epochs, repeats=2, member=0):
    """Rows as the trainable reports them: config, repeat, epoch, loss, val, test, val loss."""
    return [[member, r, e, 1.0 / e, 0.1 * e, 0.05 * e, 2.0 / e] for e in epochs for r in range(repeats)]


def final(runs_per_member, objectives):
    return {"final": True, "val_acc": max(objectives), "epoch": 4, "member_val_acc": objectives,
            "history": [], "results": [{"runs": runs, "seconds": 2.0, "seconds_per_epoch": 0.5, "device": "cpu"}
                                       for runs in runs_per_member]}


@pytest.fixture
def store(tmp_path):
    return Store.open(str(tmp_path / "store"), create=True)


# -- the recorder -----------------------------------------------------------------------------

def test_recorder_writes_one_row_and_each_epoch_once_even_when_a_report_is_replayed(store):
    recorder = StoreRecorder(store.uri, "s")
    trial = FakeTrial("t1", ORTHO)
    first = {"history": history([1, 2]), "val_acc": 0.2, "epoch": 2}
    recorder.on_trial_result(0, [trial], trial, first)
    recorder.on_trial_result(0, [trial], trial, first)  # replayed after a restore
    recorder.on_trial_result(0, [trial], trial, {"history": history([2, 3, 4]), "val_acc": 0.4, "epoch": 4})
    trial.status, trial.last_result = "TERMINATED", final([[run(0, 0.4), run(1, 0.6)]], [0.5])
    recorder.on_trial_complete(0, [trial], trial)
    rows = store.read("trials").to_pylist()
    assert len(rows) == 1 and rows[0]["status"] == "completed" and rows[0]["val_acc"] == pytest.approx(0.5)
    epochs = store.read("epochs").to_pylist()
    assert sorted((e["repeat"], e["epoch"]) for e in epochs) == [(r, e) for r in (0, 1) for e in (1, 2, 3, 4)]
    assert {e["split"] for e in epochs if e["repeat"] == 1} == {1}
    assert {e["epoch"]: e["val_loss"] for e in epochs} == {e: pytest.approx(2.0 / e) for e in (1, 2, 3, 4)}


def test_recorder_keeps_per_epoch_gradient_norms_where_recorded(store):
    recorder = StoreRecorder(store.uri, "s")
    trial = FakeTrial("t1", ORTHO, "TERMINATED", final([[run(0, 0.4), run(1, 0.6)]], [0.5]))
    rows = [[*row, [0.5, 0.25] if row[2] == 2 else None] for row in history([1, 2])]
    recorder.on_trial_result(0, [trial], trial, {"history": rows})
    recorder.on_trial_complete(0, [trial], trial)
    norms = {(e["repeat"], e["epoch"]): e["grad_norms"] for e in store.read("epochs").to_pylist()}
    assert norms == {(0, 1): None, (1, 1): None, (0, 2): [0.5, 0.25], (1, 2): [0.5, 0.25]}


def test_recorder_reads_history_rows_without_validation_loss(store):
    recorder = StoreRecorder(store.uri, "s")  # rows of an earlier version, replayed on --resume
    trial = FakeTrial("t1", ORTHO, "TERMINATED", final([[run(0, 0.4), run(1, 0.6)]], [0.5]))
    recorder.on_trial_result(0, [trial], trial, {"history": [row[:6] for row in history([1])]})
    recorder.on_trial_complete(0, [trial], trial)
    assert [e["val_loss"] for e in store.read("epochs").to_pylist()] == [None, None]


def test_recorder_marks_a_trial_without_a_final_report_stopped(store):
    recorder = StoreRecorder(store.uri, "s")
    stopped = FakeTrial("t1", ORTHO, "TERMINATED", {"history": [], "val_acc": 0.2, "epoch": 2,
                                                    "runs": [[run(0, 0.2, epochs=2), run(1, 0.2, epochs=2)]]})
    recorder.on_trial_complete(0, [], stopped)
    rows = {r["trial_id"]: r for r in store.read("trials").to_pylist()}
    assert rows["t1"]["status"] == "stopped" and rows["t1"]["reason"] == "stopped by ASHA"
    assert rows["t1"]["epochs"] == 2


def test_recorder_marks_an_errored_trial_failed_with_its_latest_error_in_one_line(store, tmp_path):
    """Tune writes each failure of a trial to its text error file; the latest one's first
    line is the reason. Without a readable file the reason still says what happened."""
    recorder = StoreRecorder(store.uri, "s")
    errors = tmp_path / "error.txt"
    errors.write_text("Failure # 1 (occurred at 2026-11-24_08-00-00)\nThe actor died unexpectedly.\n\tpid: 1\n"
                      "Failure # 2 (occurred at 2026-11-24_08-00-09)\nThe node running it was lost.\n\tip: x\n")
    recorder.on_trial_error(0, [], FakeTrial("t2", PLAIN, "ERROR", {}, error_file=str(errors)))
    recorder.on_trial_error(0, [], FakeTrial("t3", PLAIN, "ERROR", {}, error_file=str(tmp_path / "none")))
    rows = {r["trial_id"]: r for r in store.read("trials").to_pylist()}
    assert rows["t2"]["status"] == "failed"
    assert rows["t2"]["reason"] == "the trial's worker failed: The node running it was lost."
    assert rows["t3"]["status"] == "failed" and rows["t3"]["reason"] == "the trial's worker failed"


def test_recorder_writes_each_config_of_a_pack_under_its_own_id(store):
    recorder = StoreRecorder(store.uri, "s")
    trial = FakeTrial("p", {"group": [ORTHO, {**ORTHO, "T": 3}]}, "TERMINATED",
                      final([[run(0, 0.4), run(1, 0.4)], [run(0, 0.6), run(1, 0.6)]], [0.4, 0.6]))
    recorder.on_trial_result(0, [trial], trial, {"history": history([1], member=0) + history([1], member=1)})
    recorder.on_trial_complete(0, [trial], trial)
    rows = {r["trial_id"]: r for r in store.read("trials").to_pylist()}
    assert sorted(rows) == ["p-0", "p-1"] and rows["p-1"]["T"] == 3
    assert all(r["tune_trial_id"] == "p" for r in rows.values())
    assert len(store.read("epochs").to_pylist()) == 4


def test_recorder_keeps_the_searchs_summary_with_earlier_sessions_and_a_retried_trial_counted_once(store):
    for trial_id, status in (("old-1", "completed"), ("old-2", "failed")):  # an earlier session's rows
        store.write_trial({"search": "s", "trial_id": trial_id, "status": status, "dataset": "cora",
                           "setting": "full", "backbone": "gcn"}, [])
    recorder = StoreRecorder(store.uri, "s")
    recorder.setup()
    errored = FakeTrial("t1", PLAIN, "ERROR", {})
    recorder.on_trial_error(0, [], errored)
    assert store.summary("s") == {"completed": 1, "failed": 2}
    retried = FakeTrial("t1", PLAIN, "TERMINATED", final([[run(0, 0.4), run(1, 0.6)]], [0.5]))
    recorder.on_trial_complete(0, [], retried)  # Tune retried it: it ends again, under the same id
    pack = FakeTrial("p", {"group": [ORTHO, {**ORTHO, "T": 3}]}, "TERMINATED",
                     final([[run(0, 0.4), run(1, 0.4)], [run(0, 0.6), run(1, 0.6)]], [0.4, 0.6]))
    recorder.on_trial_complete(0, [], pack)
    assert store.summary("s") == {"completed": 4, "failed": 1}
    assert store.summary("s") == dict(Counter(store.trial_statuses("s").values()))


# -- the progress display ---------------------------------------------------------------------

def trials_now():
    done = FakeTrial("a", ORTHO, "TERMINATED", final([[run(0, 0.7), run(1, 0.7)]], [0.7]))
    stopped = FakeTrial("b", PLAIN, "TERMINATED", {"member_val_acc": [0.3], "epoch": 2})
    failed = FakeTrial("c", TEXAS, "ERROR", {"member_val_acc": [0.99]})
    running = FakeTrial("d", TEXAS, "RUNNING", {"member_val_acc": [0.4]})
    return [done, stopped, failed, running]


def test_snapshot_counts_per_status_and_keeps_each_cells_best_without_failures():
    shot = snapshot(trials_now())
    assert (shot.counts["completed"], shot.counts["stopped"], shot.counts["failed"], shot.counts["running"]) == (
        1, 1, 1, 1)
    assert shot.done == 3
    assert {cell: value for cell, (value, _) in shot.best.items()} == {
        "cora/gcn/2/ortho": 0.7, "cora/gcn/2/original": 0.3, "texas/gcn/2/original": 0.4}


def test_trials_tune_stopped_on_ctrl_c_count_as_interrupted_not_stopped():
    """Tune marks the trials it stops on its way out terminated without reporting them ended
    (they have no rows): the last progress line must not call them stopped."""
    out = io.StringIO()
    progress = SearchProgress(total=8, mode="plain", stream=out)
    trials = trials_now()
    for trial in trials[:3]:  # Tune reported a, b and c ended (b: stopped by ASHA)
        (progress.on_trial_error if trial.status == "ERROR" else progress.on_trial_complete)(0, trials, trial)
    cut = FakeTrial("e", ORTHO, "TERMINATED", {"member_val_acc": [0.95], "epoch": 4})  # stopped by Ctrl-C
    progress.on_experiment_end([*trials, cut])
    last = out.getvalue().strip().splitlines()[-1]
    assert "3/8 configs done: 1 completed, 1 stopped, 1 failed; 1 interrupted" in last, last
    assert "1 running, 3 queued" in last and "0.95" not in out.getvalue()  # never a best either
    assert snapshot([*trials, cut]).counts["stopped"] == 2  # without the ended ids: Tune's view


def test_plain_progress_line_has_total_counts_eta_and_per_cell_best():
    out = io.StringIO()
    progress = SearchProgress(total=8, mode="plain", stream=out)
    progress.update(snapshot([]), now=100.0)
    progress._start = 100.0
    progress.update(snapshot(trials_now()), now=130.0)
    text = out.getvalue()
    assert "3/8 configs done: 1 completed, 1 stopped, 1 failed; 1 running, 4 queued" in text
    assert "ETA 50s" in text  # 3 configs in 30 s, 5 to go
    assert "best val_acc cora/gcn/2/ortho: 0.7000 (trial a)" in text
    assert "texas/gcn/2/original: 0.4000" in text and "0.99" not in text  # failed never best
    before = len(text.splitlines())
    progress.update(snapshot(trials_now()), now=131.0)  # nothing changed, under plain_every_s
    assert len(out.getvalue().splitlines()) == before


def test_progress_after_resume_counts_restored_trials_and_keeps_the_clock():
    out = io.StringIO()
    progress = SearchProgress(total=8, mode="plain", stream=out, elapsed_before=3600)
    progress._start = 0.0
    progress.update(snapshot(trials_now()), now=10.0)  # restored: 3 done before this session
    assert "[1h00m] 3/8 configs done" in out.getvalue()
    assert "ETA ?" in out.getvalue()  # no config has ended in this session yet
    more = [*trials_now(), FakeTrial("e", ORTHO, "TERMINATED", final([[run(0, 0.8), run(1, 0.8)]], [0.8]))]
    progress.update(snapshot(more), now=20.0)
    assert "4/8 configs done" in out.getvalue() and "ETA 1m20s" in out.getvalue()  # 1 per 20 s here


def test_bar_mode_draws_a_tqdm_bar_and_survives_pickling():
    import pickle

    out = io.StringIO()
    progress = SearchProgress(total=4, mode="bar", stream=out)
    trials = trials_now()
    for trial in trials[:3]:  # as Tune reports them ended
        (progress.on_trial_error if trial.status == "ERROR" else progress.on_trial_complete)(0, trials, trial)
    progress.on_step_end(0, trials)
    progress.on_experiment_end(trials)
    assert "%|" in out.getvalue() and "3/4 configs done" in out.getvalue()
    copy = pickle.loads(pickle.dumps(progress))
    assert copy.total == 4 and copy.stream is None and copy._bar is None


def test_auto_mode_prints_plain_lines_when_not_a_terminal():
    assert not SearchProgress(total=1, stream=io.StringIO()).bar_mode()


# -- the live views ---------------------------------------------------------------------------

def read_events(folder):
    """(tag, step, value) of every scalar in a TensorBoard event file (TFRecord framing)."""
    from tensorboardX.proto import event_pb2

    scalars = []
    for path in folder.glob("events.out.tfevents.*"):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            event = event_pb2.Event.FromString(data[offset + 12:offset + 12 + length])
            offset += 12 + length + 4
            scalars += [(v.tag, event.step, v.simple_value) for v in event.summary.value if v.HasField("simple_value")]
    return scalars


def test_tensorboard_gets_per_epoch_curves_and_steadiness_per_config(tmp_path):
    logger = TensorBoardLogger(str(tmp_path / "tb"))
    trial = FakeTrial("t1", ORTHO)
    logger.on_trial_result(0, [trial], trial, {"history": history([1, 2]), "member_val_acc": [0.2], "epoch": 2,
                                               "runs": [[run(0, 0.2, m_sig=float("nan")), run(1, 0.2)]]})
    done = final([[run(0, 0.4, m_sig=0.8, grad_norms=(1.0, 3.0)), run(1, 0.6, m_sig=0.6, grad_norms=(3.0, 5.0))]],
                 [0.5])
    with_grads = [[*row, [0.5, 0.25]] for row in history([3, 4])]  # per-layer norms at report epochs
    logger.on_trial_result(0, [trial], trial, {**done, "history": with_grads})
    logger.on_trial_complete(0, [trial], trial)
    scalars = read_events(tmp_path / "tb" / "cora-gcn-2-ortho" / "t1")
    val = sorted((step, value) for tag, step, value in scalars if tag == "val_acc/repeat1")
    assert val == [(e, pytest.approx(0.1 * e)) for e in (1, 2, 3, 4)]
    assert {tag for tag, _, _ in scalars} >= {"train_loss/repeat0", "test_acc/repeat0", "val_loss/repeat1",
                                              "objective/val_acc",
                                              "steadiness/m_sig", "grad_norm/layer01", "grad_norm/layer02",
                                              "grad_norm_epoch/layer01/repeat0", "grad_norm_epoch/layer02/repeat1"}
    # both families count layers from 1, with the same names
    layers = {tag.split("/")[1] for tag, _, _ in scalars if tag.startswith("grad_norm")}
    assert layers == {"layer01", "layer02"}
    m_sig = [(step, value) for tag, step, value in scalars if tag == "steadiness/m_sig"]
    assert m_sig == [(2, pytest.approx(0.9)), (4, pytest.approx(0.7))]  # NaN repeats left out
    assert (4, pytest.approx(4.0)) in [(s, v) for t, s, v in scalars if t == "grad_norm/layer02"]


#: A driver whose disk takes 8 KiB of event files (RLIMIT_FSIZE; SIGXFSZ ignored, so a write
#: past it fails with EFBIG as a full disk's fails with ENOSPC) feeding the logger epochs.
DISK_REFUSES = """
import errno, json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
from orthotune.search._live import TensorBoardLogger
class Trial:
    trial_id, config = "t1", json.loads(sys.argv[2])
logger, trial = TensorBoardLogger(sys.argv[1], flush_s=0), Trial()
for epoch in range(1, 10_000):
    rows = [[0, r, epoch, 1.0 / epoch, 0.5, 0.5, 1.0] for r in range(2)]
    try:
        logger.on_trial_result(0, [trial], trial, {"history": rows, "member_val_acc": [0.5], "epoch": epoch})
    except OSError as failure:
        assert failure.errno == errno.EFBIG, failure
        logger.on_trial_error(0, [trial], trial)
        logger.on_experiment_end([trial])
        print("raised at epoch", epoch)
        break
"""


@pytest.mark.slow  # 3-4 s: kept out of the fast subset
def test_an_event_the_disk_refuses_raises_in_the_driver_and_nothing_waits(tmp_path):
    """The write that fails raises in the callback that made it (the launch turns it into its
    one line); closing afterwards neither raises nor waits, and nothing else reaches stderr."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", DISK_REFUSES, str(tmp_path / "tb"), json.dumps(ORTHO)],
                          capture_output=True, text=True, timeout=60)  # the old writer hung here
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("raised at epoch")
    written = next((tmp_path / "tb").rglob("events.out.tfevents.*"))
    assert written.stat().st_size == 8192  # filled to the limit, then refused


def test_optuna_storage_defaults_beside_a_local_store_and_can_be_turned_off(store):
    assert optuna_storage_location(None, store, "s") == f"{store.root}/optuna/s.journal"
    assert optuna_storage_location(NO_STORAGE, store, "s") is None
    assert optuna_storage_location("sqlite:///x.db", store, "s") == "sqlite:///x.db"


def test_prior_elapsed_counts_a_killed_session_until_its_last_stored_trial(store):
    started = now() - timedelta(hours=2)
    recorder = StoreRecorder(store.uri, "s")
    recorder.on_trial_complete(0, [], FakeTrial("t1", ORTHO, "TERMINATED", final([[run(0, 0.4), run(1, 0.4)]], [0.4])))
    meta = {"options": {"name": "s"}, "state": "running", "session_started_at": started.isoformat(),
            "elapsed_s": 100.0}
    assert prior_elapsed(meta, store) == pytest.approx(100.0 + 7200, abs=5)
    assert prior_elapsed({**meta, "state": "interrupted"}, store) == 100.0


def test_tune_settings_live_only_while_a_search_runs(monkeypatch):
    from orthotune.search._ray_start import TUNE_SETTINGS, tune_settings

    monkeypatch.delenv("RAY_AIR_NEW_OUTPUT", raising=False)
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "1")  # the user's own value wins
    with tune_settings():
        assert os.environ["RAY_AIR_NEW_OUTPUT"] == TUNE_SETTINGS["RAY_AIR_NEW_OUTPUT"]
        assert os.environ["TUNE_GLOBAL_CHECKPOINT_S"] == "1"
    assert "RAY_AIR_NEW_OUTPUT" not in os.environ and os.environ["TUNE_GLOBAL_CHECKPOINT_S"] == "1"


def test_the_eta_counts_down_from_the_plans_estimate_in_the_first_minutes():
    """Given the plan's estimate (300 s of trials), the ETA is what is left of it until two
    minutes have passed and three trial times are measured; then the measured mean rules."""
    out = io.StringIO()
    progress = SearchProgress(total=8, mode="plain", stream=out, estimate_s=300.0)
    progress._start = 0.0
    progress.update(snapshot([]), now=30.0)
    assert "ETA 4m30s" in out.getvalue()  # blind without it: no config has ended
    assert progress.eta(3, 60.0) == 240.0
    progress._seconds = [10.0, 10.0, 10.0]
    assert progress.eta(3, 60.0) == 240.0  # measured, but still the first two minutes
    assert progress.eta(3, 150.0, running=1) == 50.0  # then 5 configs x 10 s
    # overrun: no countdown to zero, this session's rate instead (3 configs in 110 s, 5 to go)
    assert SearchProgress(total=8, estimate_s=100.0).eta(3, 110.0) == pytest.approx(5 * 110 / 3)


def test_after_resume_the_counter_goes_on_from_the_store_and_the_eta_from_trial_times():
    """An earlier session stored 2 configs (1 completed, 1 stopped; 10 s and 4 s): the counter
    reads 2/24, not 0/22; the ETA is the configs left times the mean measured trial time over
    the configs running at once."""
    out = io.StringIO()
    progress = SearchProgress(total=24, mode="plain", stream=out, elapsed_before=60,
                              earlier=Counter({"completed": 1, "stopped": 1}), earlier_seconds=[10.0, 4.0])
    progress._start = 0.0
    progress.update(snapshot([]), now=5.0)
    assert "[1m05s] 2/24 configs done: 1 completed, 1 stopped, 0 failed; 0 running, 22 queued" in out.getvalue()
    assert "ETA 2m34s" in out.getvalue()  # 22 configs x 7 s, one at a time
    ended = FakeTrial("e", ORTHO, "TERMINATED", {**final([[run(0, 0.8), run(1, 0.8)]], [0.8]), "time_total_s": 16.0})
    running = FakeTrial("f", ORTHO, "RUNNING", {})
    progress.on_trial_complete(0, [ended, running], ended)
    progress.update(snapshot([ended, running]), now=30.0)
    last = out.getvalue().strip().splitlines()[-1]
    assert "3/24 configs done: 2 completed, 1 stopped" in last and "1 running, 20 queued" in last
    assert "ETA 3m30s" in last  # 21 configs x mean(10, 4, 16) = 10 s, one running
