"""The shared training loop: selection rules, compaction, pack splitting, host syncs, options."""

import ctypes
import math
import sys
import warnings
from collections import Counter
from dataclasses import replace

import pytest
import torch
from trained import per_config

from orthotune.core import ConfigError, TrainConfig
from orthotune.training import TrainOptions, run_configs, train_node
from orthotune.training._loop import TrainingLoop
from orthotune.training._memory import capacity, pack_capacity
from orthotune.training._node import accuracy
from orthotune.training._options import execution

CPU = torch.device("cpu")


def _config(**values) -> TrainConfig:
    return TrainConfig(**{"dataset": "cora", "depth": 2, "dropout": 0.0, **values})


def _same(a, b) -> None:
    """The same run: epochs and accuracies exactly (1e-6); the validation loss and M_sig
    up to the float rounding of batched kernels, which differs with the slot count."""
    assert (a.status, a.best_epoch, a.epochs) == (b.status, b.best_epoch, b.epochs)
    for key in ("val_acc", "test_acc"):
        assert math.isclose(getattr(a, key), getattr(b, key), abs_tol=1e-6), key
    assert math.isclose(a.val_loss, b.val_loss, abs_tol=1e-4)
    assert math.isclose(a.m_sig, b.m_sig, rel_tol=1e-3)


@pytest.mark.slow
def test_val_loss_selection_picks_the_first_minimum_loss_epoch(cora):
    config = _config(selection="val_loss", epochs=60, patience=5, lr=0.1, weight_decay=0.0)
    seen = []
    run = train_node(config, cora, CPU, seen.append)[0].runs[0]
    losses = [report.val_loss[0][0] for report in seen]
    assert run.best_epoch == losses.index(min(losses)) + 1
    assert run.val_loss == pytest.approx(min(losses), abs=1e-7)
    best = seen[run.best_epoch - 1]
    assert (run.val_acc, run.test_acc) == (best.val_acc[0][0], best.test_acc[0][0])
    # patience counts on the selection metric: stopped 5 epochs after the loss minimum
    assert run.epochs == run.best_epoch + 5 < 60
    # without early stopping the rules part: validation accuracy peaks after the loss minimum
    seen = []
    longer = train_node(replace(config, patience=40, epochs=40), cora, CPU, seen.append)[0].runs[0]
    losses, accs = [r.val_loss[0][0] for r in seen], [r.val_acc[0][0] for r in seen]
    assert longer.best_epoch == losses.index(min(losses)) + 1 != accs.index(max(accs)) + 1


def test_val_acc_selection_records_the_validation_loss_of_its_epoch(cora):
    seen = []
    run = train_node(_config(epochs=15, patience=50), cora, CPU, seen.append)[0].runs[0]
    accs = [report.val_acc[0][0] for report in seen]
    assert run.best_epoch == accs.index(max(accs)) + 1
    assert run.val_loss == seen[run.best_epoch - 1].val_loss[0][0]


@pytest.mark.slow
def test_a_pack_with_mixed_selection_rules_equals_each_alone(cora):
    by_loss = _config(selection="val_loss", epochs=25, patience=4, lr=0.05, seeds=(0,))
    by_acc = _config(epochs=25, patience=4, lr=0.05, seeds=(1,))
    packed = train_node([by_loss, by_acc], cora, CPU)
    for config, result in per_config((by_loss, by_acc), packed):
        _same(result.runs[0], train_node(config, cora, CPU)[0].runs[0])


@pytest.mark.slow
def test_compaction_does_not_change_results(cora, monkeypatch):
    configs = [_config(lr=0.05, patience=3, epochs=30, seeds=(s,)) for s in (0, 1, 2)]
    configs.append(_config(lr=0.05, patience=30, epochs=30, seeds=(3,)))
    dropped = []
    run = TrainingLoop.run

    def counting_drops(self, on_epoch=None):  # every pack's compaction, counted
        for pack in self.packs:
            pack.drop = lambda keep, drop=pack.drop: (dropped.append(len(keep)), drop(keep))[1]
        return run(self, on_epoch)

    monkeypatch.setattr(TrainingLoop, "run", counting_drops)
    never = train_node(configs, cora, CPU, options=TrainOptions(compact_below=0.0, sync_every=1))
    assert dropped == []
    compacted = train_node(configs, cora, CPU, options=TrainOptions(sync_every=1))
    assert dropped[-1] == 1  # three of four stopped early: the pack went on with one slot
    for _, a, b in per_config(configs, never, compacted):
        _same(a.runs[0], b.runs[0])
    assert max(r.runs[0].epochs for r in never[:3]) < 30 == never[3].runs[0].epochs


