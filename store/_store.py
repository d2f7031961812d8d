"""The Parquet store: every trial of every search, declared once and written atomically.

No pickle lives here: rows are Parquet, records JSON. A search resumes from its rows (Ray
Tune's own experiment state, which pickles, stays in a scratch folder outside the store);
stores written by orthotune 0.2 also hold a ``tune/NAME/`` folder, which is never read.

Layout under the store root (a local path or any URI pyarrow's filesystems understand)::

    orthotune-store.json                   marker: format and schema version
    trials/search=NAME/trial-ID.parquet    one row per trial (TRIALS_SCHEMA)
    epochs/search=NAME/trial-ID.parquet    per-epoch history of that trial (EPOCHS_SCHEMA)
    searches/NAME.json                     how the search was launched, and its state
    leases/NAME.json                       the live driver's lease on that search (see _lease)
    quarantine/STAMP/...                   what ``orthotune store check --quarantine`` moved aside
    optuna/NAME.journal                    the cells' Optuna studies (optuna-dashboard)
    tensorboard/NAME/                      TensorBoard event files

Both tables are hive-partitioned Parquet datasets:
``pyarrow.dataset.dataset(ROOT + "/trials", partitioning="hive")`` reads them, as do
DuckDB and pandas. Every write casts to the declared schema. A trial's file name is
derived from the search and trial id alone, so writing the same trial again (a trial
Tune retried after its worker died) replaces the file instead of adding rows, and two
searches never share a file. Files are written under a hidden temporary name (readers
skip names starting with ``.``) and then moved into place, so no reader sees half a file.

Durability: on a local filesystem the temporary file is flushed and fsync'ed before
``os.replace`` moves it into place, and the folder is fsync'ed after (the rename itself
must reach the disk), so a power cut leaves the old file or the new one, never a torn one.
On a remote filesystem (s3://, gs://, ...) the put-then-move is retried with backoff on
transient ``OSError``. Readers are tolerant all the same: a Parquet file that cannot be
read (truncated, corrupt, or of a schema that does not cast) is skipped with one warning
line naming it and ``orthotune store check``, which lists and quarantines such files.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.fs as pafs
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pyarrow.dataset as ds

from orthotune.core import Group, OrthotuneError, TrainConfig, column_name, declared

#: v2 added the variant switches of the config (bound, transform, hybrid, ...) and
#: ``repeat_val_loss``; v1 files are read through :func:`upgrade_v1` (their runs used the
#: switches' v1 behaviour, which :data:`V1_VARIANT` states). v3: ``depth`` counts every graph
#: convolution (before: the hidden ones), and each row names the version it was written
#: with (``schema_version``); older rows are read through :func:`upgrade_v2`.
SCHEMA_VERSION = 3
MARKER = "orthotune-store.json"
STORE_FORMAT = "orthotune-store"
SEARCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
#: Files being written carry this hidden prefix until they are moved into place.
TEMPORARY_PREFIX = ".tmp-"
#: Remote writes: attempts, and the first backoff (doubled each retry, plus jitter).
REMOTE_ATTEMPTS, REMOTE_BACKOFF_S = 4, 0.5
#: What reading a damaged or foreign Parquet file raises (ArrowInvalid is a ValueError).
READ_ERRORS = (pa.ArrowException, OSError, ValueError)

#: The partition column both tables share (it lives in the path, not in the files).
PARTITION = pa.schema([pa.field("search", pa.string())])

_ints = pa.list_(pa.int32())
_floats = pa.list_(pa.float64())
_ARROW = {"int": pa.int32(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string(), "ints": _ints}
_REQUIRED = {"dataset", "setting", "backbone"}


def config_fields() -> list[pa.Field]:
    """One typed column per :class:`TrainConfig` field, derived from its declaration."""
    return [pa.field(column_name(f), _ARROW[f.metadata["rule"].kind], nullable=f.name not in _REQUIRED)
            for f in declared(TrainConfig)]


#: What a v1 store's runs did for the switches v1 had no column for (v1 trained the paper
#: text's literal Frobenius bounding, selected on validation accuracy, linear layout).
V1_VARIANT = dict(bound="frobenius", transform="newton", hybrid="init", target="cI", target_trainable=True,
                  input_T=0, variant="v1", layout="linear", conv_bias=True, batch_norm=False,
                  feature_transform=True, gcnii_variant=False, directed=False, selection="val_acc")

#: The variant switches with their declared defaults. A switch added after schema v2
#: shipped (``io_bias``, ...) reads as null from files written before it; every switch's
#: default is the behaviour from before it existed (a new switch never changes old runs),
#: and a row written with it never holds null, so :func:`fill_switch_defaults` fills every null with
#: the default (v1 rows too, after :func:`upgrade_v1` has filled what v1 did differently).
#: Otherwise the report, which leaves null switches out of a cell's key, would split old
#: rows and new rows of the same model into two cells.
SWITCH_DEFAULTS = {column_name(f): f.default for f in declared(TrainConfig) if f.metadata["group"] is Group.VARIANT}

TRIALS_SCHEMA = pa.schema(
    [
        pa.field("search", pa.string(), nullable=False),
        pa.field("trial_id", pa.string(), nullable=False),
        pa.field("tune_trial_id", pa.string()),  # the Ray Tune trial that trained it
        pa.field("status", pa.string(), nullable=False),  # a Status value
        pa.field("reason", pa.string()),
        # the config, one typed column per declared field (Ortho-GConv values null for the original arm)
        *config_fields(),
        # the objective and what the reports read (test at the validation-best epoch)
        pa.field("val_acc", pa.float64()),
        pa.field("val_acc_std", pa.float64()),
        pa.field("test_acc", pa.float64()),
        pa.field("test_acc_std", pa.float64()),
        pa.field("repeat_split", _ints),
        pa.field("repeat_seed", _ints),
        pa.field("repeat_status", pa.list_(pa.string())),
        pa.field("repeat_val_acc", _floats),
        pa.field("repeat_test_acc", _floats),
        pa.field("repeat_val_loss", _floats),
        pa.field("repeat_best_epoch", _ints),
        pa.field("repeat_epochs", _ints),
        pa.field("epochs", pa.int32()),  # epochs trained (most over the repeats)
        pa.field("best_epoch", pa.int32()),  # latest validation-best epoch over the repeats
        pa.field("m_sig", pa.float64()),
        pa.field("smoothness", pa.float64()),
        pa.field("grad_norms", _floats),  # per layer, mean over the repeats
        pa.field("grad_norm_ratio", pa.float64()),  # first layer / last layer
        pa.field("seconds", pa.float64()),
        pa.field("seconds_per_epoch", pa.float64()),
        pa.field("device", pa.string()),
        pa.field("orthotune_version", pa.string()),
        pa.field("torch_version", pa.string()),
        pa.field("pyg_version", pa.string()),
        pa.field("ray_version", pa.string()),
        pa.field("optuna_version", pa.string()),
        pa.field("finished_at", pa.timestamp("ms", tz="UTC")),
        pa.field("schema_version", pa.int32()),  # the version that wrote the row; null: before v3
    ],
    metadata={"orthotune.schema_version": str(SCHEMA_VERSION)},
)

EPOCHS_SCHEMA = pa.schema(
    [
        pa.field("search", pa.string(), nullable=False),
        pa.field("trial_id", pa.string(), nullable=False),
        pa.field("repeat", pa.int32(), nullable=False),
        pa.field("split", pa.int32()),
        pa.field("seed", pa.int32()),
        pa.field("epoch", pa.int32(), nullable=False),
        pa.field("train_loss", pa.float64()),
        pa.field("val_acc", pa.float64()),
        pa.field("test_acc", pa.float64()),
        pa.field("val_loss", pa.float64()),
        pa.field("grad_norms", _floats),  # per layer ||dL/dW(l)||_F, at the report epochs only
    ],
    metadata={"orthotune.schema_version": str(SCHEMA_VERSION)},
)

TABLES = {"trials": TRIALS_SCHEMA, "epochs": EPOCHS_SCHEMA}


def check_search_name(name: str) -> str:
    if not isinstance(name, str) or not SEARCH_NAME.match(name):
        raise OrthotuneError(
            f"search name {name!r} must start with a letter or digit and use only letters, "
            f"digits, '_', '.', '-' (at most 100 characters)"
        )
    return name


@dataclass(frozen=True)
class Store:
    """A store root on a pyarrow filesystem. Open it with :meth:`open`."""

    uri: str
    fs: pafs.FileSystem
    root: str
    #: Files already warned about through this store (a report reads a table more than once).
    _warned: set[str] = field(default_factory=set, compare=False, repr=False)

    @classmethod
    def open(cls, uri: str, create: bool = False) -> Store:
        """Open the store at ``uri``; with ``create``, make one where nothing is yet.

        A folder that holds other files but no orthotune marker is refused: it is not
        ours, and writing into it could mix our files with somebody else's.
        """
        fs, root = _filesystem(uri)
        store = cls(str(uri), fs, root.rstrip("/"))
        marker = fs.get_file_info(store.path(MARKER))
        if marker.type == pafs.FileType.File:
            store._check_marker()
            return store
        listing = fs.get_file_info(root)
        if listing.type == pafs.FileType.File:
            raise OrthotuneError(f"store {uri!r} is a file, not an orthotune store folder")
        exists = listing.type == pafs.FileType.Directory
        if exists and fs.get_file_info(pafs.FileSelector(root)):
            raise OrthotuneError(f"{uri!r} is not an orthotune store (no {MARKER}); refusing to use it")
        if not create:
            raise OrthotuneError(f"no orthotune store at {uri!r}")
        fs.create_dir(root, recursive=True)
        store.write_json(MARKER, {"format": STORE_FORMAT, "schema_version": SCHEMA_VERSION})
        return store

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def _check_marker(self) -> None:
        try:
            marker = self.read_json(MARKER)
        except (ValueError, OSError) as error:
            raise OrthotuneError(f"store marker {self.path(MARKER)!r} is unreadable: {error}") from None
        if not isinstance(marker, dict) or marker.get("format") != STORE_FORMAT:
            raise OrthotuneError(f"{self.uri!r} is not an orthotune store (bad {MARKER})")
        version = marker.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise OrthotuneError(
                f"store {self.uri!r} has schema version {version!r}; this orthotune reads "
                f"versions <= {SCHEMA_VERSION}: upgrade orthotune"
            )

    # -- small JSON documents (marker, search metadata) --------------------------------

    def read_json(self, relative: str) -> Any:
        with self.fs.open_input_stream(self.path(relative)) as stream:
            return json.loads(stream.read().decode())

    def write_json(self, relative: str, value: Any) -> None:
        self._atomic_write(relative, lambda sink: sink.write(json.dumps(value, indent=2).encode()))

    def exists(self, relative: str) -> bool:
        return self.fs.get_file_info(self.path(relative)).type != pafs.FileType.NotFound

    # -- the Parquet tables -------------------------------------------------------------

    def write_trial(self, trial: Mapping[str, Any], epochs: Iterable[Mapping[str, Any]]) -> None:
        """Write one trial's row and its epoch rows; writing it again replaces them."""
        search, trial_id = check_search_name(trial["search"]), str(trial["trial_id"])
        trial = {**trial, "schema_version": SCHEMA_VERSION}
        name = f"search={search}/trial-{_safe(trial_id)}.parquet"
        epoch_rows = [{**row, "search": search, "trial_id": trial_id} for row in epochs]
        # epochs first: a reader that sees the trial row also sees its history
        self._write_table("epochs", name, epoch_rows)
        self._write_table("trials", name, [trial])

    def _write_table(self, table: str, name: str, rows: list[Mapping[str, Any]]) -> None:
        schema = TABLES[table]
        data = pa.Table.from_pylist([dict(r) for r in rows], schema=schema).drop_columns(["search"])
        file_schema = data.schema.with_metadata(schema.metadata)
        data = data.cast(file_schema)
        self._atomic_write(f"{table}/{name}", lambda sink: pq.write_table(data, sink))

    def _atomic_write(self, relative: str, write: Callable[[IO[bytes]], object]) -> None:
        final = self.path(relative)
        if isinstance(self.fs, pafs.LocalFileSystem):
            durable_write(final, write)
        else:
            retrying(lambda: self._remote_write(final, write))

    def _remote_write(self, final: str, write: Callable[[IO[bytes]], object]) -> None:
        """One attempt: put a hidden temporary, then move it over ``final``."""
        folder = final.rsplit("/", 1)[0]
        self.fs.create_dir(folder, recursive=True)
        temporary = f"{folder}/{TEMPORARY_PREFIX}{uuid.uuid4().hex}"
        try:
            with self.fs.open_output_stream(temporary) as sink:
                write(sink)
            self.fs.move(temporary, final)
        except BaseException:
            with contextlib.suppress(OSError):
                self.fs.delete_file(temporary)
            raise

    def dataset(self, table: str) -> TolerantDataset:
        """A table as a dataset whose reads skip unreadable files (one warning line each)."""
        return TolerantDataset(self, table, self._dataset(table))

    def _dataset(self, table: str, files: list[str] | None = None) -> ds.Dataset:
        # imported here: pyarrow.dataset pulls in pandas, which `launch --help` does not need
        import pyarrow.dataset as ds

        schema = TABLES[table]
        base = self.path(table)
        partitioning = ds.partitioning(PARTITION, flavor="hive")
        if files is not None:
            return ds.dataset(files, schema=schema, format="parquet", filesystem=self.fs,
                              partitioning=partitioning, partition_base_dir=base)
        if self.fs.get_file_info(base).type != pafs.FileType.Directory:
            return ds.dataset(pa.Table.from_pylist([], schema=schema))
        return ds.dataset(base, schema=schema, format="parquet", filesystem=self.fs, partitioning=partitioning)

    def read_file(self, table: str, path: str) -> pa.Table:
        """One Parquet file of ``table`` (a filesystem path), whole, in the declared schema;
        raises one of :data:`READ_ERRORS` when it cannot be read or cast."""
        return self._dataset(table, [path]).to_table().cast(TABLES[table])

    def read(self, table: str, search: str | None = None) -> pa.Table:
        """A whole table (optionally one search's rows), in the declared schema.

        Rows written by schema v1 (no variant columns) come back with :data:`V1_VARIANT`,
        rows written before v3 with their depth in graph convolutions (:func:`upgrade_v2`).
        An unreadable file is skipped with a warning (see :class:`TolerantDataset`).
        """
        import pyarrow.dataset as ds

        where = None if search is None else ds.field("search") == search
        data = self.dataset(table).to_table(filter=where).cast(TABLES[table])
        return fill_switch_defaults(upgrade_v2(upgrade_v1(data))) if table == "trials" else data

    def warn_unreadable(self, path: str, error: BaseException | str) -> None:
        """One warning line on stderr per unreadable file (per opened store), naming the repair."""
        if path in self._warned:
            return
        self._warned.add(path)
        print(f"orthotune: warning: skipping unreadable file {path} ({_first_line(error)}); list and quarantine "
              f"such files with: orthotune store check --store {self.uri}", file=sys.stderr)

    # -- searches -----------------------------------------------------------------------

    def search_names(self) -> list[str]:
        folder = self.path("searches")
        if self.fs.get_file_info(folder).type != pafs.FileType.Directory:
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(folder))
        # a file whose name is no search name is not a search record (and cannot be read as one)
        return sorted(i.base_name[:-5] for i in infos if i.base_name.endswith(".json")
                      and SEARCH_NAME.match(i.base_name[:-5]))

    def search_meta(self, name: str) -> dict[str, Any]:
        """A search's record; a missing or unreadable one is a one-line OrthotuneError."""
        relative = f"searches/{check_search_name(name)}.json"
        if not self.exists(relative):
            known = ", ".join(self.search_names()) or "none"
            raise OrthotuneError(f"no search {name!r} in store {self.uri!r}; searches: {known}")
        try:
            meta = self.read_json(relative)
        except (ValueError, OSError) as error:
            raise OrthotuneError(f"search record {self.path(relative)!r} is unreadable ({_first_line(error)}); "
                                 f"check the store with: orthotune store check --store {self.uri}") from None
        if not isinstance(meta, dict):
            raise OrthotuneError(f"search record {self.path(relative)!r} is not a JSON object; check the store "
                                 f"with: orthotune store check --store {self.uri}")
        return meta

    def searches(self) -> dict[str, dict[str, Any]]:
        """Every readable search record by name; an unreadable one is skipped with a warning."""
        found = {}
        for name in self.search_names():
            relative = f"searches/{name}.json"
            try:
                meta = self.read_json(relative)
            except FileNotFoundError:  # removed since listing
                continue
            except (ValueError, OSError) as error:
                self.warn_unreadable(self.path(relative), error)
                continue
            if isinstance(meta, dict):
                found[name] = meta
            else:
                self.warn_unreadable(self.path(relative), "not a JSON object")
        return found

    def save_search_meta(self, name: str, meta: Mapping[str, Any]) -> None:
        self.write_json(f"searches/{check_search_name(name)}.json", dict(meta))

    def local_folder(self, kind: str, search: str | None = None) -> str | None:
        """The local folder of a search's live-view files: ``optuna`` (the Optuna journals)
        or ``tensorboard/SEARCH`` (event files); None for a remote store, which has none."""
        if kind not in ("optuna", "tensorboard"):
            raise ValueError(f"unknown store folder kind {kind!r}")
        if not isinstance(self.fs, pafs.LocalFileSystem):
            return None
        return self.path(kind, check_search_name(search)) if search is not None else self.path(kind)



