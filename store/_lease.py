"""One driver per search: an exclusive lease file, ``leases/NAME.json`` in the store.

The file is a JSON object::

    {"search": NAME, "host": HOSTNAME, "pid": PID, "token": RANDOM_HEX, "epoch": N,
     "started_at": ISO_UTC, "heartbeat_at": ISO_UTC, "orthotune_version": VERSION}

A driver takes the lease with :meth:`Lease.acquire` before it runs a search, keeps it fresh
with :meth:`Lease.start_heartbeat` (``heartbeat_at`` rewritten every few seconds) and gives
it back with :meth:`Lease.release` (or by leaving its ``with`` block).

Takeover rule: a lease's holder is **dead** when

* it ran on this same host and its pid is no longer running (``os.kill(pid, 0)`` raises
  ``ProcessLookupError``), or
* its ``heartbeat_at`` is older than ``stale_after`` seconds (60 by default, or
  :data:`STALE_ENV` seconds where that is set), wherever it ran.

Otherwise it is alive and :meth:`Lease.acquire` raises :class:`LeaseHeld`. A dead lease is
taken over atomically: the old file is renamed aside to a hidden name, checked to be the
very file judged dead (a racer's fresh lease is put back), and the new lease is created
exclusively; of two drivers racing for one dead lease exactly one wins, the other gets
:class:`LeaseHeld`. A lease file still being created (empty or partial) counts as alive
until it is ``stale_after`` seconds old.

Fencing: a driver paused (SIGSTOP, a suspended VM, a long GC) past ``stale_after`` loses its
lease to the driver that takes it over, and may wake up later still believing it holds it.
Every lease carries an ``epoch`` (one more than the epoch of the dead lease it took over), and
a driver's store is *fenced* with :meth:`Lease.check` (``Store.fenced``): before each write
of a trial row, an epoch row, a summary or a search record, the lease file is read back and
the write refused with :class:`LeaseLost` unless it still holds this driver's token and epoch.
The driver then stops with that one line and writes nothing more. What remains is the
instant between the check and the write: a pause that falls exactly there is not caught.

On a local filesystem exclusivity comes from ``os.open(O_CREAT | O_EXCL)`` (as Optuna's
``JournalFileOpenLock``). Object stores (s3://, gs://) have no exclusive create: there the
lease is written, then read back after a short pause and our random token compared; this is
best-effort (two drivers starting within that pause on a store without read-after-write
consistency could both believe they won).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

import orthotune
from orthotune.core import OrthotuneError, SearchCrashed
from orthotune.store._io import TEMPORARY_PREFIX, durable_write, fsync_folder, make_folder
from orthotune.store._names import check_search_name
from orthotune.store._store import now

if TYPE_CHECKING:
    from orthotune.store._store import Store

LEASES = "leases"
#: The environment variable that sets how old a heartbeat may be before its lease is judged
#: dead (seconds; 60 where unset). Shorter: a paused or killed driver is taken over sooner,
#: but a driver whose heartbeat is slowed that long (an overloaded node) is taken over too.
STALE_ENV = "ORTHOTUNE_LEASE_STALE_S"
DEFAULT_STALE_S = 60.0
#: The heartbeat's period: at most this, and at most a quarter of the staleness.
HEARTBEAT_S = 10.0
#: Remote stores: how long to wait before reading a written lease back.
REMOTE_SETTLE_S = 1.0


class LeaseHeld(OrthotuneError):
    """Another live driver holds the search's lease."""


class LeaseLost(SearchCrashed):
    """This driver's lease was taken over (it was judged dead): its writes are refused."""


def lease_stale_s() -> float:
    """Seconds without a heartbeat after which a lease is dead: :data:`STALE_ENV`, or 60."""
    raw = os.environ.get(STALE_ENV, "").strip()
    if not raw:
        return DEFAULT_STALE_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise OrthotuneError(f"{STALE_ENV}={raw!r} must be a positive number of seconds")
    return value


@dataclass(frozen=True)
class LeaseInfo:
    """A lease as read from the store, judged alive or dead by the takeover rule."""

    host: str
    pid: int
    started_at: str
    heartbeat_at: str
    heartbeat_age: float  # seconds since heartbeat_at (since the file was written, if unreadable)
    alive: bool
    version: str = ""
    token: str = ""
    epoch: int = 0

    def describe(self) -> str:
        return f"driver pid {self.pid} on {self.host} (heartbeat {self.heartbeat_age:.0f} s ago)"


def lease_info(store: Store, name: str, stale_after: float | None = None) -> LeaseInfo | None:
    """The lease on search ``name``, or None where there is none. Reads only."""
    found = _read(store, _relative(name), lease_stale_s() if stale_after is None else stale_after)
    return None if found is None else found[0]