@pytest.mark.slow
def test_a_split_pack_trains_each_part_as_its_own_pack(cora):
    configs = [_config(lr=0.01, patience=p, epochs=12, seeds=(s,)) for s, p in ((0, 2), (1, 20), (2, 20), (3, 3))]
    split = train_node(configs, cora, CPU, options=TrainOptions(max_pack=2, sync_every=5))
    parts = train_node(configs[:2], cora, CPU) + train_node(configs[2:], cora, CPU)
    for _, a, b in per_config(configs, split, parts):
        _same(a.runs[0], b.runs[0])


@pytest.mark.slow
def test_sync_cadence_does_not_change_results(cora):
    configs = [_config(lr=0.05, patience=p, epochs=20, seeds=(s,)) for s, p in ((0, 2), (1, 20))]
    every = train_node(configs, cora, CPU, options=TrainOptions(sync_every=1))
    rarely = train_node(configs, cora, CPU, options=TrainOptions(sync_every=15))
    for _, a, b in per_config(configs, every, rarely):
        _same(a.runs[0], b.runs[0])


#: Tensor methods that read a value on the host (a device sync on a GPU).
HOST_READS = ("__bool__", "item", "tolist", "__float__", "__int__", "__index__")


def _count_host_reads(monkeypatch, fn) -> Counter:
    """Host reads made by ``fn`` outside ``torch.optim`` (whose CPU step counters are host
    tensors on a GPU too)."""
    counts: Counter = Counter()
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)

        def read(self, *args, _name=name, _original=original, **kwargs):
            if "torch/optim" not in sys._getframe(1).f_code.co_filename.replace("\\", "/"):
                counts[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, read)
    try:
        fn()
    finally:
        monkeypatch.undo()
    return counts


@pytest.mark.slow
def test_host_reads_do_not_grow_with_epochs_between_sync_points(cora, monkeypatch):
    """The epoch loop keeps selection, patience and failure on the device: training 8 or
    24 epochs with one sync point at the end reads the same number of host values."""
    def train(epochs):
        configs = [TrainConfig(dataset="cora", depth=4, epochs=epochs, patience=100, seeds=(s,)) for s in (0, 1)]
        return lambda: train_node(configs, cora, CPU, options=TrainOptions(sync_every=1000))

    short = _count_host_reads(monkeypatch, train(8))
    long = _count_host_reads(monkeypatch, train(24))
    # at least one read counted (the results at the end): the counter sees the reads it counts
    assert short == long and 0 < sum(short.values()) < 20


@pytest.mark.skipif(not torch.cuda.is_available(), reason="sync debug mode needs CUDA")
def test_cuda_syncs_do_not_grow_with_epochs_between_sync_points(cora):
    device = torch.device("cuda")
    data = cora.to(device)

    def syncs(epochs: int) -> int:
        config = TrainConfig(dataset="cora", depth=4, epochs=epochs, patience=100, seeds=(0, 1))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                train_node(config, data, device, options=TrainOptions(sync_every=1000))
            finally:
                torch.cuda.set_sync_debug_mode(0)
        return sum("synchroniz" in str(w.message) for w in caught)

    syncs(2)  # the first call's one-time work (the allocator's first blocks) stays out of the count
    # more than none: the results read at the end sync, so the warnings counted are the syncs
    assert syncs(8) == syncs(24) > 0


@pytest.mark.slow
def test_node_and_graph_tasks_share_the_loop(cora, monkeypatch):
    used = []
    run = TrainingLoop.run
    monkeypatch.setattr(TrainingLoop, "run", lambda self, on_epoch=None: (used.append(type(self.packs[0]).__name__),
                                                                           run(self, on_epoch))[1])
    train_node(_config(epochs=2), cora, CPU)
    graph = TrainConfig(dataset="proteins", epochs=1, hidden=16, batch_size=256)
    run_configs([graph], CPU)
    assert used == ["_NodePack", "_GraphPack"]