class TolerantDataset:
    """A table's Parquet dataset whose ``to_table`` never fails on one bad file.

    The whole dataset is read in one scan (the fast path); only when that fails is it read
    file by file, skipping (with :meth:`Store.warn_unreadable`) each file that fails.
    Other attributes are the underlying ``pyarrow.dataset.Dataset``'s.
    """

    def __init__(self, store: Store, table: str, dataset: ds.Dataset) -> None:
        self.store, self.table, self.dataset = store, table, dataset

    @property
    def schema(self) -> pa.Schema:
        return self.dataset.schema

    @property
    def files(self) -> list[str]:
        return list(getattr(self.dataset, "files", []))

    def to_table(self, columns: list[str] | None = None, filter: Any = None) -> pa.Table:  # noqa: A002
        try:
            return self.dataset.to_table(columns=columns, filter=filter)
        except READ_ERRORS:
            pass
        import pyarrow.dataset as ds

        # a bad column or filter is the caller's mistake, not a bad file: reading no file says so
        empty = ds.dataset(TABLES[self.table].empty_table()).to_table(columns=columns, filter=filter)
        parts = []
        for path in self.files:
            try:
                parts.append(self.store._dataset(self.table, [path]).to_table(columns=columns, filter=filter))
            except READ_ERRORS as error:
                self.store.warn_unreadable(path, error)
        return pa.concat_tables(parts) if parts else empty

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dataset, name)