class Lease:
    """A held lease. Take one with :meth:`acquire`; a context manager that releases it."""

    def __init__(self, store: Store, name: str, document: dict[str, Any], stale_after: float) -> None:
        self.store, self.name, self.document, self.stale_after = store, name, document, stale_after
        self.lost = False  # set when the heartbeat finds the file no longer ours
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def token(self) -> str:
        return self.document["token"]

    @property
    def epoch(self) -> int:
        return int(self.document["epoch"])

    @classmethod
    def acquire(cls, store: Store, search_name: str, stale_after: float | None = None) -> Lease:
        """Take the lease on ``search_name``; :class:`LeaseHeld` if a live driver holds it."""
        relative = _relative(search_name)
        stamp = now().isoformat(timespec="milliseconds")
        document = {"search": search_name, "host": socket.gethostname(), "pid": os.getpid(),
                    "token": uuid.uuid4().hex, "epoch": 1, "started_at": stamp, "heartbeat_at": stamp,
                    "orthotune_version": orthotune.__version__}
        lease = cls(store, search_name, document, lease_stale_s() if stale_after is None else stale_after)
        if _is_local(store):
            lease._acquire_local(store.path(relative))
        else:
            lease._acquire_remote(relative)
        return lease

    def _acquire_local(self, path: str) -> None:
        make_folder(os.path.dirname(path))
        for _ in range(3):  # a vanished or taken-over file is looked at again, a few times at most
            try:
                _create_exclusive(path, _encode(self.document))
                return
            except FileExistsError:
                pass
            found = _read(self.store, _relative(self.name), self.stale_after)
            if found is None:
                continue
            holder, identity = found
            if holder.alive:
                raise self._held(holder)
            aside = self._move_dead_aside(path, holder, identity)
            self.document = {**self.document, "epoch": holder.epoch + 1}
            try:
                _create_exclusive(path, _encode(self.document))
                return
            except FileExistsError:  # a racer created it first: the next round judges its lease
                continue
            finally:
                # removed only now: while the dead file exists its inode cannot be reused by a
                # new lease, so a racer comparing identities never mistakes ours for the dead one
                if aside is not None:
                    os.unlink(aside)
        found = _read(self.store, _relative(self.name), self.stale_after)
        raise self._held(found[0] if found else None)

    def _move_dead_aside(self, path: str, dead: LeaseInfo, identity: Any) -> str | None:
        """Rename the dead lease aside and return where to; None if another driver moved it
        first. If what moved is not the file judged dead (a racer replaced it meanwhile), put
        it back and raise :class:`LeaseHeld`."""
        aside = os.path.join(os.path.dirname(path), f"{TEMPORARY_PREFIX}dead-lease-{uuid.uuid4().hex}")
        try:
            os.rename(path, aside)
        except FileNotFoundError:  # another driver moved it first: race it for the create
            return None
        moved = _read(self.store, os.path.relpath(aside, self.store.root), self.stale_after)
        if moved is None or moved[1] != identity or moved[0].token != dead.token:
            with contextlib.suppress(FileExistsError):
                os.link(aside, path)  # a link never overwrites: a third driver's file stays
            os.unlink(aside)
            found = _read(self.store, _relative(self.name), self.stale_after)
            raise self._held(found[0] if found else None)
        fsync_folder(os.path.dirname(path))
        return aside

    def _acquire_remote(self, relative: str) -> None:
        found = _read(self.store, relative, self.stale_after)
        if found is not None and found[0].alive:
            raise self._held(found[0])
        if found is not None:
            self.document = {**self.document, "epoch": found[0].epoch + 1}
        self.store.write_json(relative, self.document)
        time.sleep(REMOTE_SETTLE_S)  # a racer's write lands in this pause; the last one wins
        found = _read(self.store, relative, self.stale_after)
        if found is None or found[0].token != self.token:
            raise self._held(found[0] if found else None)

    def _held(self, holder: LeaseInfo | None) -> LeaseHeld:
        who = holder.describe() if holder else "another driver"
        return LeaseHeld(
            f"search {self.name!r} in store {self.store.uri!r} is held by {who}; a lease is taken over only "
            f"when its driver's pid is gone from its host or its heartbeat is older than {self.stale_after:g} s"
        )

    # -- keeping it ------------------------------------------------------------------------

    def heartbeat(self) -> bool:
        """Rewrite ``heartbeat_at``; False (and ``lost``) when the file is no longer ours."""
        relative = _relative(self.name)
        found = _read(self.store, relative, self.stale_after)
        if found is None or found[0].token != self.token or found[0].epoch != self.epoch:
            self.lost = True
            return False
        self.document = {**self.document, "heartbeat_at": now().isoformat(timespec="milliseconds")}
        data = _encode(self.document)
        if _is_local(self.store):
            durable_write(self.store.path(relative), lambda sink: sink.write(data))
        else:
            self.store.write_json(relative, self.document)
        return True

    def check(self) -> None:
        """The fence: :class:`LeaseLost` unless the lease file still holds this lease (its token
        and epoch). Called before each of the driver's writes to the store (``Store.fenced``)."""
        found = _read(self.store, _relative(self.name), self.stale_after)
        holder = None if found is None else found[0]
        if holder is not None and holder.token == self.token and holder.epoch == self.epoch:
            return
        self.lost = True
        other = (f"{holder.describe()}, lease epoch {holder.epoch}" if holder
                 else "another driver (its lease since released)")
        raise LeaseLost(
            f"search {self.name!r} in store {self.store.uri!r} was lost by this driver (pid {os.getpid()}, lease "
            f"epoch {self.epoch}) to {other}: its heartbeat went older than {self.stale_after:g} s (paused or cut "
            f"off) and that driver took the search over; this driver stops and writes nothing more")

    def start_heartbeat(self, every: float | None = None) -> None:
        """Heartbeat every ``every`` seconds (:data:`HEARTBEAT_S`, or a quarter of the staleness
        where that is shorter) on a daemon thread until :meth:`release`."""
        every = min(HEARTBEAT_S, self.stale_after / 4) if every is None else every
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._beat, args=(every,), daemon=True,
                                        name=f"orthotune-lease-{self.name}")
        self._thread.start()

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                if not self.heartbeat():
                    return
            except OSError:  # a transient storage error: the next beat tries again
                continue

    def release(self) -> None:
        """Stop the heartbeat and remove the lease file, only if it still holds our token."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        relative = _relative(self.name)
        # a store that cannot be read or written now (read-only, unreachable) keeps the file:
        # its pid and heartbeat tell the next driver that this one is dead
        with contextlib.suppress(OSError):
            found = _read(self.store, relative, self.stale_after)
            if found is None or found[0].token != self.token:
                return
            if _is_local(self.store):
                os.unlink(self.store.path(relative))
            else:
                self.store.fs.delete_file(self.store.path(relative))

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _relative(name: str) -> str:
    return f"{LEASES}/{check_search_name(name)}.json"


def _is_local(store: Store) -> bool:
    return isinstance(store.fs, pafs.LocalFileSystem)


def _encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, indent=2).encode()


def _create_exclusive(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_folder(os.path.dirname(path))


def _read(store: Store, relative: str, stale_after: float) -> tuple[LeaseInfo, Any] | None:
    """The lease and the file's identity (device, inode; None on a remote store), or None."""
    path = store.path(relative)
    try:
        if _is_local(store):
            with open(path, "rb") as file:
                stat = os.fstat(file.fileno())
                raw = file.read()
            identity, written = (stat.st_dev, stat.st_ino), stat.st_mtime
        else:  # one HEAD and one GET (the stream's metadata holds the object's Last-Modified)
            with store.fs.open_input_stream(path) as stream:
                raw = stream.read()
                modified = stream.metadata().get("Last-Modified", b"").decode()
            identity, written = None, _timestamp(modified)
    except FileNotFoundError:
        return None
    return _judge(raw, written, stale_after), identity