@pytest.mark.slow
def test_weight_decay_io_is_its_own_parameter_group(cora):
    plain = train_node(_config(epochs=10, weight_decay=5e-4), cora, CPU)[0].runs[0]
    same = train_node(_config(epochs=10, weight_decay=5e-4, weight_decay_io=5e-4), cora, CPU)[0].runs[0]
    heavy = train_node(_config(epochs=10, weight_decay=5e-4, weight_decay_io=1.0), cora, CPU)[0].runs[0]
    assert (plain.m_sig, plain.val_acc) == (same.m_sig, same.val_acc)
    assert not math.isclose(plain.m_sig, heavy.m_sig, rel_tol=1e-3)
    # per-run io decay inside a pack equals each run alone
    configs = [_config(epochs=10, weight_decay=5e-4, weight_decay_io=d, seeds=(s,)) for s, d in ((0, 1.0), (1, 0.0))]
    for config, result in per_config(configs, train_node(configs, cora, CPU)):
        _same(result.runs[0], train_node(config, cora, CPU)[0].runs[0])


@pytest.mark.slow
def test_weight_decay_output_is_the_output_layers_own_group(cora):
    """Kipf & Welling decay the first layer only: ``weight_decay_output`` sets the output
    layer's decay apart from the input layer's (unset: ``weight_decay_io``'s)."""
    base = dict(epochs=10, layout="standard", depth=3, weight_decay=5e-4, weight_decay_io=5e-4)
    plain = train_node(_config(**base), cora, CPU)[0].runs[0]
    same = train_node(_config(**base, weight_decay_output=5e-4), cora, CPU)[0].runs[0]
    heavy = train_node(_config(**base, weight_decay_output=1.0), cora, CPU)[0].runs[0]
    assert (plain.m_sig, plain.val_acc, plain.val_loss) == (same.m_sig, same.val_acc, same.val_loss)
    assert not math.isclose(plain.val_loss, heavy.val_loss, rel_tol=1e-3)
    configs = [_config(**{**base, "seeds": (s,)}, weight_decay_output=d) for s, d in ((0, 1.0), (1, 0.0))]
    for config, result in per_config(configs, train_node(configs, cora, CPU)):
        _same(result.runs[0], train_node(config, cora, CPU)[0].runs[0])


def test_training_leaves_the_process_allocator_alone(cora, monkeypatch):
    loaded = []
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: loaded.append(a))
    train_node(_config(epochs=2), cora, CPU)
    assert loaded == []


def test_on_device_accuracy_equals_ogb_evaluator():
    from ogb.nodeproppred import Evaluator

    generator = torch.Generator().manual_seed(0)
    y = torch.randint(0, 40, (200,), generator=generator)
    predicted = torch.randint(0, 40, (200, 3), generator=generator)
    mask = torch.rand(200, 3, generator=generator) < 0.3
    ours = accuracy((predicted == y.unsqueeze(1)).float(), mask)
    for p in range(3):
        theirs = Evaluator("ogbn-arxiv").eval({"y_true": y[mask[:, p]].view(-1, 1),
                                               "y_pred": predicted[mask[:, p], p].view(-1, 1)})["acc"]
        assert float(ours[p]) == pytest.approx(theirs, abs=1e-7)


def test_pack_capacity_follows_memory_and_the_cap():
    gib = 1024**3
    assert capacity(per_run_bytes=0.5 * gib, free_bytes=10 * gib, fraction=0.8, cap=None, runs=600) == 16
    assert capacity(0.5 * gib, 10 * gib, 0.8, cap=4, runs=600) == 4
    assert capacity(0.5 * gib, 10 * gib, 0.8, cap=None, runs=3) == 3
    assert capacity(100 * gib, 10 * gib, 0.8, cap=None, runs=3) == 1  # one run always tries


def test_cpu_packs_keep_their_states_small(cora):
    configs = [_config(epochs=1, seeds=(s,)) for s in range(64)]
    runs = [run for c in configs for run in c.runs()]
    state = cora.num_nodes * 64 * 4  # one hidden state of one run: 0.66 MiB
    assert pack_capacity(None, runs, CPU, TrainOptions(), state) == 24  # 16 MiB / 0.66 MiB
    assert pack_capacity(None, runs, CPU, TrainOptions(max_pack=10), state) == 10
    assert pack_capacity(None, runs[:5], CPU, TrainOptions(), state) == 5
    assert pack_capacity(None, runs, CPU, TrainOptions(cpu_state_mib=math.inf), state) == 64