def durable_write(final: str, write: Callable[[IO[bytes]], object]) -> None:
    """Write a local file so that a crash leaves the old content or the new, never a torn file:
    write a hidden temporary, flush and fsync it, ``os.replace`` it over ``final``, fsync the folder."""
    folder = os.path.dirname(final)
    make_folder(folder)
    temporary = os.path.join(folder, f"{TEMPORARY_PREFIX}{uuid.uuid4().hex}")
    try:
        with open(temporary, "wb") as sink:
            write(sink)
            sink.flush()
            os.fsync(sink.fileno())
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    fsync_folder(folder)


def make_folder(folder: str) -> None:
    """``mkdir -p``, fsync'ing each new folder's parent so the new entry survives a crash."""
    if os.path.isdir(folder):
        return
    parent = os.path.dirname(folder)
    if parent != folder:
        make_folder(parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder)
    fsync_folder(parent)


def fsync_folder(folder: str) -> None:
    """Make a folder's entries (a rename, a new file) durable; a no-op where folders cannot be opened."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def retrying(attempt: Callable[[], Any], attempts: int = REMOTE_ATTEMPTS, backoff: float = REMOTE_BACKOFF_S) -> Any:
    """Run ``attempt``, retrying a transient ``OSError`` with exponential backoff and jitter."""
    for number in range(attempts):
        try:
            return attempt()
        except OSError:
            if number == attempts - 1:
                raise
            time.sleep(backoff * 2**number * (1 + random.random()))
    return None


def _first_line(error: BaseException | str) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" in str(uri):
        try:
            return pafs.FileSystem.from_uri(str(uri))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
            raise OrthotuneError(f"store URI {uri!r} is not usable: {error}") from None
    return pafs.LocalFileSystem(), str(Path(uri).expanduser().resolve())


def _safe(trial_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", trial_id)


def now() -> datetime:
    return datetime.now(UTC)


def fill_switch_defaults(trials: pa.Table) -> pa.Table:
    """Fill the nulls of the :data:`SWITCH_DEFAULTS` columns (files older than the switch) with its default."""
    for name, value in SWITCH_DEFAULTS.items():
        index = trials.schema.get_field_index(name)
        column = trials[name]
        trials = trials.set_column(index, trials.schema.field(index), pa.compute.fill_null(column, value))
    return trials


def upgrade_v1(trials: pa.Table) -> pa.Table:
    """Fill the columns v1 rows lack (``selection`` is null only in v1 rows) with v1's behaviour."""
    if trials.num_rows == 0:
        return trials
    is_v1 = pa.compute.is_null(trials["selection"])
    if not pa.compute.any(is_v1).as_py():
        return trials
    for name, value in V1_VARIANT.items():
        index = trials.schema.get_field_index(name)
        column = trials[name]
        filled = pa.compute.if_else(is_v1, pa.scalar(value, column.type), column)
        trials = trials.set_column(index, trials.schema.field(index), filled)
    return trials


