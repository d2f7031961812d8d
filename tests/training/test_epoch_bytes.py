"""The trainer's byte cuts change nothing but time: the steadiness metrics of a whole pack on
its own model equal those of slots on a model of their own, the pack's weights come back,
keep-best keeps exactly the improved slots, and the input path follows the device's
measured crossover."""

import dataclasses
import math

import torch

from orthotune.core import TrainConfig
from orthotune.models._sparse import SparseFeatures
from orthotune.training import TrainOptions
from orthotune.training._loop import runs_of
from orthotune.training._node import _NodeTask
from orthotune.training._node_data import SPARSE_CROSSOVER

CPU = torch.device("cpu")


def _pack(cora, count: int = 3, epochs: int = 3):
    configs = [TrainConfig(dataset="cora", depth=2, lr=0.01 * (1 + i), seeds=(i,), epochs=epochs, patience=epochs,
                           ortho=True, T=1 + i) for i in range(count)]
    task = _NodeTask(cora, CPU, TrainOptions())
    (pack,) = task.packs(runs_of(configs))
    active = torch.ones(count, dtype=torch.bool)
    for epoch in range(1, epochs + 1):
        out = pack.epoch(epoch, active)
        pack.keep_best(torch.tensor([epoch == 1, True, epoch < 3]))
    del out
    return pack


def test_a_whole_packs_finish_equals_its_slots_finished_on_their_own_model_and_restores_the_weights(cora):
    pack = _pack(cora)
    before = {k: v.clone() for k, v in pack.model.state_dict().items()}
    whole = pack.finish([0, 1, 2])  # on the pack's model, selected weights swapped in
    after = pack.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    parts = pack.finish([0, 1]) + pack.finish([2])  # on models built for those slots
    assert len(whole) == len(parts) == 3
    for mine, theirs in zip(whole, parts, strict=True):
        assert math.isclose(mine.m_sig, theirs.m_sig, rel_tol=1e-5)
        assert math.isclose(mine.smoothness, theirs.smoothness, rel_tol=1e-5)
        assert all(math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-7)
                   for a, b in zip(mine.grad_norms, theirs.grad_norms, strict=True))


def test_keep_best_in_place_copies_exactly_the_improved_slots(cora):
    pack = _pack(cora, epochs=1)
    state = pack.model.state_dict()
    key = next(iter(pack.best))
    pack.best[key].fill_(7.0)
    pack.keep_best(torch.tensor([True, False, True]))
    assert torch.equal(pack.best[key][0], state[key][0]) and torch.equal(pack.best[key][2], state[key][2])
    assert bool((pack.best[key][1] == 7.0).all())


def test_features_below_the_measured_cpu_crossover_take_the_sparse_path(cora):
    assert SPARSE_CROSSOVER["cpu"] > 0.1003  # PubMed's 10.02% non-zeros take the sparse path on a CPU
    generator = torch.Generator().manual_seed(0)
    for density, sparse in ((0.12, True), (0.4, False)):
        x = torch.rand(cora.x.shape, generator=generator)
        x = x * (torch.rand(cora.x.shape, generator=generator) < density)
        task = _NodeTask(dataclasses.replace(cora, x=x), CPU, TrainOptions())
        assert isinstance(task.x, SparseFeatures) is sparse