def test_options_are_validated_and_switches_restored():
    with pytest.raises(ConfigError, match="max_pack=0 must be an integer >= 1"):
        TrainOptions(max_pack=0)
    with pytest.raises(ConfigError, match="compact_below=1.0 must lie in"):
        TrainOptions(compact_below=1.0)
    before = torch.are_deterministic_algorithms_enabled()
    with execution(TrainOptions(deterministic=True), CPU):
        assert torch.are_deterministic_algorithms_enabled()
    assert torch.are_deterministic_algorithms_enabled() == before


def test_deterministic_mode_reproduces_a_run_exactly(cora):
    config = TrainConfig(dataset="cora", depth=2, epochs=6)
    options = TrainOptions(deterministic=True)
    first, second = (train_node(config, cora, CPU, options=options)[0].runs[0] for _ in range(2))
    assert first == second


@pytest.mark.slow  # 3-4 s: kept out of the fast subset
def test_graph_task_selects_by_validation_loss():
    config = TrainConfig(dataset="proteins", selection="val_loss", epochs=4, patience=10, hidden=16, batch_size=256)
    seen = []
    run = run_configs([config], CPU, on_epoch=seen.append)[0].runs[0]
    losses = [report.val_loss[0][0] for report in seen]
    assert run.best_epoch == losses.index(min(losses)) + 1 and run.val_loss == min(losses)
    assert run.test_acc == seen[run.best_epoch - 1].test_acc[0][0]


@pytest.mark.slow
def test_stopped_and_failed_runs_leave_the_pack_and_the_rest_trains_on(cora):
    diverging = _config(lr=1e30, epochs=12, seeds=(0,))
    stopped = _config(epochs=12, seeds=(1,))
    healthy = _config(epochs=12, seeds=(2,))
    seen = []

    def scheduler(report):
        seen.append(report)
        return [1] if report.epoch == 3 else []

    results = train_node([diverging, stopped, healthy], cora, CPU, scheduler, TrainOptions(sync_every=1))
    failed, asha, done = (r.runs[0] for r in results)
    assert (failed.status, failed.reason) == ("failed", "non-finite Ortho-GConv weight (Newton iteration overflow) "
                                                        "at epoch 1")
    assert (asha.status, asha.reason, asha.epochs) == ("stopped", "stopped by ASHA at epoch 3", 3)
    assert seen[2].active == [False, True, True] and seen[3].active == [False, False, True]
    assert asha.best_epoch <= 3 and len(asha.grad_norms) == 2  # its selected weights were measured
    _same(done, train_node(healthy, cora, CPU)[0].runs[0])


@pytest.mark.slow
def test_reports_come_at_their_cadence_with_every_epoch_and_gradient_norms(cora):
    """One callback per ``report_every`` epochs (and the last), each holding every epoch
    since the previous one; per-layer gradient norms at the recording epochs only."""
    reports = []
    depth4 = dict(dataset="cora", depth=4, dropout=0.0, epochs=12, patience=12)
    configs = [TrainConfig(**depth4, splits=(0, 1)), TrainConfig(**depth4, T=2)]
    results = train_node(configs, cora, CPU, reports.append, TrainOptions(report_every=5, grad_norms_every=5))
    assert [r.epoch for r in reports] == [5, 10, 12]
    assert [[h.epoch for h in r.history] for r in reports] == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [11, 12]]
    every = {h.epoch: h for r in reports for h in r.history}
    for epoch, values in every.items():
        recorded = epoch % 5 == 0
        for config in (0, 1):
            for norms in values.grad_norms[config]:
                assert (len(norms) == 4) is recorded and all(n > 0 for n in norms)
    assert [len(runs) for runs in every[12].trained] == [2, 1] and all(map(all, every[12].trained))
    # the history is what the loop saw: each run's selected validation accuracy is its best epoch's
    for config, result in enumerate(results):
        for repeat, run in enumerate(result.runs):
            assert run.val_acc == pytest.approx(max(every[e].val_acc[config][repeat] for e in every))
