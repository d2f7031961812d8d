"""The Parquet store: every trial of every search, declared once and written atomically.

No pickle lives here: rows are Parquet, records JSON. A search resumes from its rows (Ray
Tune's own experiment state, which pickles, stays in a scratch folder outside the store).

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

Durability (``_io``): on a local filesystem the temporary file is fsync'ed before it is
moved into place and the folder after, so a power cut leaves the old file or the new one;
on a remote filesystem (s3://, gs://, ...) the put-then-move is retried with backoff on
transient ``OSError``. The tables' columns are declared in ``_schema``; rows of older
schema versions are filled in on reading by ``_migrate``. Readers are tolerant all the
same: a Parquet file that cannot be read (truncated, corrupt, or of a schema that does not
cast) is skipped with one warning line naming it and ``orthotune store check``, which lists
and quarantines such files.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pyarrow.dataset as ds

from orthotune.core import OrthotuneError
from orthotune.store._io import TEMPORARY_PREFIX, durable_write, filesystem, remote_write, retrying
from orthotune.store._migrate import fill_switch_defaults, upgrade_v1, upgrade_v2
from orthotune.store._schema import (
    MARKER,
    PARTITION,
    SCHEMA_VERSION,
    SEARCH_NAME,
    STORE_FORMAT,
    TABLES,
    check_search_name,
)

#: What reading a damaged or foreign Parquet file raises (ArrowInvalid is a ValueError).
READ_ERRORS = (pa.ArrowException, OSError, ValueError)


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
        fs, root = filesystem(uri)
        store = cls(str(uri), fs, root.rstrip("/"))
        marker = fs.get_file_info(store.path(MARKER))
        if marker.type == pafs.FileType.File:
            store._check_marker()
            return store
        listing = fs.get_file_info(root)
        if listing.type == pafs.FileType.File:
            raise OrthotuneError(f"store {uri!r} is a file, not an orthotune store folder")
        exists = listing.type == pafs.FileType.Directory
        # our own hidden temporaries are the marker being written by a store's creator
        if exists and any(not info.base_name.startswith(TEMPORARY_PREFIX)
                          for info in fs.get_file_info(pafs.FileSelector(root))):
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
            retrying(lambda: remote_write(self.fs, final, write))

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
              f"such files with: {self.check_command()}", file=sys.stderr)

    def check_command(self, *options: str) -> str:
        """``orthotune store check`` for this store, quoted for a POSIX shell."""
        return shlex.join(["orthotune", "store", "check", *options, "--store", self.uri])

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
                                 f"check the store with: {self.check_command()}") from None
        if not isinstance(meta, dict):
            raise OrthotuneError(f"search record {self.path(relative)!r} is not a JSON object; check the store "
                                 f"with: {self.check_command()}")
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



#: Files read per scan of a large table. A scan keeps memory for every file it has read until
#: it ends (measured: about 0.3 MB per one-row trial file, so one scan of a 10^5-trial store
#: passed 23 GiB), so a table of more files is read in scans of this many, each scan's rows
#: combined into one chunk and its memory handed back before the next.
SCAN_FILES = 200


class TolerantDataset:
    """A table's Parquet dataset whose ``to_table`` never fails on one bad file.

    The dataset is read in one scan (the fast path), or, above :data:`SCAN_FILES` files, in
    scans of that many; only a scan that fails is read file by file, skipping (with
    :meth:`Store.warn_unreadable`) each file that fails. Other attributes are the underlying
    ``pyarrow.dataset.Dataset``'s.
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
        files = self.files
        if len(files) > SCAN_FILES:
            # only the files the filter's partition values can match (``search == NAME``)
            files = [fragment.path for fragment in self.dataset.get_fragments(filter=filter)]
        if len(files) <= SCAN_FILES:
            return self._scan(self.dataset, files, columns, filter)
        parts = []
        for start in range(0, len(files), SCAN_FILES):
            group = files[start:start + SCAN_FILES]
            parts.append(self._scan(self.store._dataset(self.table, group), group, columns, filter).combine_chunks())
            pa.default_memory_pool().release_unused()
        return pa.concat_tables(parts)

    def _scan(self, dataset: ds.Dataset, files: list[str], columns: list[str] | None, filter: Any) -> pa.Table:  # noqa: A002
        """``files`` (those of ``dataset``) in one scan, or file by file when that scan fails."""
        try:
            return dataset.to_table(columns=columns, filter=filter)
        except READ_ERRORS:
            pass
        import pyarrow.dataset as ds

        # a bad column or filter is the caller's mistake, not a bad file: reading no file says so
        empty = ds.dataset(TABLES[self.table].empty_table()).to_table(columns=columns, filter=filter)
        parts = []
        for path in files:
            try:
                parts.append(self.store._dataset(self.table, [path]).to_table(columns=columns, filter=filter))
            except READ_ERRORS as error:
                self.store.warn_unreadable(path, error)
        return pa.concat_tables(parts) if parts else empty

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dataset, name)


def _first_line(error: BaseException | str) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _safe(trial_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", trial_id)


def now() -> datetime:
    return datetime.now(UTC)
