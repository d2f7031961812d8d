"""Datasets named by the user rather than the catalogue: a PyG class by name
(``pyg:CLASS[/NAME]``) and a user's file (``file:PATH``, ``.pt`` or ``.npz``), and the
seeded random splits of the ``random`` setting.

PyG classes are looked up as attributes of ``torch_geometric.datasets`` (no module is ever
imported by name) and read from ``DATA_ROOT/CLASS`` mirrored into the cache, as the
catalogue's datasets are. Without ``--download`` a class is built as a subclass whose
``download`` names the missing raw files instead of fetching them.

A file is read without running code from it: ``.npz`` with ``allow_pickle=False``; ``.pt``
with ``torch.load(weights_only=True)``, which unpickles only tensors, containers and the
classes allowed explicitly (PyG's ``Data`` and its storages): a ``.pt`` holding anything
else is refused, never executed. Every array is checked before training (sizes agree,
labels in 0..C-1, finite features, edges within the nodes, boolean disjoint masks), each
broken rule one line naming the file.
"""

from __future__ import annotations

import difflib
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from orthotune.core import ConfigError, DatasetInfo, TrainConfig, check, one_line

MASKS = ("train_mask", "val_mask", "test_mask")
#: PyG classes named in the message for an unknown one (the whole list is long).
SHOWN_CLASSES = ("Amazon", "Coauthor", "HeterophilousGraphDataset", "Planetoid", "TUDataset", "WikipediaNetwork")


# -- PyG classes by name --------------------------------------------------------------------

def pyg_class(info: DatasetInfo) -> type:
    """The ``torch_geometric.datasets`` class a ``pyg:`` name names, or a one-line error
    listing some valid ones (close matches first)."""
    import torch_geometric.datasets as datasets
    from torch_geometric.data import Dataset

    name = info.subdir
    found = getattr(datasets, name, None) if name in datasets.__all__ else None
    if isinstance(found, type) and issubclass(found, Dataset):
        return found
    close = difflib.get_close_matches(name, datasets.__all__, n=3)
    shown = list(dict.fromkeys([*close, *SHOWN_CLASSES]))
    raise ConfigError(f"unknown PyG dataset class {name!r} in dataset {info.name!r}; valid: classes of "
                      f"torch_geometric.datasets, e.g. {', '.join(shown)} ({len(datasets.__all__)} in all)")


class _MissingRaw(Exception):
    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.paths = paths


class _RawPresent(Exception):
    """Raised by the probe once the raw files are found, before anything is processed."""


def _offline(cls: type, probe: bool = False) -> type:
    """``cls`` with ``download`` replaced by naming the missing raw files; with ``probe``, it
    also stops before processing (a check that the files are there, no more)."""

    def download(self) -> None:
        raise _MissingRaw([path for path in self.raw_paths if not os.path.exists(path)])

    def _process(self) -> None:
        raise _RawPresent

    members: dict[str, Any] = {"download": download}
    if probe:
        members["_process"] = _process
    # the class's own name: some classes derive folder names from it
    return type(cls.__name__, (cls,), members)


def build_pyg(cls: type, root: Path, info: DatasetInfo, split: str | None = None) -> object:
    """``cls(root / CLASS[, NAME])``: Planetoid with its public split for ``own``; the
    class's refusal of the name argument as one line."""
    folder = str(root / info.subdir)
    extra = {"split": "public"} if info.subdir == "Planetoid" else {}
    try:
        return cls(folder, info.argument, **extra) if info.argument else cls(folder, **extra)
    except (AssertionError, TypeError, ValueError, KeyError) as error:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"PyG class {info.subdir} refused dataset {info.name!r}: {detail}") from None


def load_pyg(shadow: Path, data_root: Path, info: DatasetInfo, probe: bool = False) -> object:
    """The dataset from the mirror ``shadow`` of the data root, never downloading: a missing
    raw file is one line naming the folder below the data root and the files it lacks."""
    try:
        return build_pyg(_offline(pyg_class(info), probe), shadow, info)
    except _RawPresent:
        return None
    except _MissingRaw as missing:
        files = [str(Path(path).relative_to(shadow)) for path in missing.paths]
        raise ConfigError(
            f"data root {str(data_root)!r} lacks {len(files)} raw file(s) of dataset {info.name!r} below "
            f"{info.subdir}/: {', '.join(files[:6])}{' and more' if len(files) > 6 else ''}; put them there as "
            f"PyG lays them out or add --download to fetch them into it") from None


