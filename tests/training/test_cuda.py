"""The trainer on a CUDA device: packed equals alone, captured CUDA graphs equal eager epochs,
the precision and determinism switches run. Skipped (one line) where no GPU is present; on a
CPU the graph switch has no effect (tested there)."""

import math
import warnings

import pytest
import torch
from trained import per_config

from orthotune.core import TrainConfig
from orthotune.models import smoothness
from orthotune.training import TrainOptions, train_node

CPU = torch.device("cpu")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
STRICT = TrainOptions(tf32=False)


def _configs(count: int = 4, epochs: int = 30) -> list[TrainConfig]:
    """Dropout off, so a run's result cannot depend on the slots beside it; rates up to 0.01."""
    settings = [(0.01, 5e-4, 2, 0.3, 1e-4), (0.005, 0.0, 5, 0.8, 5e-4), (0.002, 1e-3, 3, 0.5, 5e-4),
                (0.008, 5e-5, 1, 1.0, 1e-4)]
    return [TrainConfig(dataset="cora", depth=2, dropout=0.0, lr=lr, weight_decay=wd, T=t, beta=beta, lam=lam,
                        epochs=epochs, patience=epochs, seeds=(i,))
            for i, (lr, wd, t, beta, lam) in enumerate(settings[:count])]


def _same(a, b, tol: float = 1e-6) -> None:
    assert (a.status, a.best_epoch, a.epochs) == (b.status, b.best_epoch, b.epochs)
    assert math.isclose(a.val_acc, b.val_acc, abs_tol=tol)
    assert math.isclose(a.test_acc, b.test_acc, abs_tol=tol)


def test_the_graph_switch_changes_nothing_on_a_cpu(cora):
    configs = _configs(2, 6)
    eager = train_node(configs, cora, CPU)
    graphed = train_node(configs, cora, CPU, options=TrainOptions(cuda_graph=True))
    for _, a, b in per_config(configs, graphed, eager):
        assert a.runs[0].m_sig == b.runs[0].m_sig
        _same(a.runs[0], b.runs[0], 0.0)


@pytest.fixture
def on_gpu(cora):
    """(the GPU, Cora on it)."""
    device = torch.device("cuda")
    return device, cora.to(device)


def _assert_captured_equals_eager(configs: list[TrainConfig], on_gpu, **options) -> None:
    """The configs packed, eagerly and with the epoch captured (a failed capture warns: fail)."""
    device, data = on_gpu
    eager = train_node(configs, data, device, options=TrainOptions(tf32=False, **options))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        graphed = train_node(configs, data, device, options=TrainOptions(tf32=False, cuda_graph=True, **options))
    for _, a, b in per_config(configs, graphed, eager):
        _same(a.runs[0], b.runs[0])


@cuda
def test_packed_equals_alone_on_a_gpu_in_strict_fp32(on_gpu):
    device, data = on_gpu
    packed = train_node(_configs(), data, device, options=STRICT)
    for config, result in per_config(_configs(), packed):
        _same(result.runs[0], train_node(config, data, device, options=STRICT)[0].runs[0])


@cuda
def test_a_captured_epoch_trains_as_the_eager_one(on_gpu):
    _assert_captured_equals_eager(_configs(), on_gpu)


@cuda
def test_a_compacted_pack_is_captured_again(on_gpu):
    short = [TrainConfig(dataset="cora", depth=2, dropout=0.0, epochs=8, patience=8, seeds=(s,)) for s in (0, 1, 2)]
    long = TrainConfig(dataset="cora", depth=2, dropout=0.0, epochs=30, patience=30, seeds=(3,))
    _assert_captured_equals_eager([*short, long], on_gpu, sync_every=5, compact_below=0.5)


@cuda
@pytest.mark.parametrize("switches", [dict(tf32=True), dict(deterministic=True), dict(tf32=False, deterministic=True)])
def test_the_precision_and_determinism_switches_train_on_a_gpu(cora, switches):
    device = torch.device("cuda")
    result = train_node(_configs(2, 10), cora.to(device), device, options=TrainOptions(**switches))
    assert all(r.runs[0].epochs == 10 and r.runs[0].val_acc > 0 for r in result)


@cuda
def test_a_cell_cost_on_a_gpu_has_a_busy_share_only_when_profiled(data_root):
    from orthotune.training import measure_cell_cost

    config = TrainConfig(dataset="cora", depth=2, seeds=(0, 1))
    profiled = measure_cell_cost(config, "cuda", str(data_root.path), 2, 3)
    plain = measure_cell_cost(config, "cuda", str(data_root.path), 2, 3, profile=False)
    assert 0.0 < profiled.busy_share <= 1.0 and plain.busy_share is None
    assert plain.peak_bytes_per_run > 0 and plain.device_bytes == profiled.device_bytes


@cuda
def test_smoothness_on_a_gpu_takes_its_own_blocks_and_equals_the_cpus():
    """Wider blocks on a GPU (fewer launches), the same sum as a CPU's narrow blocks."""
    states = torch.randn(3000, 3, 64, generator=torch.Generator().manual_seed(4)).relu()
    tf32 = torch.backends.cuda.matmul.allow_tf32  # a trainer's TF32 switch may have been left on
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        on_cpu, on_gpu = smoothness(states), smoothness(states.to("cuda")).cpu()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.testing.assert_close(on_gpu, on_cpu, rtol=1e-5, atol=0.0)
