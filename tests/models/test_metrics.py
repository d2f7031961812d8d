"""Steadiness metrics: M_sig against the input features, as the paper defines it; smoothness
per pack slot exactly as alone, in bounded memory."""

import torch

from orthotune.models import feature_norms, signal_magnification, smoothness
from orthotune.models._metrics import SMOOTHNESS_ROWS


def test_m_sig_divides_by_each_nodes_input_feature_norm_and_skips_empty_nodes():
    x = torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])  # norms 5, 0, 1
    last = torch.tensor([[[10.0, 0.0], [0.0, 5.0]], [[7.0, 7.0], [7.0, 7.0]], [[2.0, 0.0], [1.0, 0.0]]])
    m_sig = signal_magnification(feature_norms(x), last)  # [N, packs=2, d]; node 1 has no features
    assert torch.allclose(m_sig, torch.tensor([(10 / 5 + 2 / 1) / 2, (5 / 5 + 1 / 1) / 2]))


def test_m_sig_of_states_equals_m_sig_of_their_norms():
    generator = torch.Generator().manual_seed(0)
    first, last = torch.randn(6, 3, 4, generator=generator), torch.randn(6, 3, 4, generator=generator)
    shared = first[:, :1].expand(6, 3, 4)  # one input shared by every pack, like X
    assert torch.allclose(signal_magnification(shared, last), signal_magnification(shared[:, 0].norm(dim=-1), last))


def test_smoothness_is_the_mean_pairwise_distance_of_each_slot():
    states = torch.randn(300, 3, 8, generator=torch.Generator().manual_seed(0))  # [N, packs, d]
    expected = torch.stack([torch.cdist(states[:, p], states[:, p]).mean() for p in range(3)])
    assert torch.allclose(smoothness(states), expected, rtol=1e-5)


def test_each_slot_of_a_pack_gets_exactly_its_lone_smoothness():
    states = torch.randn(2500, 5, 16, generator=torch.Generator().manual_seed(1))
    alone = torch.cat([smoothness(states[:, p:p + 1]) for p in range(5)])
    assert torch.equal(smoothness(states), alone)


def test_smoothness_holds_one_block_of_one_slots_distances_at_a_time(monkeypatch):
    """A pack of 64 Cora runs held 64 x 1024 x 2708 distances at once (710 MB)."""
    largest = []
    addmm = torch.addmm

    def recording(*args, **kwargs):
        out = addmm(*args, **kwargs)
        largest.append(out.numel())
        return out

    monkeypatch.setattr(torch, "addmm", recording)
    smoothness(torch.randn(2000, 16, 4))
    assert largest and max(largest) <= SMOOTHNESS_ROWS * 2000


def test_smoothness_counts_every_pair_once_each_way_and_a_node_with_itself_as_zero():
    """Against the float64 sum over every ordered pair, at sizes that end blocks mid-way; equal
    states (where the product form's rounding would leave each self-distance above zero) give 0."""
    generator = torch.Generator().manual_seed(2)
    for nodes in (1, SMOOTHNESS_ROWS - 1, SMOOTHNESS_ROWS, 2 * SMOOTHNESS_ROWS + 3):
        states = torch.randn(nodes, 2, 6, generator=generator) * 3 + 1
        exact = torch.stack([(s[:, None] - s[None]).norm(dim=-1).sum() / nodes**2
                             for s in states.double().transpose(0, 1)])
        torch.testing.assert_close(smoothness(states).double(), exact, rtol=2e-5, atol=0.0)
    same = torch.full((300, 1, 64), 7.25)
    assert smoothness(same).item() == 0.0