# -- user files ----------------------------------------------------------------------------

def file_path(info: DatasetInfo, data_root: Path) -> Path:
    """A ``file:`` dataset's path: absolute as given, else below the data root."""
    path = Path(info.subdir).expanduser()
    return path if path.is_absolute() else data_root / path


def read_graph_file(path: Path, name: str) -> Data:
    """The graph a ``.pt`` or ``.npz`` file holds, validated (:func:`validate_graph`)."""
    relative = "" if Path(name.partition(":")[2]).expanduser().is_absolute() else \
        " (a relative PATH is read below the data root)"
    check(path.is_file(), f"dataset {name!r}: file {str(path)!r} does not exist{relative}")
    arrays = _read_npz(path) if path.suffix.lower() == ".npz" else _read_pt(path)
    return validate_graph(arrays, str(path))


def _read_npz(path: Path) -> dict[str, Tensor]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: torch.from_numpy(np.ascontiguousarray(archive[key])) for key in archive.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, TypeError) as error:
        raise ConfigError(f"file {str(path)!r} is not a readable .npz of arrays "
                          f"({one_line(error)})") from None


def _read_pt(path: Path) -> dict[str, Any]:
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    # weights_only: only tensors, containers and these PyG data containers are unpickled.
    # Added for good, as PyG adds Data itself: the safe_globals context manager would remove
    # PyG's own registration of Data on exit, and PyG's processed files then warn on load.
    torch.serialization.add_safe_globals([Data, DataEdgeAttr, DataTensorAttr, GlobalStorage])
    try:
        value = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 -- any unreadable file is one line, not a traceback
        raise ConfigError(f"file {str(path)!r} is not a PyG Data or dict of tensors saved by torch.save "
                          f"(read with weights_only=True: {one_line(error)})") from None
    if isinstance(value, Data):
        return {key: value[key] for key in value.keys()}
    check(isinstance(value, dict), f"file {str(path)!r} holds a {type(value).__name__}, not a PyG Data or a dict "
                                   f"of tensors")
    return value


def validate_graph(arrays: dict[str, Any], where: str) -> Data:
    """A :class:`Data` of ``x``, ``y``, ``edge_index`` and optional masks, each rule checked
    with a one-line error naming ``where``: sizes agree, labels in 0..C-1 (C the optional
    ``num_classes``, else the largest label + 1), no NaN or infinite feature, edges within
    the nodes, masks boolean, of one shape, disjoint."""
    missing = [key for key in ("x", "y", "edge_index") if key not in arrays]
    check(not missing, f"file {where!r} lacks {', '.join(missing)} (it needs x, y and edge_index; "
                       f"train_mask, val_mask and test_mask are optional)")
    x, y, edges = (_tensor(arrays[key], key, where) for key in ("x", "y", "edge_index"))
    check(x.dim() == 2 and x.shape[0] > 0 and x.dtype != torch.bool and not x.is_complex(),
          f"file {where!r}: x has shape {tuple(x.shape)} and dtype {x.dtype}; it must be numbers [nodes, features]")
    bad = int((~torch.isfinite(x)).sum())
    check(bad == 0, f"file {where!r}: x holds {bad} NaN or infinite value(s); features must be finite")
    nodes = x.shape[0]
    y = _labels(y, nodes, arrays.get("num_classes"), where)
    check(edges.dim() == 2 and edges.shape[0] == 2 and not edges.is_floating_point() and edges.dtype != torch.bool,
          f"file {where!r}: edge_index has shape {tuple(edges.shape)} and dtype {edges.dtype}; it must be "
          f"integer [2, edges]")
    if edges.numel():
        low, high = int(edges.min()), int(edges.max())
        check(low >= 0 and high < nodes, f"file {where!r}: edge_index holds node {high if high >= nodes else low}, "
                                         f"outside 0..{nodes - 1} (x has {nodes} rows)")
    data = Data(x=x.float(), y=y, edge_index=edges.long())
    for key, mask in _masks(arrays, nodes, where).items():
        data[key] = mask
    return data


def _tensor(value: Any, key: str, where: str) -> Tensor:
    check(isinstance(value, (Tensor, np.ndarray)), f"file {where!r}: {key} is a {type(value).__name__}, not an array")
    return torch.as_tensor(value)


