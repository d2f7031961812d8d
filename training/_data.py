"""Benchmark datasets through PyG's and OGB's own loaders, read-only on the data root.

The data root comes from ``--data-root`` or ``ORTHOTUNE_DATA_ROOT`` and has the layout of
``shared/data`` (``Planetoid/``, ``WebKB/``, ``TUDataset/``, ``ogbn_arxiv/``). PyG writes
``processed/`` next to ``raw/``, so orthotune never hands the data root to a loader: it
mirrors the dataset's files as symlinks into a writable cache and loads from there. Nothing
is downloaded unless asked (``--download``): then the loaders fetch the missing files into
the data root itself. With no data root set, every command fails in one line saying how to
set one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from filelock import FileLock
from torch_geometric.data import Data

from orthotune.core import (
    DATASETS,
    SETTINGS,
    ConfigError,
    DatasetInfo,
    OrthotuneError,
    Registry,
    cache_dir,
    check,
)
from orthotune.training._given import build_pyg, file_path, load_pyg, pyg_class, read_graph_file

DATA_ROOT_ENV = "ORTHOTUNE_DATA_ROOT"


#: The one-line answer when no data root is set (the CLI's flags are named: it is what users run).
NO_DATA_ROOT = (f"no data root is set: give --data-root DIR or set {DATA_ROOT_ENV}=DIR (a folder laid out like "
                f"the benchmark data: Planetoid/, WebKB/, TUDataset/, ogbn_arxiv/); add --download to fetch the "
                f"datasets into DIR")


@dataclass(frozen=True)
class DataRoot:
    """Where the raw files live. Read-only unless ``download``: then the loaders may fetch a
    dataset's missing files into it."""

    path: Path
    download: bool = False

    @classmethod
    def resolve(cls, option: str | os.PathLike | None = None, download: bool = False) -> DataRoot:
        """``option``, else ``$ORTHOTUNE_DATA_ROOT``; neither set is an error, never a download."""
        given = option if option is not None else os.environ.get(DATA_ROOT_ENV)
        if not given:
            raise OrthotuneError(NO_DATA_ROOT)
        path = Path(given).expanduser().resolve()
        if download:
            path.mkdir(parents=True, exist_ok=True)
        elif not path.is_dir():
            raise OrthotuneError(f"data root {str(given)!r} is not a directory (create it and add --download to "
                                 f"fetch the datasets into it)")
        return cls(path, download)


@dataclass(frozen=True)
class Loader:
    """A family of datasets read by one PyG or OGB loader (``DatasetInfo.loader`` names it):
    how it loads a dataset from a writable root with the setting's split, and the raw files
    it reads there (below the dataset's ``subdir``; with all of them present it never
    downloads)."""

    load: Callable[[Path, DatasetInfo, str], object]  # (root, dataset, split) -> the PyG dataset
    files: Callable[[DatasetInfo, str], list[str]]  # (dataset, split) -> raw files below its subdir


def _folder_and_name(info: DatasetInfo) -> tuple[str, str]:
    """``subdir`` is ``FOLDER/NAME``: the loader's root folder and the name it knows."""
    folder, _, name = info.subdir.rpartition("/")
    return folder, name


def _load_planetoid(root: Path, info: DatasetInfo, split: str):
    from torch_geometric.datasets import Planetoid

    folder, name = _folder_and_name(info)
    # PyG's split names: geom-gcn, public; fastgcn's masks are built from the public ones
    return Planetoid(str(root / folder), name, split="public" if split == "fastgcn" else split)


