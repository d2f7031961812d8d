"""Steadiness metrics: M_sig against the input features, as the paper defines it."""

import torch

from orthotune.models import feature_norms, signal_magnification


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
