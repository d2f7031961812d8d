"""Find what in a store cannot be read, and move it aside (``orthotune store check``).

Looked at: every file of the ``trials`` and ``epochs`` tables (read whole and cast to the
declared schema), trial files that a compacted file already holds (copies an interrupted
compaction left), the search records, summaries and leases (JSON objects), each summary's
counts against the rows (a search whose driver is alive is skipped: it writes them), and
temporaries left by a writer that died (hidden ``.tmp-*`` names older than
:data:`TEMPORARY_GRACE_S`; a younger one may be a live writer's). Ray Tune's, Optuna's and
TensorBoard's folders are theirs and not looked at. Quarantining moves each problem file to
``quarantine/<UTC stamp>/<its path in the store>``: nothing is deleted, no good file moved;
a summary moved aside is written anew from the rows.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from orthotune.core import one_line
from orthotune.store._confirmations import CONFIRMATIONS
from orthotune.store._files import READ_ERRORS, SUFFIX, TRIAL_PREFIX, held_names, is_compacted, is_trial_file
from orthotune.store._io import TEMPORARY_PREFIX
from orthotune.store._lease import lease_info
from orthotune.store._schema import CHECKSUMS, TABLES
from orthotune.store._store import SUMMARIES, now

if TYPE_CHECKING:
    from orthotune.store._store import Store

QUARANTINE = "quarantine"
#: A temporary younger than this may still be being written: it is left alone.
TEMPORARY_GRACE_S = 300.0
#: Folders of JSON documents, and whether a young unreadable one may be a lease being created.
DOCUMENTS = {"searches": False, SUMMARIES: False, "leases": True, CONFIRMATIONS: False}
#: The problem of a summary whose counts are not the rows' (``--quarantine`` rewrites it).
STALE_SUMMARY = "stale summary"
#: A summary that counts more trials than the rows hold: some were written and cannot be read
#: now (a damaged or quarantined file). It is kept as the record of what was written: a
#: summary is never lowered from rows that could not be read (``Store.write_summary``).
MISSING_ROWS = "trials missing from the rows"
#: Trial ids named in full in a damaged file's problem; more are counted.
SHOWN_IDS = 20


@dataclass(frozen=True)
class Problem:
    """One file in the store that a reader cannot use."""

    path: str  # relative to the store root
    kind: str  # "corrupt parquet", "unreadable json", "leftover temporary"
    detail: str

    def describe(self) -> str:
        return f"{self.path}: {self.kind} ({self.detail})"


def check_store(store: Store) -> list[Problem]:
    """Every problem file in ``store``, in path order. Reads only."""
    problems = []
    for folder in (*TABLES, *DOCUMENTS):
        infos = _files(store, folder)
        copies = _compacted_copies(store, infos) if folder in TABLES else set()
        for info in infos:
            relative = info.path[len(store.root) + 1:]
            if info.base_name.startswith(TEMPORARY_PREFIX):
                age = _age(info)
                if age is None or age > TEMPORARY_GRACE_S:
                    problems.append(Problem(relative, "leftover temporary",
                                            "a writer died before moving it into place"))
            elif info.base_name.startswith((".", "_")):
                continue  # hidden: no reader looks at it
            elif info.path in copies:
                problems.append(Problem(relative, "compacted copy", "a compacted file holds its trial (an "
                                        "interrupted compaction left it; `orthotune store compact` removes it)"))
            elif folder in TABLES:
                problems += _check_parquet(store, folder, info.path, relative)
            elif info.base_name.endswith(".json"):
                problems += _check_json(store, info, relative, young_ok=DOCUMENTS[folder])
    problems += _check_summaries(store, {p.path for p in problems})
    return sorted(problems, key=lambda p: p.path)


def quarantine(store: Store, problems: list[Problem]) -> list[tuple[str, str]]:
    """Move each problem file to ``quarantine/STAMP/PATH``; ``(from, to)`` store-relative paths.
    A summary moved aside is written again from the rows (it holds nothing else)."""
    stamp = now().strftime("%Y%m%dT%H%M%S.%fZ")
    moved = []
    for problem in problems:
        if problem.kind == MISSING_ROWS:
            continue  # the record of trials written: kept (see MISSING_ROWS)
        target = f"{QUARANTINE}/{stamp}/{problem.path}"
        store.fs.create_dir(store.path(target).rsplit("/", 1)[0], recursive=True)
        try:
            store.fs.move(store.path(problem.path), store.path(target))
        except FileNotFoundError:  # gone since the check (a writer finished it): nothing to move
            continue
        moved.append((problem.path, target))
    for problem in problems:
        folder, _, name = problem.path.partition("/")
        if folder == SUMMARIES and name.endswith(".json") and problem.kind != MISSING_ROWS:
            search = name[:-len(".json")]
            store.write_summary(search, Counter(store.trial_statuses(search).values()), never_lower=True)
    return moved


def _compacted_copies(store: Store, infos: list[pafs.FileInfo]) -> set[str]:
    """Trial files whose trial a compacted file of the same folder holds."""
    folders: dict[str, list[str]] = defaultdict(list)
    for info in infos:
        folders[info.path.rsplit("/", 1)[0]].append(info.path)
    copies = set()
    for paths in folders.values():
        compacted = [p for p in paths if is_compacted(p)]
        if compacted and any(map(is_trial_file, paths)):
            held = held_names(store.fs, compacted)
            copies.update(p for p in paths if is_trial_file(p) and p.rsplit("/", 1)[-1] in held)
    return copies


def _check_summaries(store: Store, flagged: set[str]) -> list[Problem]:
    """Each summary whose counts are not its search's rows' (a live driver's search aside)."""
    problems = []
    for info in _files(store, SUMMARIES):
        relative = info.path[len(store.root) + 1:]
        name = info.base_name[:-len(".json")]
        if not info.base_name.endswith(".json") or info.base_name.startswith((".", "_")) or relative in flagged:
            continue
        summary = store.summary(name)
        lease = lease_info(store, name)
        if summary is None or (lease is not None and lease.alive):
            continue
        rows = {k: n for k, n in Counter(store.trial_statuses(name).values()).items() if n}
        if sum(summary.values()) > sum(rows.values()):
            problems.append(Problem(relative, MISSING_ROWS, f"it counts {_counts(summary)}, the readable rows "
                                    f"{_counts(rows)}: {sum(summary.values()) - sum(rows.values())} trials were "
                                    f"written and cannot be read now (damaged or quarantined files); it is kept"))
        elif summary != rows:
            problems.append(Problem(relative, STALE_SUMMARY, f"it counts {_counts(summary)}, the rows "
                                    f"{_counts(rows)}; --quarantine writes it again from the rows"))
    return problems


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no trials"


def _files(store: Store, folder: str) -> list[pafs.FileInfo]:
    base = store.path(folder)
    if store.fs.get_file_info(base).type != pafs.FileType.Directory:
        return []
    selector = pafs.FileSelector(base, recursive=True)
    return [i for i in store.fs.get_file_info(selector) if i.type == pafs.FileType.File]


def _check_parquet(store: Store, table: str, path: str, relative: str) -> list[Problem]:
    try:
        store.read_file(table, path)
    except READ_ERRORS as error:
        return [Problem(relative, "corrupt parquet", one_line(error) + _held_trials(store, table, path))]
    return []


def _held_trials(store: Store, table: str, path: str) -> str:
    """What a damaged file of ``table`` held, for its problem's line: a trial file's trial (its
    name), a compacted part's trials (the ids its twin in the other table holds: a compaction
    names both tables' parts alike), else the other table's trials this one cannot read."""
    folder, name = path.rsplit("/", 1)
    if is_trial_file(path):
        return f"; it held trial {name[len(TRIAL_PREFIX):-len(SUFFIX)]}"
    other, partition = "epochs" if table == "trials" else "trials", folder.rsplit("/", 1)[-1]
    try:
        with store.fs.open_input_file(store.path(other, partition, name)) as source:
            ids = set(pq.ParquetFile(source, **CHECKSUMS).read(columns=["trial_id"]).column(0).to_pylist())
        where = f"{other}/{partition}/{name}"
    except READ_ERRORS:  # no twin (trials without epochs), or a damaged one too
        search = partition[len("search="):]
        ids = set(store.read(other, search=search, columns=["trial_id"])["trial_id"].to_pylist()) - set(
            store.read(table, search=search, columns=["trial_id"])["trial_id"].to_pylist())
        where = f"the {other} table's rows whose {table} rows cannot be read"
    if not ids:
        return f"; which trials it held is unknown ({where} names none)"
    shown = sorted(ids)[:SHOWN_IDS]
    more = f" and {len(ids) - len(shown)} more" if len(ids) > len(shown) else ""
    return f"; it held {len(ids)} trials: {', '.join(shown)}{more} (from {where})"


def _check_json(store: Store, info: pafs.FileInfo, relative: str, young_ok: bool) -> list[Problem]:
    try:
        value = store.read_json(relative)
    except FileNotFoundError:
        return []
    except (ValueError, OSError) as error:
        age = _age(info)
        if young_ok and age is not None and age <= TEMPORARY_GRACE_S:
            return []  # a lease being created right now is empty for an instant
        return [Problem(relative, "unreadable json", one_line(error))]
    if not isinstance(value, dict):
        return [Problem(relative, "unreadable json", f"a JSON {type(value).__name__}, not an object")]
    return []


def _age(info: pafs.FileInfo) -> float | None:
    return None if info.mtime is None else time.time() - info.mtime.timestamp()