def _timestamp(modified: str) -> float:
    """An object's ``Last-Modified`` (ISO 8601, as pyarrow gives it) in seconds; now if absent."""
    try:
        return datetime.fromisoformat(modified).timestamp()
    except ValueError:
        return time.time()


def _judge(raw: bytes, written: float, stale_after: float) -> LeaseInfo:
    try:
        doc = json.loads(raw.decode())
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        host, pid, beat = str(doc["host"]), int(doc["pid"]), str(doc["heartbeat_at"])
        age = time.time() - datetime.fromisoformat(beat).timestamp()
    except (ValueError, KeyError, TypeError):
        # being created right now (empty), or damaged: alive until the file itself goes stale
        age = time.time() - written
        return LeaseInfo(host="?", pid=0, started_at="", heartbeat_at="", heartbeat_age=age,
                         alive=age <= stale_after)
    gone_here = host == socket.gethostname() and not _pid_running(pid)
    return LeaseInfo(host=host, pid=pid, started_at=str(doc.get("started_at", "")), heartbeat_at=beat,
                     heartbeat_age=age, alive=not gone_here and age <= stale_after,
                     version=str(doc.get("orthotune_version", "")), token=str(doc.get("token", "")),
                     epoch=_epoch(doc.get("epoch")))


def _epoch(value: Any) -> int:
    """A lease's epoch; 0 for a lease an older orthotune wrote (none), so a takeover makes 1."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _pid_running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # somebody else's process: it exists
        return True
    return True
