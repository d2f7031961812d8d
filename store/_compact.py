"""Merge a search's trial files into a few large ones (``orthotune store compact``; a search's
driver does it when the search finishes).

A search writes one file per trial per table, so that each write is small, durable and
idempotent; readers of a large search then open 2 files per trial. Compaction, for each
table (epochs first, as a trial is written):

1. lists the search's folder: its compacted files and its trial files (``_files``);
2. a trial file whose trial a compacted file already holds is a copy an interrupted
   compaction left: it is only removed (step 4);
3. the other trial files are read (a file that cannot be read is left where it is, for
   ``store check``) and their rows written, sorted by trial, as new compacted *parts* of at
   most :data:`PART_TRIALS` trials each (so a part that rots later takes at most that many
   trials with it; the two tables' parts of one compaction share their names and trials),
   every page with its checksum: each under a hidden temporary name, moved into place (a
   local file fsync'ed, then its folder; on an object store a server-side copy, which
   appears whole);
4. once both tables' compacted files are in place, the trial files they hold are removed;
5. the search's summary (trial counts) is rewritten from the rows, never lowered
   (``Store.write_summary``).

Readers prefer a compacted file (``_files``' rule), so a crash at any step leaves every
trial read once, and compacting again finishes the work. The caller holds the search's
lease (``Lease``): no driver writes trial files meanwhile and no second compaction runs.
The rows are written as they were read (rows of older schema versions included, filled in
on reading as before), in the declared schema.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from orthotune.store._files import (
    COMPACTED_PREFIX,
    READ_ERRORS,
    SUFFIX,
    held_names,
    is_compacted,
    is_trial_file,
    listing,
)
from orthotune.store._io import fsync_folder
from orthotune.store._names import check_search_name
from orthotune.store._reading import SCAN_FILES
from orthotune.store._schema import CHECKSUMS, TABLES
from orthotune.store._store import file_table, now

if TYPE_CHECKING:
    from orthotune.store._store import Store

#: Rows per row group of a compacted file (readers skip whole row groups by trial id).
ROW_GROUP_ROWS = 65_536
#: Groups of trial files read side by side (pyarrow decodes without holding the GIL).
READERS = max(2, os.cpu_count() or 1)
#: Files deleted side by side (each deletion mostly waits: 8 threads unlink about 7 times as
#: fast as one on a 2-core VM's ext4, where freeing a file's blocks takes milliseconds).
DELETERS = 8
#: Trials per compacted part: what one damaged file can take with it (a part's files are
#: read whole by ``store check``; 2,000 trials' epochs are some 10^5 rows).
PART_TRIALS = 2_000
#: Sort order of a compacted file's rows.
ORDER = {"trials": ["trial_id"], "epochs": ["trial_id", "repeat", "epoch"]}
#: The steps after which :func:`compact` calls its ``after_step`` (the tests' seam: a process
#: killed there shows what a crash at that point leaves).
STEPS = ("epochs written", "trials written", "first removed", "removed")


@dataclass(frozen=True)
class Compaction:
    """What one compaction did."""

    search: str
    merged: dict[str, int] = field(default_factory=dict)  # trial files merged, per table
    removed: int = 0  # trial files removed (merged now, or held by an earlier compacted file)
    written: tuple[str, ...] = ()  # the compacted files written (store-relative)
    left: tuple[str, ...] = ()  # trial files that could not be read, left in place
    seconds: float = 0.0

    def describe(self) -> str:
        if not self.written and not self.removed:
            return f"{self.search}: nothing to compact"
        merged = " and ".join(f"{n} {table} files" for table, n in self.merged.items())
        text = f"{self.search}: merged {merged or 'no files'} into {len(self.written)} compacted files, " \
               f"removed {self.removed} trial files in {self.seconds:.1f} s"
        return text + (f"; {len(self.left)} unreadable files left for `store check`" if self.left else "")


def compact(store: Store, search: str, after_step: Callable[[str], None] | None = None) -> Compaction:
    """Compact ``search``'s trial files (the caller holds its lease); see the module's steps."""
    check_search_name(search)
    started = time.perf_counter()
    step = after_step or (lambda name: None)
    stem = f"{COMPACTED_PREFIX}{now().strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"
    gone: dict[str, list[str]] = {}
    merged, written, left = {}, [], []
    for table in ("epochs", "trials"):
        found = listing(store.fs, store.path(table), [search])
        trial_files = [p for p in found if is_trial_file(p)]
        compacted = [p for p in found if is_compacted(p)]
        held = held_names(store.fs, compacted) if compacted and trial_files else set()
        copies = [p for p in trial_files if p.rsplit("/", 1)[-1] in held]
        fresh = [p for p in trial_files if p.rsplit("/", 1)[-1] not in held]
        read: list[str] = []
        # parts by trial file name: both tables' files of a trial are named alike, so their
        # parts of one name hold the same trials (``store check`` names a lost part's trials)
        fresh.sort(key=lambda p: p.rsplit("/", 1)[-1])
        for number, start in enumerate(range(0, len(fresh), PART_TRIALS), start=1):
            relative = f"{table}/search={search}/{stem}-{number:05d}{SUFFIX}"
            part: list[str] = []
            rows = _write_compacted(store, relative, table, fresh[start:start + PART_TRIALS], part)
            read += part
            if rows:
                written.append(relative)
            else:  # no rows (unreadable files, or trials without epochs): no file worth keeping
                _remove(store, [store.path(relative)])
        left += [store.relative(p) for p in sorted(set(fresh) - set(read))]
        merged[table] = len(read)
        gone[table] = copies + read
        step(f"{table} written")
    removed = _remove(store, [p for table in ("epochs", "trials") for p in gone[table]], step)
    step("removed")
    counts = Counter(store.trial_statuses(search).values())
    if store.summary(search) != {k: n for k, n in counts.items() if n}:
        store.write_summary(search, counts, never_lower=True)  # a part unreadable now keeps its count
    return Compaction(search, merged, removed, tuple(written), tuple(left), time.perf_counter() - started)


def _write_compacted(store: Store, relative: str, table: str, files: list[str], read: list[str]) -> int:
    """Write the rows of ``files`` as the compacted file ``relative`` (moved into place whole);
    ``read`` gets the files that were read (an unreadable one is skipped, with a warning).
    Returns the number of rows."""
    rows = [0]

    def write(sink) -> None:  # run again by a retried remote write: it starts over
        read.clear()
        rows[0] = _write_rows(store, table, files, sink, read)

    store._atomic_write(relative, write, whole=False)
    return rows[0]


def _write_rows(store: Store, table: str, files: list[str], sink, read: list[str]) -> int:
    """Stream the rows of ``files`` into one Parquet file on ``sink``, in row groups of about
    :data:`ROW_GROUP_ROWS` rows sorted by trial; returns the number of rows."""
    schema = file_table(table, TABLES[table].empty_table()).schema
    groups = [files[start:start + SCAN_FILES] for start in range(0, len(files), SCAN_FILES)]
    pending, rows, total = [], 0, 0
    with pq.ParquetWriter(sink, schema, write_page_checksum=True) as writer, ThreadPoolExecutor(READERS) as pool:
        for number, (data, found, unreadable) in enumerate(_read_groups(pool, store, groups, schema), start=1):
            for path, error in unreadable:
                store.warn_unreadable(path, error)
            read += found
            pending.append(data)
            rows += data.num_rows
            if rows >= ROW_GROUP_ROWS or number == len(groups):
                combined = pa.concat_tables(pending).sort_by([(c, "ascending") for c in ORDER[table]])
                if combined.num_rows:
                    writer.write_table(combined, row_group_size=combined.num_rows)
                total += combined.num_rows
                pending, rows = [], 0
                pa.default_memory_pool().release_unused()
    return total


#: What reading one group of trial files gives: its rows (one chunk per column), the files
#: read, and each file that could not be read or cast with why.
Group = tuple[pa.Table, list[str], list[tuple[str, BaseException]]]


def _read_groups(pool: ThreadPoolExecutor, store: Store, groups: list[list[str]], schema: pa.Schema):
    """Each group of files read (:func:`_read_group`), in order. The groups are read by the
    pool's threads, a few ahead of the caller, so that they decode while the caller sorts and
    writes: no thread waits on another's group (a pool mapped over one group's files stood
    idle between groups)."""
    ahead: deque[Future[Group]] = deque()
    for group in groups:
        ahead.append(pool.submit(_read_group, store, group, schema))
        if len(ahead) > READERS:  # a bounded lead: at most READERS + 1 groups held in memory
            yield ahead.popleft().result()
    while ahead:
        yield ahead.popleft().result()


def _read_group(store: Store, paths: list[str], schema: pa.Schema) -> Group:
    """The rows of ``paths`` in ``schema`` as one chunk per column (the files' own small
    buffers go: a table of 10^5 one-row chunks per column holds gigabytes and sorts slowly)."""
    found, unreadable = {}, []
    for path in paths:
        data = _read_whole(store, path)
        if isinstance(data, pa.Table):
            found[path] = data
        else:
            unreadable.append((path, data))
    data = _conform(found, schema, unreadable).combine_chunks()
    return data, list(found), unreadable


def _read_whole(store: Store, path: str) -> pa.Table | BaseException:
    """One trial file as it holds it (a trial file is small: its bytes fetched in one read, not
    one per column chunk (a tenth less CPU locally, one request on an object store), decoded
    with pyarrow's threads off, the files being read side by side), or why it cannot be read."""
    try:
        with store.fs.open_input_file(path) as source:
            data = source.read()
        return pq.ParquetFile(pa.BufferReader(data), **CHECKSUMS).read(use_threads=False)
    except READ_ERRORS as error:
        return error


def _conform(found: dict[str, pa.Table], schema: pa.Schema, unreadable: list[tuple[str, BaseException]]) -> pa.Table:
    """The files' rows as one table in ``schema`` (a column a file predates comes back null).
    Files that do not fit it together are taken one by one; one that cannot be cast (a foreign
    file) is dropped from ``found`` and added to ``unreadable``."""
    tables = list(found.values())
    # files as written now (the declared schema, its version included) are stitched, nothing
    # cast column by column: a list column reads back with its Parquet item name (``element``,
    # not ``item``), which only the metadata-checking comparison tells apart, so the schema
    # is compared without field metadata and the schema version checked apart
    if tables and all(_as_written(data.schema, schema) for data in tables):
        return pa.concat_tables(tables).cast(schema)
    try:
        return _cast(pa.concat_tables(tables, promote_options="permissive"), schema)
    except READ_ERRORS:
        pass
    parts = []
    for path, data in list(found.items()):
        try:
            parts.append(_cast(data, schema))
        except READ_ERRORS as error:
            unreadable.append((path, error))
            del found[path]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _as_written(found: pa.Schema, schema: pa.Schema) -> bool:
    """Whether a file's schema is ``schema`` as a file written now reads back."""
    return found.equals(schema) and found.metadata == schema.metadata and found.names == schema.names


def _cast(data: pa.Table, schema: pa.Schema) -> pa.Table:
    if not data.num_columns:
        return schema.empty_table()
    columns = [data.column(f.name) if f.name in data.column_names else pa.nulls(data.num_rows, f.type)
               for f in schema]
    return pa.Table.from_arrays([c.cast(f.type) for c, f in zip(columns, schema)], schema=schema)


def _remove(store: Store, paths: list[str], step: Callable[[str], None] | None = None) -> int:
    """Delete ``paths`` (one already gone is fine), side by side: a deletion waits on the disk
    (a local file's blocks freed, an object store's round trip), not on this process; on a
    local disk their folders are fsync'ed after."""
    local = isinstance(store.fs, pafs.LocalFileSystem)

    def delete(path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            if local:
                os.unlink(path)
            else:
                store.fs.delete_file(path)

    if not paths:
        return 0
    delete(paths[0])
    if step is not None:
        step("first removed")
    with ThreadPoolExecutor(DELETERS) as pool:
        list(pool.map(delete, paths[1:]))
    if local:
        for folder in sorted({p.rsplit("/", 1)[0] for p in paths}):
            fsync_folder(folder)
    return len(paths)
