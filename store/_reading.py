"""How a table's Parquet files are read: in one scan, or in scans of :data:`SCAN_FILES` files
when there are many (memory), and file by file where a scan fails, each unreadable file
skipped with one warning line, so one bad file never fails a read."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.fs as pafs

from orthotune.store._files import READ_ERRORS
from orthotune.store._schema import TABLES

if TYPE_CHECKING:
    import pyarrow.dataset as ds


class Source(Protocol):
    """What a tolerant read needs of its store (``_store.Store``): its filesystem, a dataset
    of some of a table's files, and where an unreadable file is reported."""

    fs: pafs.FileSystem

    def _dataset(self, table: str, files: list[str]) -> ds.Dataset: ...

    def warn_unreadable(self, path: str, error: BaseException | str) -> None: ...


#: Files read per scan of a large table. A scan keeps memory for every file it has read until
#: it ends (measured: about 0.3 MB per one-row trial file, so one scan of a 10^5-trial store
#: passed 23 GiB), so a table of more files is read in scans of this many, each scan's rows
#: combined into one chunk and its memory handed back before the next.
SCAN_FILES = 200


class TolerantDataset:
    """A table's Parquet files as a dataset whose ``to_table`` never fails on one bad file.

    ``files`` lists the files to read (the store's listing under ``_files``' rule); it is
    called again when a listed file has gone before it was read (a compaction moved its rows
    into a compacted file meanwhile), so a reader during a compaction still reads each trial
    once. The files are read in one scan (the fast path), or, above :data:`SCAN_FILES`
    files, in scans of that many; only a scan that fails is read file by file, skipping (with
    :meth:`Store.warn_unreadable`) each file that fails.
    """

    #: Listings tried when files vanish between listing and reading (then they are skipped).
    ATTEMPTS = 3

    def __init__(self, store: Source, table: str, files: Callable[[], list[str]]) -> None:
        self.store, self.table, self._list = store, table, files

    @property
    def schema(self) -> pa.Schema:
        return TABLES[self.table]

    @property
    def files(self) -> list[str]:
        return self._list()

    def to_table(self, columns: list[str] | None = None, filter: Any = None) -> pa.Table:  # noqa: A002
        for attempt in range(self.ATTEMPTS):
            gone: list[str] = []
            found = self._read(self._list(), columns, filter, gone if attempt < self.ATTEMPTS - 1 else None)
            if not gone:
                return found
        raise AssertionError("unreachable: the last attempt skips vanished files")

    def _read(self, files: list[str], columns: list[str] | None, filter: Any,  # noqa: A002
              gone: list[str] | None) -> pa.Table:
        if len(files) > SCAN_FILES:
            # only the files the filter's partition values can match (``search == NAME``)
            with contextlib.suppress(*READ_ERRORS):  # a file gone since listed: the scans find it
                files = [f.path for f in self.store._dataset(self.table, files).get_fragments(filter=filter)]
        if len(files) <= SCAN_FILES:
            return self._scan(files, columns, filter, gone)
        parts = []
        for start in range(0, len(files), SCAN_FILES):
            parts.append(self._scan(files[start:start + SCAN_FILES], columns, filter, gone).combine_chunks())
            pa.default_memory_pool().release_unused()
        return pa.concat_tables(parts)

    def _scan(self, files: list[str], columns: list[str] | None, filter: Any,  # noqa: A002
              gone: list[str] | None) -> pa.Table:
        """``files`` in one scan, or file by file when that scan fails; a file that has gone
        since it was listed goes to ``gone`` (None: skipped like a bad one)."""
        try:
            return self.store._dataset(self.table, files).to_table(columns=columns, filter=filter)
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
                if gone is not None and self.store.fs.get_file_info(path).type == pafs.FileType.NotFound:
                    gone.append(path)
                else:
                    self.store.warn_unreadable(path, error)
        return pa.concat_tables(parts) if parts else empty
