"""The Parquet store: every trial of every search, declared once and written atomically.

No pickle lives here: rows are Parquet, records JSON. A search resumes from its rows (Ray
Tune's own experiment state, which pickles, stays in a scratch folder outside the store).

Layout under the store root (a local path or any URI pyarrow's filesystems understand)::

    orthotune-store.json                   marker: format and schema version
    trials/search=NAME/trial-ID.parquet    one row per trial (TRIALS_SCHEMA)
    trials/search=NAME/compacted-*.parquet many trials' rows, merged by ``store compact``
    epochs/search=NAME/trial-ID.parquet    per-epoch history of that trial (EPOCHS_SCHEMA)
    epochs/search=NAME/compacted-*.parquet many trials' histories
    searches/NAME.json                     how the search was launched, and its state
    summaries/NAME.json                    its trial counts by status (what ``status`` shows)
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
``_compact`` merges a search's trial files into compacted ones; which file a reader takes
when both hold a trial is ``_files``' rule (the compacted one).

Durability (``_io``): on a local filesystem the temporary file is fsync'ed before it is
moved into place and the folder after, so a power cut leaves the old file or the new one;
on an object store (s3://, gs://) a file is put whole under its final name; remote writes
are retried with backoff on transient ``OSError``. The tables' columns are declared in ``_schema``; rows of older
schema versions are filled in on reading by ``_migrate``. Readers are tolerant all the
same: a Parquet file that cannot be read (truncated, corrupt, or of a schema that does not
cast) is skipped with one warning line naming it and ``orthotune store check``, which lists
and quarantines such files.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pyarrow.dataset as ds

from orthotune.core import OrthotuneError, one_line
from orthotune.store._files import is_compacted, listing, readable, trial_file_name
from orthotune.store._io import TEMPORARY_PREFIX, durable_write, filesystem, remote_write, retrying
from orthotune.store._migrate import MIGRATION_INPUTS, fill_switch_defaults, upgrade_v1, upgrade_v2
from orthotune.store._names import SEARCH_NAME, check_search_name
from orthotune.store._reading import TolerantDataset
from orthotune.store._schema import (
    CHECKSUMS,
    MARKER,
    PARTITION,
    SCHEMA_VERSION,
    STORE_FORMAT,
    TABLES,
    TRIAL_FILE_OPTIONS,
)

#: The folder of the searches' summaries (trial counts by status).
SUMMARIES = "summaries"


@dataclass(frozen=True)
class Store:
    """A store root on a pyarrow filesystem. Open it with :meth:`open`."""

    uri: str
    fs: pafs.FileSystem
    root: str
    #: Files already warned about through this store (a report reads a table more than once).
    _warned: set[str] = field(default_factory=set, compare=False, repr=False)
    #: Called before every write (``Lease.check``: raises once the driver's lease was taken
    #: over); None: writes unfenced (readers, ``store check``, the lease itself).
    fence: Callable[[], None] | None = field(default=None, compare=False, repr=False)

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
        names = ({info.base_name for info in fs.get_file_info(pafs.FileSelector(root))}
                 if listing.type == pafs.FileType.Directory else set())
        if MARKER in names:  # a creator beside us (a second search's driver) wrote it since our first look
            store._check_marker()
            return store
        # our own hidden temporaries are the marker being written by a store's creator
        if any(not name.startswith(TEMPORARY_PREFIX) for name in names):
            raise OrthotuneError(f"{uri!r} is not an orthotune store (no {MARKER}); refusing to use it")
        if not create:
            raise OrthotuneError(f"no orthotune store at {uri!r}")
        fs.create_dir(root, recursive=True)
        store.write_json(MARKER, {"format": STORE_FORMAT, "schema_version": SCHEMA_VERSION})
        return store

    def fenced(self, check: Callable[[], None] | None) -> Store:
        """This store, with every write preceded by ``check`` (a driver's ``Lease.check``)."""
        return dataclasses.replace(self, fence=check)

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def relative(self, path: str) -> str:
        """A filesystem path inside the store, relative to its root."""
        return path[len(self.root) + 1:] if path.startswith(f"{self.root}/") else path

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
        name = f"search={search}/{trial_file_name(trial_id)}"
        epoch_rows = [{**row, "search": search, "trial_id": trial_id} for row in epochs]
        # epochs first: a reader that sees the trial row also sees its history
        self._write_table("epochs", name, epoch_rows)
        self._write_table("trials", name, [trial])

    def _write_table(self, table: str, name: str, rows: list[Mapping[str, Any]]) -> None:
        data = file_table(table, pa.Table.from_pylist([dict(r) for r in rows], schema=TABLES[table]))
        self._atomic_write(f"{table}/{name}", lambda sink: pq.write_table(data, sink, **TRIAL_FILE_OPTIONS))

    def _atomic_write(self, relative: str, write: Callable[[IO[bytes]], object], whole: bool = True) -> None:
        """Write a file so that readers see the old one or the new one; ``whole``: small enough
        to make in memory first (an object store then takes it in one request)."""
        if self.fence is not None:
            self.fence()
        final = self.path(relative)
        if isinstance(self.fs, pafs.LocalFileSystem):
            durable_write(final, write)
        else:
            retrying(lambda: remote_write(self.fs, final, write, whole))

    def dataset(self, table: str, search: str | None = None) -> TolerantDataset:
        """A table (one search's rows, when given) as a dataset whose reads skip unreadable
        files (one warning line each) and take each trial from one file (``_files``)."""
        return TolerantDataset(self, table, lambda: readable(self.fs, listing(
            self.fs, self.path(table), None if search is None else [check_search_name(search)])))

    def _dataset(self, table: str, files: list[str]) -> ds.Dataset:
        # imported here: pyarrow.dataset pulls in pandas, which `launch --help` does not need
        import pyarrow.dataset as ds

        if not files:
            return ds.dataset(TABLES[table].empty_table())
        parquet = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(**CHECKSUMS))
        return ds.dataset(files, schema=TABLES[table], format=parquet, filesystem=self.fs,
                          partitioning=ds.partitioning(PARTITION, flavor="hive"), partition_base_dir=self.path(table))

    def read_file(self, table: str, path: str) -> pa.Table:
        """One Parquet file of ``table`` (a filesystem path), whole, in the declared schema;
        raises one of :data:`READ_ERRORS` when it cannot be read or cast."""
        return self._dataset(table, [path]).to_table().cast(TABLES[table])

    def read(self, table: str, search: str | None = None, columns: Sequence[str] | None = None,
             trials: Iterable[tuple[str, str]] | None = None) -> pa.Table:
        """A table (optionally one search's rows), in the declared schema.

        ``columns``: only these (in this order), the rest never decoded. ``trials``: only these
        ``(search, trial_id)``, whose own files are opened by name and whose compacted files
        are filtered (never the whole table). Rows written by schema v1 (no variant columns)
        come back with :data:`V1_VARIANT`, rows written before v3 with their depth in graph
        convolutions (:func:`upgrade_v2`), whatever ``columns`` asks for. An unreadable file
        is skipped with a warning (see :class:`TolerantDataset`).
        """
        import pyarrow.dataset as ds

        wanted = None if trials is None else _by_search(trials)
        if search is not None:
            wanted = None if wanted is None else {search: wanted.get(search, set())}
        searches = [search] if search is not None else None if wanted is None else sorted(wanted)
        where = None if search is None else ds.field("search") == search
        if wanted is not None:
            chosen = [(ds.field("search") == name) & ds.field("trial_id").isin(sorted(ids))
                      for name, ids in wanted.items() if ids]
            where = functools.reduce(operator.or_, chosen) if chosen else ds.scalar(False)

        def files() -> list[str]:
            found = listing(self.fs, self.path(table),
                            None if searches is None else [check_search_name(s) for s in searches])
            if wanted is not None:  # a trial's own file, by name; compacted files (filtered)
                names = {f"{self.path(table)}/search={s}/{trial_file_name(i)}"
                         for s, ids in wanted.items() for i in ids}
                found = [p for p in found if is_compacted(p) or p in names]
            return readable(self.fs, found)

        schema = TABLES[table]
        names = schema.names if columns is None else list(columns)
        read = names if table != "trials" else [*names, *(c for c in MIGRATION_INPUTS if c not in names)]
        data = TolerantDataset(self, table, files).to_table(columns=read, filter=where)
        data = data.cast(pa.schema([schema.field(c) for c in read]))
        if table == "trials":
            data = fill_switch_defaults(upgrade_v2(upgrade_v1(data)))
        return data.select(names)

    def trial_statuses(self, search: str) -> dict[str, str]:
        """Each stored trial of ``search`` and its status, from the rows."""
        rows = self.read("trials", search=search, columns=["trial_id", "status"])
        return dict(zip(rows["trial_id"].to_pylist(), rows["status"].to_pylist()))

    # -- summaries: a search's trial counts, kept beside its rows ------------------------

    def summary(self, search: str) -> dict[str, int] | None:
        """The trial counts by status the driver (or ``store compact``/``store check``) last
        wrote for ``search``; None where there is none or it cannot be read."""
        relative = f"{SUMMARIES}/{check_search_name(search)}.json"
        try:
            value = self.read_json(relative)
        except FileNotFoundError:
            return None
        except (ValueError, OSError) as error:
            self.warn_unreadable(self.path(relative), error)
            return None
        counts = value.get("counts") if isinstance(value, dict) else None
        if not isinstance(counts, dict) or not all(isinstance(n, int) for n in counts.values()):
            self.warn_unreadable(self.path(relative), "not a summary")
            return None
        return counts

    def write_summary(self, search: str, counts: Mapping[str, int], never_lower: bool = False) -> bool:
        """Record ``search``'s trial counts by status (zero counts left out). ``never_lower``
        (counts recounted from the rows: ``store compact``, ``store check --quarantine``): False,
        and the summary kept, where it counts more trials than ``counts``, since rows that cannot
        be read (a damaged or quarantined file) must not lower the record of what was written.
        A driver's own writes skip that read (one request per trial less on an object store)."""
        kept = self.summary(search) if never_lower else None
        if kept is not None and sum(kept.values()) > sum(n for n in counts.values() if n > 0):
            return False
        self.write_json(f"{SUMMARIES}/{check_search_name(search)}.json",
                        {"search": search, "counts": {k: int(n) for k, n in sorted(counts.items()) if n},
                         "updated_at": now().isoformat(timespec="milliseconds")})
        return True

    def table_searches(self) -> list[str]:
        """The searches with a folder in the ``trials`` table (listed, no file opened)."""
        folder = self.path("trials")
        infos = self.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        return sorted(i.base_name[len("search="):] for i in infos if i.type == pafs.FileType.Directory
                      and i.base_name.startswith("search=") and SEARCH_NAME.match(i.base_name[len("search="):]))

    def warn_unreadable(self, path: str, error: BaseException | str) -> None:
        """One warning line on stderr per unreadable file (per opened store), naming the repair."""
        if path in self._warned:
            return
        self._warned.add(path)
        print(f"orthotune: warning: skipping unreadable file {path} ({one_line(error)}); list and quarantine "
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
            raise OrthotuneError(f"search record {self.path(relative)!r} is unreadable ({one_line(error)}); "
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



def file_table(table: str, data: pa.Table) -> pa.Table:
    """Rows of ``table`` as its files hold them: without the ``search`` partition column, with
    the schema's metadata (the schema version)."""
    data = data.drop_columns(["search"])
    return data.cast(data.schema.with_metadata(TABLES[table].metadata))


def _by_search(trials: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    wanted: dict[str, set[str]] = {}
    for search, trial_id in trials:
        wanted.setdefault(str(search), set()).add(str(trial_id))
    return wanted


def now() -> datetime:
    return datetime.now(UTC)
