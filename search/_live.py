"""Live views through tools users already know, fed from the same reports as the store.

- **TensorBoard.** :class:`TensorBoardLogger` is a driver-side Tune callback that writes one
  event-file folder per config (``<store>/tensorboard/SEARCH/<cell>/<trial id>``) with
  tensorboardX (installed with ``ray[tune]``; the viewer is ``pip install tensorboard``):
  per repeat ``train_loss``, ``val_acc``, ``test_acc`` and ``val_loss`` at every epoch of the reports'
  history, the objective at each report, and M_sig and the per-layer gradient norms (mean
  over repeats) where the trainer has measured them. Watch with
  ``tensorboard --logdir <store>/tensorboard/SEARCH``. Ray's own ``TBXLoggerCallback``
  would log one point per report, not the per-epoch history a report carries, hence this.
- **optuna-dashboard.** :func:`optuna_storage` opens the Optuna storage each cell's study
  lives in: by default a ``JournalStorage`` file beside a local store
  (``<store>/optuna/SEARCH.journal``), or an RDB URL or a journal file the user names.
  Ray's ``OptunaSearch`` takes it as its ``storage``, so every trial Optuna asks and is told
  appears while the search runs: ``optuna-dashboard <store>/optuna/SEARCH.journal``.

The Parquet store stays the record; these are views.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from pathlib import Path
from typing import Any

from ray.tune import Callback

from orthotune.core import OBJECTIVE, ConfigError, EpochRow
from orthotune.search._cell_key import cell_key, member_configs
from orthotune.search._objective import TIME_ATTR
from orthotune.search._options import NO_STORAGE
from orthotune.search._trainable import member_trial_id
from orthotune.store import Store

#: ``LaunchOptions.optuna_storage`` value that turns the Optuna storage off.


def optuna_storage_location(spec: str | None, store: Store, search: str) -> str | None:
    """Where a search's Optuna studies live: a URL, a journal file path, or None (off).

    ``spec`` None means the default journal beside a local store (none for a remote one).
    """
    if spec == NO_STORAGE:
        return None
    if spec:
        return spec
    folder = store.local_folder("optuna")
    return f"{folder}/{search}.journal" if folder else None


def optuna_storage(location: str | None):
    """An Optuna storage for ``location``: an RDB URL (``sqlite:///``, ``postgresql://``, ...)
    or a journal file path (its folder is created)."""
    if location is None:
        return None
    import optuna

    if "://" in location:
        try:
            return optuna.storages.RDBStorage(location)
        except Exception as error:  # SQLAlchemy's errors vary by driver
            raise ConfigError(f"optuna_storage={location!r} is not a usable RDB URL: {error}") from None
    from optuna.storages.journal import JournalFileBackend

    path = Path(location).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    drop_torn_tail(path)
    # Optuna's default lock, the one optuna-dashboard takes for the same file on POSIX
    return optuna.storages.JournalStorage(JournalFileBackend(str(path)))


def drop_torn_tail(journal: Path) -> None:
    """Cut a journal's last line where it lacks its newline: a write the disk could not finish
    (full, or the driver killed mid-write). Optuna's reader already skips such a line as not yet
    written, but a later append would follow it and make the whole journal unreadable."""
    try:
        with open(journal, "rb+") as file:
            size = file.seek(0, os.SEEK_END)
            if size == 0:
                return
            file.seek(max(0, size - 65536))
            tail = file.read()
            if tail.endswith(b"\n"):
                return
            cut = tail.rfind(b"\n")
            if cut < 0 and size > len(tail):
                return  # one line longer than the window: leave it to Optuna
            file.truncate(size - len(tail) + cut + 1)
            file.flush()
            os.fsync(file.fileno())
    except FileNotFoundError:
        return


class _EventFile:
    """One config's TensorBoard event file, written on the driver's own thread.

    tensorboardX's ``SummaryWriter`` writes on a thread of its own behind a bounded queue: when
    a write fails there (a full disk) the thread dies and the driver's next event can wait
    forever for room in the queue. Written here, a failing write raises ``OSError`` in the
    driver, as its other writes to the store do. The framing and the protos are tensorboardX's.
    """

    def __init__(self, folder: Path, flush_s: float) -> None:
        from tensorboardX.proto import event_pb2
        from tensorboardX.record_writer import RecordWriter

        folder.mkdir(parents=True, exist_ok=True)
        self._event = event_pb2.Event
        # the name TensorBoard looks for: events.out.tfevents.<seconds>.<host>
        self._records = RecordWriter(str(folder / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"))
        self._flush_s, self._flushed = flush_s, time.monotonic()
        self._write(self._event(wall_time=time.time(), file_version="brain.Event:2"))

    def text(self, tag: str, text: str) -> None:
        from tensorboardX import summary

        self._write(self._event(wall_time=time.time(), step=0, summary=summary.text(tag, text)))

    def scalar(self, tag: str, value: float, step: int) -> None:
        from tensorboardX import summary

        self._write(self._event(wall_time=time.time(), step=step, summary=summary.scalar(tag, value)))

    def close(self) -> None:
        """Flush and close; on a disk that takes no more, the file is closed all the same (the
        buffered events are lost, the store keeps the record)."""
        try:
            self._records.flush()
        except OSError:
            pass
        try:
            self._records.close()  # closes the file even where its last flush fails
        except OSError:
            pass

    def _write(self, event: Any) -> None:
        self._records.write(event.SerializeToString())
        if time.monotonic() - self._flushed >= self._flush_s:
            self._records.flush()
            self._flushed = time.monotonic()


class TensorBoardLogger(Callback):
    """Per-config TensorBoard event files from the trials' reports (see the module docstring)."""

    def __init__(self, folder: str, flush_s: int = 5) -> None:
        self.folder, self.flush_s = folder, flush_s
        self._writers: dict[tuple[str, int], _EventFile] = {}

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles callbacks; writers are files
        return {"folder": self.folder, "flush_s": self.flush_s, "_writers": {}}

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        members = member_configs(trial.config)
        for values in result.get("history", []):
            row = EpochRow.from_list(values)
            writer = self._writer(trial, row.member, members)
            for tag, value in row.scalars().items():
                _scalar(writer, f"{tag}/repeat{row.repeat}", value, row.epoch)
            for layer, norm in enumerate(row.grad_norms or []):  # report epochs
                _scalar(writer, f"grad_norm_epoch/{layer_tag(layer)}/repeat{row.repeat}", norm, row.epoch)
        epoch = int(result.get(TIME_ATTR) or 0)
        objectives = result.get("member_val_acc") or []
        runs = _runs(result)
        for member in range(len(members)):
            writer = self._writer(trial, member, members)
            if member < len(objectives):
                _scalar(writer, f"objective/{OBJECTIVE}", objectives[member], epoch)
            if member < len(runs):
                _steadiness(writer, runs[member], epoch)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self._close(trial)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._close(trial)

    def on_experiment_end(self, trials, **info) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def _writer(self, trial, member: int, members: list[dict[str, Any]]) -> _EventFile:
        key = (trial.trial_id, member)
        if key not in self._writers:
            config = members[member]
            folder = Path(self.folder, cell_key(config).replace("/", "-"),
                          member_trial_id(trial.trial_id, member, len(members)))
            # a trial that starts again after --resume trains from epoch 0: its curves restart
            for old in folder.glob("events.out.tfevents.*") if folder.is_dir() else []:
                old.unlink()
            writer = _EventFile(folder, self.flush_s)
            writer.text("config", json.dumps(config, sort_keys=True, default=str))
            self._writers[key] = writer
        return self._writers[key]

    def _close(self, trial) -> None:
        for key in [k for k in self._writers if k[0] == trial.trial_id]:
            self._writers.pop(key).close()


def _runs(result: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Each config's repeats as reported: so far (``runs``) or final (``results``)."""
    if result.get("final"):
        return [member["runs"] for member in result.get("results") or []]
    return result.get("runs") or []


def _steadiness(writer, runs: list[dict[str, Any]], epoch: int) -> None:
    """M_sig and per-layer gradient norms, mean over the repeats that measured them."""
    m_sig = [r["m_sig"] for r in runs if _finite(r.get("m_sig"))]
    if m_sig:
        _scalar(writer, "steadiness/m_sig", sum(m_sig) / len(m_sig), epoch)
    norms = [r["grad_norms"] for r in runs if r.get("grad_norms")]
    for layer, values in enumerate(zip(*norms)):
        finite = [v for v in values if _finite(v)]
        if finite:
            _scalar(writer, f"grad_norm/{layer_tag(layer)}", sum(finite) / len(finite), epoch)


def layer_tag(index: int) -> str:
    """A layer in TensorBoard tags, counted from 1 (as depth counts graph convolutions) and
    padded to two digits so that TensorBoard sorts layer10 after layer09: ``layer01``."""
    return f"layer{index + 1:02d}"


def _scalar(writer: _EventFile, tag: str, value: Any, step: int) -> None:
    if _finite(value):
        writer.scalar(tag, float(value), step)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def tensorboard_folder(store: Store, search: str) -> str | None:
    """``<store>/tensorboard/SEARCH`` for a local store; None for a remote one."""
    folder = store.local_folder("tensorboard", search)
    if folder is not None:
        os.makedirs(folder, exist_ok=True)
    return folder
