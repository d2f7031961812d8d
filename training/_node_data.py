"""One node-classification graph as tensors: :class:`NodeData` (features, ``A_hat``, labels,
split masks) loaded through :mod:`._data`'s loaders, and the random setting's split rule."""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch_geometric.transforms as T
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import remove_self_loops, to_torch_csr_tensor

from orthotune.core import DATASETS, SETTINGS, DatasetInfo, OrthotuneError, TrainConfig, check
from orthotune.models import SparseFeatures, node_features
from orthotune.training._data import DataRoot, check_masks, load_dataset
from orthotune.training._given import RandomSplit

#: :class:`NodeData`'s tensors, each indexed by node (moved, renumbered and cached alike).
_NODE_TENSORS = ("x", "adj", "y", "train_mask", "val_mask", "test_mask")


@dataclass(frozen=True)
class NodeData:
    """One node-classification graph ready for full-batch training.

    ``adj`` is ``A_hat = D^-1/2 (A + I) D^-1/2`` of the (by default undirected) graph as a sparse CSR
    matrix; masks are ``[N, splits]`` (one column for a single official/public split). In the
    random setting the masks have no column: ``random`` (set per config by
    :func:`with_random_split`) draws split ``k`` from seed ``k`` when asked for it.
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
    random: RandomSplit | None = None
    adjacency: str = "augmented"  # the setting's graph operator (``SettingInfo.adjacency``), DropEdge's too
    order: Tensor | None = None  # after :meth:`reordered`: node ``i`` is the loaded graph's node ``order[i]``

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    @property
    def num_splits(self) -> int:
        return self.train_mask.shape[1]

    def masks(self, splits: Sequence[int]) -> tuple[Tensor, Tensor, Tensor]:
        """``[N, len(splits)]`` train/val/test masks for the given split columns."""
        if SETTINGS.get(self.setting).split == "random":
            return self._random_masks(splits)
        for split in splits:
            if not 0 <= split < self.num_splits:
                raise OrthotuneError(
                    f"split={split} must lie in [0, {self.num_splits - 1}] for "
                    f"{self.name} ({self.setting})"
                )
        columns = list(splits)
        return self.train_mask[:, columns], self.val_mask[:, columns], self.test_mask[:, columns]

    def _random_masks(self, splits: Sequence[int]) -> tuple[Tensor, Tensor, Tensor]:
        check(self.random is not None, f"{self.name} ({self.setting}) needs the split_* fields of a config")
        # drawn over the loaded graph's nodes: split k holds the same nodes in any order
        parts = [self.random.masks(self.in_loaded_order(self.y), split, self.name) for split in splits]
        masks = [torch.stack([part[i] for part in parts], 1) for i in range(3)]
        return tuple((m if self.order is None else m[self.order]).to(self.y.device) for m in masks)

    def reordered(self, order: Tensor) -> NodeData:
        """This graph with its nodes renumbered: node ``i`` is this graph's node ``order[i]``
        (features, ``A_hat``, labels and masks alike)."""
        order = order.cpu()
        inverse = inverse_permutation(order)
        picked = {key: getattr(self, key)[order.to(getattr(self, key).device)] for key in _NODE_TENSORS if key != "adj"}
        loaded = order if self.order is None else self.order[order]
        return replace(self, **picked, adj=renumbered(self.adj, inverse), order=loaded)

    def in_loaded_order(self, values: Tensor, dim: int = 0) -> Tensor:
        """``values`` indexed by this graph's nodes along ``dim``, in the loaded graph's order."""
        if self.order is None:
            return values
        return values.index_select(dim, inverse_permutation(self.order).to(values.device))

    def to(self, device: torch.device) -> NodeData:
        return replace(self, **{key: getattr(self, key).to(device) for key in _NODE_TENSORS})


#: Per device type, node features at most this dense take the sparse input path (dropout
#: on the non-zeros, a sparse product), measured where the two paths cross: on the 2-core
#: EPYC (one thread, a pack of 5 on [19717, 500] features, forward and backward of the input
#: layer) the sparse path won at 10% and 15% density in every round, the two split at 20%,
#: dense won at 25% and 30% (bench/epoch_bytes.py's notes, docs/benchmarks.md). Devices not
#: measured keep the models' own threshold.
SPARSE_CROSSOVER = {"cpu": 0.15}


def input_features(x: Tensor, device: torch.device) -> Tensor | SparseFeatures:
    """``x`` as the input layer reads it on ``device``: sparse where it is at most the device's
    crossover density, else ``x``."""
    crossover = SPARSE_CROSSOVER.get(device.type)
    return node_features(x) if crossover is None else node_features(x, crossover)


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
    split, adjacency = SETTINGS.get(setting).split, SETTINGS.get(setting).adjacency
    check(data.x is not None and data.y is not None, f"dataset {info.name!r} has no node features x or labels y")
    if split == "official":  # the dataset's own split (OGB's), unnormalised features
        train, val, test = _official_masks(dataset, data.num_nodes)
        y = data.y.view(-1)
    else:
        data = T.NormalizeFeatures()(data)
        y = data.y.view(-1) if data.y.dim() == 2 and data.y.shape[1] == 1 else data.y
        train, val, test = _given_masks(data, info, split)
    return NodeData(
        name=info.name,
        setting=setting,
        x=data.x.float(),
        adj=normalised_adjacency(data.edge_index, data.num_nodes, directed, adjacency),
        y=y,
        train_mask=train,
        val_mask=val,
        test_mask=test,
        num_classes=int(y.max()) + 1,
        num_edges=num_edges,
        adjacency=adjacency,
    )


#: Recent graphs in locality order, by the identity of their loaded tensors: a Ray worker's
#: trials train on one loaded graph (``_run.task_data``), which is then renumbered once (the
#: gather of PubMed's dense features alone took 55 ms per call).
_IN_LOCALITY_ORDER: dict[tuple[int, ...], tuple[list[weakref.ref], dict[str, Tensor]]] = {}


def in_locality_order(data: NodeData) -> NodeData:
    """``data.reordered(locality_order(data.adj))``, computed once per loaded graph."""
    if data.order is not None:  # renumbered already: not a loaded graph
        return data.reordered(locality_order(data.adj))
    sources = [getattr(data, key) for key in _NODE_TENSORS]
    key = tuple(id(t) for t in sources)
    hit = _IN_LOCALITY_ORDER.get(key)
    if hit is None or any(ref() is not t for ref, t in zip(hit[0], sources, strict=True)):
        moved = data.reordered(locality_order(data.adj))
        hit = [weakref.ref(t) for t in sources], {name: getattr(moved, name) for name in (*_NODE_TENSORS, "order")}
        while len(_IN_LOCALITY_ORDER) >= 4:
            _IN_LOCALITY_ORDER.pop(next(iter(_IN_LOCALITY_ORDER)))
        _IN_LOCALITY_ORDER[key] = hit
    return replace(data, **hit[1])


def locality_order(adj: Tensor) -> Tensor:
    """The nodes of ``adj`` (``[N, N]`` CSR) in reverse Cuthill-McKee order of its pattern
    (SciPy's, over ``A + A^T``): neighbours get nearby numbers, so a sparse product's rows read
    rows of the dense operand that are still in cache. Deterministic."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    adj = adj.cpu()
    pattern = csr_matrix((np.ones(adj.values().numel(), dtype=np.int8), adj.col_indices().numpy(),
                          adj.crow_indices().numpy()), shape=tuple(adj.shape))
    return torch.from_numpy(reverse_cuthill_mckee(pattern, symmetric_mode=True).astype(np.int64))


def inverse_permutation(order: Tensor) -> Tensor:
    """``inverse[order[i]] = i``."""
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return inverse


def renumbered(adj: Tensor, inverse: Tensor) -> Tensor:
    """The CSR ``adj`` with node ``j`` renamed ``inverse[j]``, each row's columns ascending."""
    inverse = inverse.to(adj.device)
    rows = torch.repeat_interleave(torch.arange(adj.shape[0], device=adj.device), adj.crow_indices().diff())
    index = torch.stack([inverse[rows], inverse[adj.col_indices()]])
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_coo_tensor(index, adj.values(), adj.shape).coalesce().to_sparse_csr()


def normalised_adjacency(edge_index: Tensor, num_nodes: int, directed: bool = False,
                         adjacency: str = "augmented") -> Tensor:
    """The setting's operator (:func:`operator_weights`; GCN's ``A_hat = D^-1/2 (A + I) D^-1/2``
    by default) with ``A[source, target]``, as CSR.

    Undirected (default): the graph symmetrised by PyG's ``ToUndirected`` first. ``directed``:
    the edges as loaded, ``D`` the row sums (out-degree + 1), as the authors'
    ``sys_normalized_adjacency`` does for their directed WebKB graphs; row ``i`` of
    ``A_hat h`` then aggregates node ``i``'s out-neighbours, as their ``spmm(adj, h)``.
    """
    if not directed:
        edge_index = T.ToUndirected()(Data(edge_index=edge_index, num_nodes=num_nodes)).edge_index
    index, weight = operator_weights(edge_index, num_nodes, adjacency)
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.simplefilter("ignore", UserWarning)
        return to_torch_csr_tensor(index, weight, (num_nodes, num_nodes))


def operator_weights(edge_index: Tensor, num_nodes: int, adjacency: str) -> tuple[Tensor, Tensor]:
    """A setting's graph operator over ``edge_index`` (``A[source, target]``, taken as given:
    each direction its own edge), as edges and weights, ``D`` the row sums:
    ``augmented`` ``D^-1/2 (A + I) D^-1/2``; ``first-order`` ``I + D^-1/2 A D^-1/2`` (DropEdge's
    FirstOrderGCN); ``random-walk`` ``D^-1 (A + I)`` (DropEdge's AugRWalk: row ``i`` of ``A_hat h``
    is the mean of node ``i`` and its out-neighbours). Self-loops in ``edge_index`` are dropped
    first (PyG's Planetoid loader drops them too)."""
    if adjacency == "augmented":
        return gcn_norm(edge_index, None, num_nodes, add_self_loops=True, flow="target_to_source")
    edges = remove_self_loops(edge_index)[0]
    loops = torch.arange(num_nodes, device=edge_index.device)
    if adjacency == "first-order":
        index, weight = gcn_norm(edges, None, num_nodes, add_self_loops=False, flow="target_to_source")
        ones = torch.ones(num_nodes, dtype=weight.dtype, device=weight.device)
        return torch.cat([index, torch.stack([loops, loops])], 1), torch.cat([weight, ones])
    check(adjacency == "random-walk", f"adjacency {adjacency!r} is not one of augmented, first-order, random-walk")
    index = torch.cat([edges, torch.stack([loops, loops])], 1)
    degree = torch.zeros(num_nodes, device=edge_index.device).index_add_(
        0, index[0], torch.ones(index.shape[1], device=edge_index.device))
    return index, degree.reciprocal()[index[0]]


def _given_masks(data: Data, info: DatasetInfo, split: str) -> tuple[Tensor, Tensor, Tensor]:
    """The dataset's masks as columns; none in the random setting (drawn per split)."""
    if split == "random":
        empty = torch.zeros(data.num_nodes, 0, dtype=torch.bool)
        return empty, empty, empty
    check_masks(data, info, split)
    if split == "fastgcn":
        return fastgcn_masks(data.test_mask)
    return tuple(_as_columns(data[key]) for key in ("train_mask", "val_mask", "test_mask"))


#: Validation nodes of FastGCN's full-supervised split.
FASTGCN_VAL = 500


def fastgcn_masks(test_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """FastGCN's full-supervised split (the dropedge-full setting's; DropEdge's table) as one column
    each, from Planetoid's public test mask: the nodes before the first test node are the
    files' labelled block (``allx``), whose last 500 validate and the rest train; the public
    test nodes test. (Planetoid's public validation nodes lie in the training part.)"""
    test = _as_columns(test_mask.bool())[:, 0]
    first = int(test.nonzero().min())
    check(first > FASTGCN_VAL, f"FastGCN's split needs more than {FASTGCN_VAL} nodes before the first test node")
    index = torch.arange(test.numel())
    train, val = index < first - FASTGCN_VAL, (index >= first - FASTGCN_VAL) & (index < first)
    return _as_columns(train), _as_columns(val), _as_columns(test)


def with_random_split(data: object, config: TrainConfig) -> object:
    """``data`` with ``config``'s random split rule (node data of the random setting only)."""
    split = RandomSplit.of(config)
    return data if split is None or not isinstance(data, NodeData) else replace(data, random=split)


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
