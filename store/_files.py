"""Which files a table is read from: a trial's own file, or the compacted file that holds it.

A search's folder of a table (``trials/search=NAME/``, ``epochs/search=NAME/``) holds two
kinds of Parquet files:

* ``trial-ID.parquet``: one trial's rows, as the driver writes them when the trial ends;
* ``compacted-STAMP-HEX.parquet``: many trials' rows, written by ``store compact``
  (``_compact``) from the trial files it then removes.

**The rule** (what every reader applies): a compacted file wins. A trial file whose trial a
compacted file of the same folder holds is not read: it is a copy that an interrupted
compaction had not removed yet (compaction removes trial files only after the compacted
file is in place). So a crash at any point of a compaction leaves each trial read exactly
once. A trial file is never newer than a compacted copy of its trial: compaction holds the
search's lease (no driver writes meanwhile), and a later session of the search names its
trials afresh (Ray Tune's trial ids), so it never rewrites a compacted trial.

Hidden names (``.`` or ``_`` first: temporaries) are never read, as pyarrow's own dataset
discovery skips them.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from orthotune.store._schema import CHECKSUMS

#: What reading a damaged or foreign Parquet file raises (ArrowInvalid is a ValueError).
READ_ERRORS = (pa.ArrowException, OSError, ValueError)
#: A trial's own file, and a compacted file, by name.
TRIAL_PREFIX, COMPACTED_PREFIX, SUFFIX = "trial-", "compacted-", ".parquet"
#: What no reader looks at: temporaries being written (``.tmp-``) and other hidden files.
HIDDEN = (".", "_")


def trial_file_name(trial_id: str) -> str:
    """The file name of one trial's rows (characters a path cannot hold become ``_``)."""
    return f"{TRIAL_PREFIX}{re.sub(r'[^A-Za-z0-9_.-]', '_', str(trial_id))}{SUFFIX}"


def is_compacted(path: str) -> bool:
    return path.rsplit("/", 1)[-1].startswith(COMPACTED_PREFIX)


def is_trial_file(path: str) -> bool:
    return path.rsplit("/", 1)[-1].startswith(TRIAL_PREFIX)


def listing(fs: pafs.FileSystem, base: str, searches: list[str] | None = None) -> list[str]:
    """Every visible file of the table at ``base`` (of ``searches`` only, when given), in path order."""
    folders = [base] if searches is None else [f"{base}/search={name}" for name in searches]
    found = []
    for folder in folders:
        selector = pafs.FileSelector(folder, recursive=True, allow_not_found=True)
        for info in fs.get_file_info(selector):
            relative = info.path[len(base) + 1:]
            if info.type == pafs.FileType.File and not any(p.startswith(HIDDEN) for p in relative.split("/")):
                found.append(info.path)
    return sorted(found)


def readable(fs: pafs.FileSystem, paths: list[str]) -> list[str]:
    """``paths`` less each trial file whose trial a compacted file in its folder holds (the rule above)."""
    folders: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        folders[path.rsplit("/", 1)[0]].append(path)
    kept = []
    for entries in folders.values():
        compacted = [p for p in entries if is_compacted(p)]
        held = held_names(fs, compacted) if compacted and any(map(is_trial_file, entries)) else set()
        kept += [p for p in entries if p.rsplit("/", 1)[-1] not in held]
    return sorted(kept)


def held_names(fs: pafs.FileSystem, compacted: list[str]) -> set[str]:
    """The trial file names whose trials ``compacted`` files hold. A compacted file that cannot
    be read holds nothing here: its trials' own files, if still there, are read instead."""
    names: set[str] = set()
    for path in compacted:
        try:
            with fs.open_input_file(path) as source:
                ids = pq.ParquetFile(source, **CHECKSUMS).read(columns=["trial_id"]).column(0)
        except READ_ERRORS:
            continue
        names.update(trial_file_name(i) for i in ids.unique().to_pylist())
    return names
