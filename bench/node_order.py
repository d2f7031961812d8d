"""The two product forms behind the ninth floor look, timed alone (one thread, best of
``--repeat``): the block-diagonal propagation ``A_hat`` x ``[P*N, 64]`` with the graph in its
loaded order and in locality order (``orthotune.training.TrainOptions.locality_order``), and a
narrow layer's weight gradient as autograd's ``x^T G`` and as ``G^T x``
(``orthotune.models._layers.NARROW_BELOW``).

    ORTHOTUNE_DATA_ROOT=../shared/data .venv/bin/python bench/node_order.py
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch


def best_ms(step, repeat: int) -> float:
    step()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def block(adj: torch.Tensor, copies: int) -> torch.Tensor:
    """``copies`` copies of the CSR ``adj`` on a block diagonal."""
    crow, col, nnz, n = adj.crow_indices(), adj.col_indices(), adj.values().numel(), adj.shape[0]
    rows = torch.cat([crow[:-1] + i * nnz for i in range(copies)] + [torch.tensor([copies * nnz])])
    cols = torch.cat([col + i * n for i in range(copies)])
    return torch.sparse_csr_tensor(rows, cols, adj.values().repeat(copies), (copies * n, copies * n))


def product(matrix: torch.Tensor, dense: torch.Tensor, kernel: str | None) -> torch.Tensor:
    return torch.sparse.mm(matrix, dense, kernel) if kernel else torch.sparse.mm(matrix, dense)


def spread(adj: torch.Tensor) -> float:
    rows = torch.repeat_interleave(torch.arange(adj.shape[0]), adj.crow_indices().diff())
    return float((rows - adj.col_indices()).abs().float().mean())


def main() -> None:
    from orthotune.training import DataRoot, load_node_data, locality_order

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("propagation, block diagonal x [P*N, 64], ms: loaded order / locality order")
    for name, copies in (("cora", 24), ("pubmed", 5)):
        data = load_node_data(name, "full", DataRoot.resolve(None))
        start = time.perf_counter()
        moved = data.reordered(locality_order(data.adj))
        setup = time.perf_counter() - start
        dense = torch.randn(copies * data.num_nodes, 64)
        cells = []
        for label, kernel in (("sum kernel", "sum"), ("torch.sparse.mm", None)):
            times = []
            for graph in (data, moved):
                matrix = block(graph.adj, copies)
                times.append(best_ms(partial(product, matrix, dense, kernel), args.repeat))
            cells.append(f"{label} {times[0]:.1f} / {times[1]:.1f}")
        print(f"  {name} x{copies}: {', '.join(cells)}; mean |i - j| {spread(data.adj):.0f} / "
              f"{spread(moved.adj):.0f}; the order and renumbering {setup * 1e3:.1f} ms")
    print("narrow weight gradient, ms: x^T G / G^T x")
    for packs, nodes, width in ((24, 2708, 64), (5, 19717, 64), (5, 19717, 576)):
        cells = []
        for outputs in (3, 7, 15, 16):
            x, grad = torch.randn(packs, nodes, width), torch.randn(packs, nodes, outputs)
            forms = ((x.mT, grad), (grad.mT, x))  # autograd's x^T G, then G^T x
            autograds, transposed = (best_ms(partial(torch.bmm, a, b), args.repeat) for a, b in forms)
            cells.append(f"{outputs}: {autograds:.2f} / {transposed:.2f}")
        print(f"  [{packs}, {nodes}, {width}] to " + ", ".join(cells))


if __name__ == "__main__":
    main()