def _planetoid_files(info: DatasetInfo, split: str) -> list[str]:
    ind = [f"ind.{info.name}.{part}" for part in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")]
    if split != "geom-gcn":
        return [f"raw/{file}" for file in ind]
    return [f"geom-gcn/raw/{file}" for file in ind + _geom_gcn_splits(info.name)]


def _geom_gcn_splits(name: str) -> list[str]:
    return [f"{name}_split_0.6_0.2_{k}.npz" for k in range(10)]


def _load_webkb(root: Path, info: DatasetInfo, split: str):
    from torch_geometric.datasets import WebKB

    folder, name = _folder_and_name(info)
    return WebKB(str(root / folder), name)


def _webkb_files(info: DatasetInfo, split: str) -> list[str]:
    return [f"raw/{f}" for f in ("out1_node_feature_label.txt", "out1_graph_edges.txt", *_geom_gcn_splits(info.name))]


def _load_tudataset(root: Path, info: DatasetInfo, split: str):
    from torch_geometric.datasets import TUDataset

    folder, name = _folder_and_name(info)
    return TUDataset(str(root / folder), name)


def _tudataset_files(info: DatasetInfo, split: str) -> list[str]:
    name = _folder_and_name(info)[1]
    return [f"raw/{name}_{part}.txt" for part in ("A", "graph_indicator", "graph_labels")]


def _load_ogb(root: Path, info: DatasetInfo, split: str):
    from ogb.nodeproppred import PygNodePropPredDataset
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    # OGB 1.3.6 reloads its processed file with torch.load's weights-only default (torch
    # >= 2.6), which refuses PyG's data classes unless they are allowed explicitly.
    with torch.serialization.safe_globals([DataEdgeAttr, DataTensorAttr, GlobalStorage]):
        return PygNodePropPredDataset(info.name, root=str(root))


def _ogb_files(info: DatasetInfo, split: str) -> list[str]:
    # OGB asks on stdin whether to re-download a folder without its release marker
    return ["RELEASE_v1.txt", *(f"raw/{f}.csv.gz" for f in (
        "edge", "node-feat", "node-label", "node_year", "num-node-list", "num-edge-list")),
        *(f"split/time/{part}.csv.gz" for part in ("train", "valid", "test"))]


def _load_pyg(root: Path, info: DatasetInfo, split: str):
    """A ``pyg:`` dataset by its own class, which downloads what is missing (``_fetch``; an
    ordinary load goes through :func:`load_pyg`, which never downloads)."""
    return build_pyg(pyg_class(info), root, info)


def _load_file(root: Path, info: DatasetInfo, split: str):
    return [read_graph_file(file_path(info, root), info.name)]


def _unknown_files(info: DatasetInfo, split: str) -> list[str]:
    return []  # known only once the class is built or the file read: see _check_given


#: The loader families of the catalogue's datasets (``orthotune.core.DATASETS``): a dataset
#: of a family is one entry there; a new family is one entry here. ``pyg`` and ``file`` read
#: the datasets a user names (``pyg:CLASS/NAME``, ``file:PATH``; :mod:`._given`).
LOADERS: Registry[Loader] = Registry("dataset loader")
LOADERS.add("planetoid", Loader(_load_planetoid, _planetoid_files))
LOADERS.add("webkb", Loader(_load_webkb, _webkb_files))
LOADERS.add("tudataset", Loader(_load_tudataset, _tudataset_files))
LOADERS.add("ogb", Loader(_load_ogb, _ogb_files))
LOADERS.add("pyg", Loader(_load_pyg, _unknown_files))
LOADERS.add("file", Loader(_load_file, _unknown_files))
#: The families whose files are checked by reading them (:func:`_check_given`).
GIVEN = ("pyg", "file")


def _split(info: DatasetInfo, setting: str | None) -> tuple[str, str]:
    """``setting`` (the dataset's default for None), checked for the dataset, and its split."""
    setting = setting or info.default_setting
    info.check_setting(setting)
    return setting, SETTINGS.get(setting).split


def required_files(dataset: str, setting: str | None = None) -> list[str]:
    """The raw files ``dataset``'s loader reads in ``setting``, relative to the data root
    (with all of them present, PyG and OGB never download)."""
    info = DATASETS.get(dataset)
    split = _split(info, setting)[1]
    return [f"{info.subdir}/{name}" for name in LOADERS.get(info.loader).files(info, split)]


def missing_files(dataset: str, setting: str | None, data_root: DataRoot) -> list[str]:
    """The files of :func:`required_files` that ``data_root`` lacks."""
    return [file for file in required_files(dataset, setting) if not (data_root.path / file).is_file()]


#: Missing files named in a message, at most.
SHOWN_FILES = 6


def check_dataset_files(dataset: str, setting: str | None, data_root: DataRoot | str | os.PathLike | None) -> None:
    """Make sure ``data_root`` holds ``dataset``'s raw files for ``setting``: with
    ``download`` the loader fetches what is missing into it; otherwise a missing file raises
    :class:`OrthotuneError` naming the files and the data root, in one line."""
    root = data_root if isinstance(data_root, DataRoot) else DataRoot.resolve(data_root)
    if DATASETS.get(dataset).loader in GIVEN:
        _check_given(DATASETS.get(dataset), setting, root)
        return
    missing = missing_files(dataset, setting, root)
    if missing and root.download:
        _fetch(dataset, setting, root)
        missing = missing_files(dataset, setting, root)
    if missing:
        shown = ", ".join(missing[:SHOWN_FILES]) + (f" and {len(missing) - SHOWN_FILES} more"
                                                    if len(missing) > SHOWN_FILES else "")
        hint = ("the download did not provide them" if root.download else
                "put them there (see the data README) or add --download to fetch them into it")
        raise OrthotuneError(f"data root {str(root.path)!r} lacks {len(missing)} file(s) of dataset "
                             f"{DATASETS.get(dataset).name!r} ({setting or DATASETS.get(dataset).default_setting}): "
                             f"{shown}; {hint}")


def _check_given(info: DatasetInfo, setting: str | None, root: DataRoot) -> None:
    """A user's file is read and validated whole; a PyG class is looked up and built just far
    enough to find its raw files (mirrored into the cache: nothing is written to the data
    root), then, with ``download``, fetched by the class itself."""
    split = _split(info, setting)[1]
    if info.loader == "file":
        check_masks(_load_file(root.path, info, split)[0], info, split)
        return
    pyg_class(info)
    if not (root.path / info.subdir).is_dir() and not root.download:
        raise ConfigError(f"data root {str(root.path)!r} has no folder {info.subdir}/ for dataset {info.name!r}; "
                          f"put its raw files there as PyG lays them out or add --download to fetch them into it")
    _shadow(root).mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(_shadow(root) / f".{info.subdir}.lock"))
    try:
        with lock:
            load_pyg(_loader_root(info, root), root.path, info, probe=True)
    except ConfigError:
        if not root.download:
            raise
        _fetch(info.name, setting, root)
    if split == "own" and info.task == "node":  # whether it ships masks is known once loaded (then cached)
        with lock:
            check_masks(load_pyg(_loader_root(info, root), root.path, info)[0], info, split)