def _labels(y: Tensor, nodes: int, num_classes: Any, where: str) -> Tensor:
    y = y.view(-1) if y.dim() == 2 and y.shape[1] == 1 else y
    check(y.dim() == 1 and not y.is_floating_point() and y.dtype != torch.bool,
          f"file {where!r}: y has shape {tuple(y.shape)} and dtype {y.dtype}; it must be integer labels [nodes]")
    check(y.numel() == nodes, f"file {where!r}: y has {y.numel()} labels for {nodes} nodes (x's rows); "
                              f"sizes must agree")
    given = torch.as_tensor(num_classes) if num_classes is not None else None
    check(given is None or (given.numel() == 1 and not given.is_floating_point()),
          f"file {where!r}: num_classes must be one integer")
    classes = int(given) if given is not None else int(y.max()) + 1
    low, high = int(y.min()), int(y.max())
    check(low >= 0 and high < classes, f"file {where!r}: label {low if low < 0 else high} is outside 0..{classes - 1}; "
                                       f"labels must lie in 0..C-1")
    return y.long()


def _masks(arrays: dict[str, Any], nodes: int, where: str) -> dict[str, Tensor]:
    given = [key for key in MASKS if key in arrays]
    if not given:
        return {}
    check(len(given) == len(MASKS), f"file {where!r} has {', '.join(given)} but not all of {', '.join(MASKS)}")
    masks = {key: _tensor(arrays[key], key, where) for key in MASKS}
    for key, mask in masks.items():
        check(mask.dtype == torch.bool, f"file {where!r}: {key} has dtype {mask.dtype}; masks must be boolean")
        check(mask.dim() in (1, 2) and mask.shape[0] == nodes and mask.shape == masks["train_mask"].shape,
              f"file {where!r}: {key} has shape {tuple(mask.shape)}; masks must be [{nodes}] or [{nodes}, splits], "
              f"all of one shape")
    columns = {key: mask.view(nodes, -1) for key, mask in masks.items()}
    for first, second in (("train_mask", "val_mask"), ("train_mask", "test_mask"), ("val_mask", "test_mask")):
        overlap = (columns[first] & columns[second]).sum(0)  # per split column
        if overlap.any():
            split = int(overlap.nonzero()[0, 0])
            raise ConfigError(f"file {where!r}: {first} and {second} overlap on {int(overlap[split])} node(s) "
                              f"(split {split}); masks must be disjoint")
    return masks


# -- seeded random splits ------------------------------------------------------------------

@dataclass(frozen=True)
class RandomSplit:
    """The random setting's split rule (the config's ``split_*`` fields); split ``k`` is
    drawn with ``torch.Generator().manual_seed(k)``, so it is the same on every machine and
    for both arms."""

    train: float
    val: float
    stratify: bool
    per_class: int

    @classmethod
    def of(cls, config: TrainConfig) -> RandomSplit | None:
        if config.split_train is None:
            return None
        return cls(config.split_train, config.split_val, config.split_stratify, config.split_per_class)

    def masks(self, y: Tensor, seed: int, name: str) -> tuple[Tensor, Tensor, Tensor]:
        """Boolean ``[N]`` train/val/test masks of split ``seed``."""
        generator = torch.Generator().manual_seed(seed)
        y = y.cpu()
        nodes = y.numel()
        train, val = torch.zeros(nodes, dtype=torch.bool), torch.zeros(nodes, dtype=torch.bool)
        if self.per_class:
            for label in torch.unique(y):
                members = _shuffled((y == label).nonzero().view(-1), generator)
                train[members[: self.per_class]] = True
            rest = _shuffled((~train).nonzero().view(-1), generator)
            val[rest[: round(self.val * nodes)]] = True
        else:
            groups = [(y == label).nonzero().view(-1) for label in torch.unique(y)] if self.stratify else \
                [torch.arange(nodes)]
            for members in groups:
                members = _shuffled(members, generator)
                size = members.numel()
                cut_train, cut_val = round(self.train * size), round((self.train + self.val) * size)
                train[members[:cut_train]] = True
                val[members[cut_train:cut_val]] = True
        test = ~(train | val)
        check(bool(train.any()) and bool(test.any()),
              f"split {seed} of {name} has {int(train.sum())} training and {int(test.sum())} test nodes; "
              f"change split_train/split_val/split_per_class")
        return train, val, test


def _shuffled(index: Tensor, generator: torch.Generator) -> Tensor:
    return index[torch.randperm(index.numel(), generator=generator)]
