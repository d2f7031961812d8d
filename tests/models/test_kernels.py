"""An epoch issues the same kernels whatever the pack size (issue 15, item 1).

Counted as aten ops of one training epoch (forward and backward) by the profiler, on
CPU, on a small synthetic graph: op counts do not depend on the sizes, only on loops.
"""

from collections import Counter

import pytest
import torch

from orthotune.core import PROFILES, OrthoSettings
from orthotune.models import BACKBONES, adjacency, issued_ops, node_features

NODES, FEATURES, CLASSES = 60, 90, 3


def synthetic_graph(seed: int = 0):
    """Sparse bag-of-words features and ``A_hat`` of a random undirected graph."""
    generator = torch.Generator().manual_seed(seed)
    x = (torch.rand(NODES, FEATURES, generator=generator) < 0.05).float()
    edges = torch.randint(0, NODES, (2, 4 * NODES), generator=generator)
    a = torch.zeros(NODES, NODES)
    a[edges[0], edges[1]] = 1.0
    a = ((a + a.T + torch.eye(NODES)) > 0).float()
    scale = a.sum(1).rsqrt()
    return node_features(x), adjacency((scale[:, None] * a * scale[None, :]).to_sparse_csr())


def epoch_ops(model, features, adj) -> Counter:
    """aten op calls of one training epoch (after a first one that builds cached layouts)."""
    model.train()

    def epoch():
        out = model.run(features, *adj)
        (out.logits.logsumexp(-1).mean(0).sum() + out.penalty.sum()).backward()

    return issued_ops(epoch)


CASES = [
    ("gcn", {}),
    ("gcn", {"layout": "official", "batch_norm": True}),
    ("jknet", {"self_loop": True}),
    ("gcn", {"self_loop": True, "layout": "standard"}),
    ("gcnii", {"variant": True}),
]


def op_counts_at_4_and_64(name: str, switches: dict, ortho: dict | None) -> dict[int, Counter]:
    features, adj = synthetic_graph()
    counts = {}
    for packs in (4, 64):
        # per-pack T differs within the pack, with the same largest T at both sizes
        settings = ([OrthoSettings(T=1 + p % 4, beta=0.4, lam=1e-3, **ortho) for p in range(packs)]
                    if ortho is not None else None)
        model = BACKBONES.get(name)(FEATURES, 8, CLASSES, 3, dropout=0.5, ortho=settings,
                                    seeds=range(packs), **switches)
        counts[packs] = epoch_ops(model, features, adj)
    return counts


def without_draws(counts: dict[int, Counter]) -> dict[int, Counter]:
    """The counts, checked for the dropout draws: each slot draws its masks from its own stream
    (a run's masks do not depend on its pack). On a CPU the streams are numpy's bit generators,
    whose draws are no torch op: no ``random_`` at either size, so nothing grows with the pack."""
    draws = {packs: counts[packs].pop("aten::random_", 0) for packs in counts}
    assert draws == {4: 0, 64: 0}
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("ortho", [False, True])
@pytest.mark.parametrize(("name", "switches"), CASES)
def test_an_epoch_runs_the_same_ops_at_pack_4_and_pack_64(name, switches, ortho):
    counts = without_draws(op_counts_at_4_and_64(name, switches, {} if ortho else None))
    assert sum(counts[4].values()) > 50  # the profiler saw the epoch
    assert counts[4] == counts[64]


def test_the_authors_orthogonalisation_runs_the_same_ops_at_pack_4_and_pack_64():
    authors = {k: v for k, v in PROFILES["official"].items() if k in OrthoSettings.__dataclass_fields__}
    counts = without_draws(op_counts_at_4_and_64("gcn", {"layout": "official"}, {**authors, "norm_groups": 2}))
    assert counts[4] == counts[64]


def test_the_op_count_would_see_a_per_pack_loop():
    """The measure itself: a loop over packs shows up as more ops at pack 64."""
    features, adj = synthetic_graph()
    counts = {}
    for packs in (4, 64):
        model = BACKBONES.get("gcn")(FEATURES, 8, CLASSES, 2, dropout=0.0, seeds=range(packs))
        loop = model.project
        model.project = lambda layer, x, values, loop=loop: torch.stack([h * 1.0 for h in loop(layer, x, values)])
        counts[packs] = epoch_ops(model, features, adj)
    assert sum(counts[64].values()) > sum(counts[4].values())