def check_masks(data: Data, info: DatasetInfo, split: str) -> None:
    check(split != "own" or all(key in data for key in ("train_mask", "val_mask", "test_mask")),
          f"dataset {info.name!r} has no train_mask, val_mask and test_mask; use --setting random")


def _fetch(dataset: str, setting: str | None, root: DataRoot) -> None:
    """The loader itself, on the data root: it downloads the missing raw files (and writes
    ``processed/`` there)."""
    info = DATASETS.get(dataset)
    with FileLock(str(root.path / f".{info.name.replace('/', '_').replace(':', '_')}.lock")):
        LOADERS.get(info.loader).load(root.path, info, _split(info, setting)[1])


def load_dataset(name: str, setting: str | None = None, data_root: DataRoot | None = None):
    """The PyG dataset object for ``name`` in ``setting``, loaded by its own loader."""
    info = DATASETS.get(name)
    setting, split = _split(info, setting)
    data_root = data_root or DataRoot.resolve()
    check_dataset_files(info.name, setting, data_root)
    if info.loader == "file":  # read where it lies: nothing is processed
        return _load_file(data_root.path, info, split)
    root = _loader_root(info, data_root)
    with FileLock(str(root / f".{info.subdir if info.loader == 'pyg' else info.name}.lock")):
        if info.loader == "pyg":
            return load_pyg(root, data_root.path, info)
        return LOADERS.get(info.loader).load(root, info, split)


def _loader_root(info: DatasetInfo, data_root: DataRoot) -> Path:
    """A writable root for the loader: the data root mirrored as symlinks into the cache."""
    shadow = _shadow(data_root)
    _mirror(data_root.path / info.subdir, shadow / info.subdir)
    return shadow


def _shadow(data_root: DataRoot) -> Path:
    digest = hashlib.sha1(str(data_root.path).encode()).hexdigest()[:12]
    return cache_dir() / "roots" / digest


def is_prepared(name: str, data_root: DataRoot) -> bool:
    """Whether the dataset's loader has processed it into the cache before (PyG's and OGB's
    loaders write ``processed*`` folders there; the mirror never creates one), so the next
    load reads it instead of processing it first."""
    if DATASETS.get(name).loader == "file":
        return True  # read as it is, never processed
    folder = _shadow(data_root) / DATASETS.get(name).subdir
    return folder.is_dir() and any(path.is_dir() for path in folder.rglob("processed*"))


def _mirror(source: Path, target: Path) -> None:
    """Recreate ``source``'s folders under ``target`` and symlink its files (idempotent)."""
    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if not d.startswith("processed")]
        destination = target / Path(folder).relative_to(source)
        destination.mkdir(parents=True, exist_ok=True)
        for name in files:
            link = destination / name
            if not link.exists():
                # another process (the plan's measuring streams, a search's trials) may mirror
                # the same root at once: its link is the same link
                with contextlib.suppress(FileExistsError):
                    link.symlink_to(Path(folder) / name)
