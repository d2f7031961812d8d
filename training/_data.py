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

import hashlib
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch_geometric.transforms as T
from filelock import FileLock
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import to_torch_csr_tensor

from orthotune.core import DATASETS, SETTINGS, DatasetInfo, OrthotuneError, Registry

DATA_ROOT_ENV = "ORTHOTUNE_DATA_ROOT"
CACHE_ENV = "ORTHOTUNE_CACHE"


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


def cache_dir() -> Path:
    """orthotune's writable cache (processed datasets): ``ORTHOTUNE_CACHE`` or ~/.cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "orthotune"


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
    return Planetoid(str(root / folder), name, split=split)  # PyG's split names: geom-gcn, public


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


#: The loader families of the catalogue's datasets (``orthotune.core.DATASETS``): a dataset
#: of a family is one entry there; a new family is one entry here.
LOADERS: Registry[Loader] = Registry("dataset loader")
LOADERS.add("planetoid", Loader(_load_planetoid, _planetoid_files))
LOADERS.add("webkb", Loader(_load_webkb, _webkb_files))
LOADERS.add("tudataset", Loader(_load_tudataset, _tudataset_files))
LOADERS.add("ogb", Loader(_load_ogb, _ogb_files))


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


def _fetch(dataset: str, setting: str | None, root: DataRoot) -> None:
    """The loader itself, on the data root: it downloads the missing raw files (and writes
    ``processed/`` there)."""
    info = DATASETS.get(dataset)
    with FileLock(str(root.path / f".{info.name}.lock")):
        LOADERS.get(info.loader).load(root.path, info, _split(info, setting)[1])


def load_dataset(name: str, setting: str | None = None, data_root: DataRoot | None = None):
    """The PyG dataset object for ``name`` in ``setting``, loaded by its own loader."""
    info = DATASETS.get(name)
    setting, split = _split(info, setting)
    data_root = data_root or DataRoot.resolve()
    check_dataset_files(info.name, setting, data_root)
    root = _loader_root(info, data_root)
    with FileLock(str(root / f".{info.name}.lock")):
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
                link.symlink_to(Path(folder) / name)


@dataclass(frozen=True)
class NodeData:
    """One node-classification graph ready for full-batch training.

    ``adj`` is ``A_hat = D^-1/2 (A + I) D^-1/2`` of the (by default undirected) graph as a sparse CSR
    matrix; masks are ``[N, splits]`` (one column for a single official/public split).
    """

    name: str
    setting: str
    x: Tensor
    adj: Tensor
    y: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor
    num_classes: int
    num_edges: int  # directed edges of the loaded graph, before symmetrisation

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    @property
    def num_splits(self) -> int:
        return self.train_mask.shape[1]

    def masks(self, splits: Sequence[int]) -> tuple[Tensor, Tensor, Tensor]:
        """``[N, len(splits)]`` train/val/test masks for the given split columns."""
        for split in splits:
            if not 0 <= split < self.num_splits:
                raise OrthotuneError(
                    f"split={split} must lie in [0, {self.num_splits - 1}] for "
                    f"{self.name} ({self.setting})"
                )
        columns = list(splits)
        return self.train_mask[:, columns], self.val_mask[:, columns], self.test_mask[:, columns]

    def to(self, device: torch.device) -> NodeData:
        moved = {
            key: getattr(self, key).to(device)
            for key in ("x", "adj", "y", "train_mask", "val_mask", "test_mask")
        }
        return replace(self, **moved)


def load_node_data(
    name: str, setting: str | None = None, data_root: DataRoot | None = None, directed: bool = False
) -> NodeData:
    """The graph ready for full-batch training; ``directed`` keeps its edges as loaded
    (the authors' WebKB runs), else the graph is symmetrised."""
    info = DATASETS.get(name)
    if info.task != "node":
        raise OrthotuneError(f"dataset {name!r} is a graph-classification dataset")
    setting = setting or info.default_setting
    dataset = load_dataset(name, setting, data_root)
    data: Data = dataset[0]
    num_edges = data.num_edges
    if SETTINGS.get(setting).split == "official":  # the dataset's own split (OGB's), unnormalised features
        train, val, test = _official_masks(dataset, data.num_nodes)
        y = data.y.view(-1)
    else:
        data = T.NormalizeFeatures()(data)
        train, val, test = (_as_columns(m) for m in (data.train_mask, data.val_mask, data.test_mask))
        y = data.y
    return NodeData(
        name=info.name,
        setting=setting,
        x=data.x.float(),
        adj=normalised_adjacency(data.edge_index, data.num_nodes, directed),
        y=y,
        train_mask=train,
        val_mask=val,
        test_mask=test,
        num_classes=int(y.max()) + 1,
        num_edges=num_edges,
    )


def normalised_adjacency(edge_index: Tensor, num_nodes: int, directed: bool = False) -> Tensor:
    """GCN's ``A_hat = D^-1/2 (A + I) D^-1/2`` with ``A[source, target]``.

    Undirected (default): the graph symmetrised by PyG's ``ToUndirected``, then ``GCNNorm``.
    ``directed``: the edges as loaded, ``D`` the row sums (out-degree + 1), as the authors'
    ``sys_normalized_adjacency`` does for their directed WebKB graphs; row ``i`` of
    ``A_hat h`` then aggregates node ``i``'s out-neighbours, as their ``spmm(adj, h)``.
    """
    if directed:
        index, weight = gcn_norm(edge_index, None, num_nodes, add_self_loops=True, flow="target_to_source")
    else:
        graph = T.GCNNorm()(T.ToUndirected()(Data(edge_index=edge_index, num_nodes=num_nodes)))
        index, weight = graph.edge_index, graph.edge_weight
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.simplefilter("ignore", UserWarning)
        return to_torch_csr_tensor(index, weight, (num_nodes, num_nodes))


def _as_columns(mask: Tensor) -> Tensor:
    return mask.view(-1, 1) if mask.dim() == 1 else mask


def _official_masks(dataset, num_nodes: int) -> tuple[Tensor, Tensor, Tensor]:
    split = dataset.get_idx_split()
    masks = []
    for key in ("train", "valid", "test"):
        mask = torch.zeros(num_nodes, 1, dtype=torch.bool)
        mask[split[key], 0] = True
        masks.append(mask)
    return tuple(masks)