#: Before v3, ``depth`` counted the hidden convolutions; the ``official`` layout's GCN and
#: JKNet also had graph-convolution input and output layers (the authors' ``--layer L`` was
#: stored as depth L): they had depth + 2 graph convolutions. Every other row (linear layout,
#: GCNII, Graph U-Nets' pooling levels) counted the same under both definitions.
V2_GRAPH_IO = ("gcn", "jknet")


def upgrade_v2(trials: pa.Table) -> pa.Table:
    """Rows written before v3 (``schema_version`` null, after :func:`upgrade_v1`): the
    ``official`` layout's GCN and JKNet depth becomes their graph convolutions, depth + 2."""
    if trials.num_rows == 0:
        return trials
    compute = pa.compute
    old = compute.is_null(trials["schema_version"])
    graph_io = compute.and_(compute.equal(trials["layout"], "official"),
                            compute.is_in(trials["backbone"], value_set=pa.array(V2_GRAPH_IO)))
    shift = compute.fill_null(compute.and_(old, graph_io), False)
    if not compute.any(shift).as_py():
        return trials
    index = trials.schema.get_field_index("depth")
    depth = compute.if_else(shift, compute.add(trials["depth"], pa.scalar(2, pa.int32())), trials["depth"])
    return trials.set_column(index, trials.schema.field(index), depth.cast(pa.int32()))
