"""Reference suite: each backbone's standard form on its own paper's protocol, ours next to
the published mean +- std, and the Ortho-GConv paper's semi-supervised cells in both arms.

Groups (``--only``; all by default):

- ``kipf``: GCN (Kipf & Welling, ICLR 2017), public split, 10 seeds: Cora 81.5, CiteSeer
  70.3, PubMed 79.0. Their settings (``orthotune.core.STANDARD_FORMS``): 2 graph
  convolutions, hidden 16, dropout 0.5, L2 5e-4 on the first layer only, Adam lr 0.01,
  200 epochs, early stop after 10 epochs without a lower validation loss (the test
  accuracy is read at the lowest validation loss), no biases.
- ``gcnii``: GCNII (Chen et al., ICML 2020, Table 2), 10 seeds: Cora 64 layers 85.5 +- 0.5,
  CiteSeer 32 layers 73.4 +- 0.6, PubMed 16 layers 80.2 +- 0.4 (the depths of their
  semi.sh; the Ortho-GConv paper's table says 32 for PubMed), at their semi.sh values.
- ``gunet``: Graph U-Nets (Gao & Ji, ICML 2019), 10 folds: PROTEINS 77.68, D&D 82.43, at
  their configs (Adam with amsgrad, lr 1e-3, weight decay 8e-4, 200 epochs). Their number
  is each fold's maximum test accuracy over the epochs (selection on test); ours reads test
  at the validation-best epoch. The row prints both, so the gap is what their selection adds.
- ``table3``: the Ortho-GConv paper's semi Table 3 cells, GCN, JKNet and GCNII at 2, 4 and 8
  layers, original and Ortho-GConv, at the authors' semi-supervised scripts' values (the
  ``official-semi`` preset; its GCN script's values for every GCN depth, and so on). The
  paper's "L layers" are the authors' ``--layer L``: depth L + 2 graph convolutions for GCN
  and JKNet (their graph-convolution input and output layers), L for GCNII. Published
  values known here: Cora at 2 layers (GCN 81.52 / 83.65, JKNet 81.87 / 82.32, GCNII 82.20 /
  83.63, original / Ortho-GConv).

- ``mlp``: the structure-agnostic reference on WebKB (an MLP on the node features, never an
  edge): H2GCN's MLP (Zhu et al., NeurIPS 2020, Table 5): Cornell 81.08, Texas 81.89,
  Wisconsin 85.29, over Geom-GCN's ten splits (48/32/20 per class, the files the catalogue's
  full setting reads). Ours: the same ten splits (0-9), at the full setting's defaults (one
  config, not a search: H2GCN tuned theirs).
- ``gcnii-full``: GCNII and GCNII* (Chen et al., ICML 2020) full-supervised on WebKB at their
  full.sh values (``STANDARD_FORMS[("full", "gcnii")]``: Cornell 16 layers, Texas 32,
  Wisconsin 16; lr 0.01, hidden 64, dropout 0.5, one weight decay, patience 100 on the
  validation loss), splits 0-9 as theirs. Published (the authors' README, the best of the two
  forms, GCNII*'s): Cornell 76.49, Texas 77.84, Wisconsin 81.57; GCNII's own column of their
  Table 5 (74.86, 69.46, 74.12) is quoted from the paper as recalled, unverified here.
- ``errica``: Errica et al.'s structure-agnostic baseline (ICLR 2020, Table 3, chemical
  datasets with node features): node features summed per graph, then an MLP (``sum-mlp``):
  D&D 78.4 +- 4.5, PROTEINS 75.8 +- 3.7. Their protocol: 10 outer folds, a 10% validation
  holdout, a grid (hidden 32/128/256, lr 1e-6/1e-3/1e-1, L2 1e-4/1e-3/1e-2, batch 32/128) searched
  per fold, 5000 epochs with patience 500, three final runs per fold; their PROTEINS is
  PROTEINS_full (29 node features), ours TUDataset's PROTEINS (3). Ours: our ten folds, one
  point of their grid (hidden 128, lr 1e-3, L2 1e-3, batch 32, no dropout), 200 epochs
  (reduce further with ``--max-epochs``/``--folds`` on a CPU, said in the row's budget).
- ``methods``: the other methods of the Ortho-GConv paper's semi-supervised table that the
  catalogue has, each at its standard form (``orthotune.core.STANDARD_FORMS``) on the public
  split, 10 seeds, against the mean +- std published for the public split: SGC K = 2 (Wu et al.,
  ICML 2019, Table 2) 81.0 +- 0.0; APPNP 83.8 +- 0.3 and GAT 83.0 +- 0.7 as Liu et al. (KDD 2020,
  Table 2) report them (APPNP's own paper uses other splits; GAT's paper reports 83.0 +- 0.7);
  DAGNN K = 10 (Liu et al.) 84.4 +- 0.5; IncepGCN with DropEdge at 64 layers (Rong et al., ICLR
  2020, their README's semi-supervised table) 83.5, no std published. Cora only: the standard
  forms hold Cora's values.
- ``dropedge``: GCN with and without DropEdge (Rong et al., ICLR 2020, the authors' README
  table) in their full-supervised protocol on Cora (the ``dropedge-full`` setting: FastGCN's
  split, 1208 train, 500 validation, 1000 test, and their first-order adjacency), 10 seeds, at
  the authors' GCN script values (``STANDARD_FORMS[("dropedge-full", "gcn")]``, DropEdge 30%): GCN-2 86.10 / 86.50,
  GCN-4 85.50 / 87.60 (original / DropEdge; the scripts' values are their GCN-4's); and their
  semi-supervised GCN-2 on the public split at its own script's values (``RONG_GCN_SEMI``,
  DropEdge keeping 40%): 81.10 / 82.80; and on CiteSeer at that dataset's script values
  (``RONG_GCN_SEMI_CITESEER``, DropEdge keeping 20%): 70.80 / 72.30; and on PubMed at that
  dataset's script values (``RONG_GCN_SEMI_PUBMED``: a self-loop weight on both convolutions,
  ``D^-1 (A + I)``, the ``semi-rw`` setting; DropEdge keeping 70%): 79.00 / 79.60. The paper
  publishes one run per cell (seed 42), no std: the rows say so.
- ``dropedge-jknet``: JKNet with and without DropEdge (the authors' README table, full-supervised
  Cora, their ``cora_JKNet.sh``: the dense block of 14 hidden convolutions, depth 16 in the
  ``official`` layout, ``STANDARD_FORMS[("dropedge-full-aug", "jknet")]``, DropEdge keeping 20%):
  86.20 / 88.00, 10 seeds, in the ``dropedge-full-aug`` setting.
- ``incepgcn``: IncepGCN with and without DropEdge (Rong et al., ICLR 2020, the authors' README
  table) in their full-supervised protocol on Cora with the augmented adjacency their IncepGCN
  script passes (the ``dropedge-full-aug`` setting), 8 layers, 10 seeds, at that script's values
  (``STANDARD_FORMS[("dropedge-full-aug", "incepgcn")]``, DropEdge keeping 5%): 86.70 / 88.20.
- ``dropedge-jknet-semi``: JKNet with and without DropEdge on the public split (their
  semi-supervised ``cora_JKNet.sh``: the dense block of 2 hidden convolutions, depth 4, lr 0.001,
  ``STANDARD_FORMS[("semi-rw", "jknet")]``, DropEdge keeping 40%), in the ``semi-rw`` setting (their
  ``AugRWalk`` operator ``D^-1 (A + I)``): 80.20 / 83.30, 10 seeds.
- ``incepgcn-semi``: IncepGCN with and without DropEdge on the public split (the authors' README
  semi-supervised table, 4 layers, the depth of their CiteSeer and PubMed scripts: two branches),
  10 seeds, at each dataset's script values (``STANDARD_FORMS[("semi", "incepgcn")]``): CiteSeer
  69.30 / 72.70 (DropEdge keeping 5%), PubMed 77.70 / 79.50 (keeping 80%).

Every row prints the one ``orthotune train`` command that trains it, its repeats, mean
epochs and wall seconds. ``--seeds N``, ``--folds N`` and ``--max-epochs N`` reduce the
protocol where the machine cannot afford it; a reduced row says so in its ``budget`` column.
Nothing is selected on test: the test accuracy is read at each repeat's selected epoch.

    .venv/bin/python bench/reference.py --data-root ../shared/data --only kipf
    .venv/bin/python bench/reference.py --data-root ../shared/data --only gcnii --seeds 3
    .venv/bin/python bench/reference.py --data-root ../shared/data --only table3 --datasets cora
"""

from __future__ import annotations

import argparse
import math
import shlex
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from orthotune.core import (
    RONG_DROP_EDGE,
    RONG_DROP_EDGE_INCEPGCN_FULL,
    RONG_DROP_EDGE_JKNET_FULL,
    RONG_DROP_EDGE_JKNET_SEMI,
    RONG_DROP_EDGE_SEMI,
    RONG_DROP_EDGE_SEMI_CITESEER,
    RONG_DROP_EDGE_SEMI_PUBMED,
    RONG_GCN_SEMI,
    RONG_GCN_SEMI_CITESEER,
    RONG_GCN_SEMI_PUBMED,
    Group,
    OrthoSettings,
    TrainConfig,
    by_group,
    standard_form,
)
from orthotune.spaces import resolve_space
from orthotune.training import choose_device, retain_freed_memory, run_configs

SEMI = ("cora", "citeseer", "pubmed")
#: Graph U-Nets' configs (their configs/PROTEINS and configs/DD): orthotune's cv10 defaults.
GUNET = {"proteins": 77.68, "dd": 82.43}
KIPF = {"cora": 81.5, "citeseer": 70.3, "pubmed": 79.0}
#: Chen et al.'s Table 2 (GCNII) at the depths of their semi.sh.
GCNII = {"cora": (64, 85.5, 0.5), "citeseer": (32, 73.4, 0.6), "pubmed": (16, 80.2, 0.4)}
#: The Ortho-GConv paper's Table 3 values this suite knows: (dataset, backbone, layers) ->
#: (original, Ortho-GConv).
TABLE3 = {("cora", "gcn", 2): (81.52, 83.65), ("cora", "jknet", 2): (81.87, 82.32),
          ("cora", "gcnii", 2): (82.20, 83.63)}
#: H2GCN's MLP (Zhu et al., NeurIPS 2020, Table 5), Geom-GCN's ten splits.
H2GCN_MLP = {"cornell": 81.08, "texas": 81.89, "wisconsin": 85.29}
WEBKB = tuple(H2GCN_MLP)
#: GCNII full-supervised (Chen et al., ICML 2020): (layers, GCNII, GCNII*); GCNII* from the
#: authors' README, GCNII's column of Table 5 as recalled (unverified here).
GCNII_FULL = {"cornell": (16, 74.86, 76.49), "texas": (32, 69.46, 77.84), "wisconsin": (16, 74.12, 81.57)}
#: Errica et al. (ICLR 2020), Table 3, the structure-agnostic baseline: (mean, std).
ERRICA = {"proteins": (75.8, 3.7), "dd": (78.4, 4.5)}
#: One point of their grid (config_BaselineChemical.yml): hidden, lr, L2, batch; no dropout.
ERRICA_POINT = dict(hidden=128, lr=1e-3, weight_decay=1e-3, batch_size=32, dropout=0.0, epochs=200, patience=200)
#: (dataset, backbone) -> (depth, published mean, std or None: none published, setting) on the public split.
METHODS = {("cora", "sgc"): (2, 81.0, 0.0, "semi"), ("cora", "appnp"): (2, 83.8, 0.3, "semi"),
           ("cora", "gat"): (2, 83.0, 0.7, "semi"), ("cora", "dagnn"): (10, 84.4, 0.5, "semi"),
           ("cora", "incepgcn"): (64, 83.5, None, "semi-rw")}  # their script's D^-1 (A + I)
#: Rong et al.'s full-supervised Cora GCN (the authors' README): depth -> (original, DropEdge).
DROPEDGE = {2: (86.10, 86.50), 4: (85.50, 87.60)}
#: Their README's semi-supervised GCN-2 (original, DropEdge), the depth their semi scripts train,
#: with each dataset's script values: dataset -> (setting, values, DropEdge arm, original, DropEdge).
DROPEDGE_SEMI = {"cora": ("semi", RONG_GCN_SEMI, RONG_DROP_EDGE_SEMI, 81.10, 82.80),
                 "citeseer": ("semi", RONG_GCN_SEMI_CITESEER, RONG_DROP_EDGE_SEMI_CITESEER, 70.80, 72.30),
                 "pubmed": ("semi-rw", RONG_GCN_SEMI_PUBMED, RONG_DROP_EDGE_SEMI_PUBMED, 79.00, 79.60)}
#: Their README's Cora rows at their scripts' depths and operators: group -> (setting, backbone,
#: depth, original, DropEdge, the DropEdge arm's treatment).
DROPEDGE_FORMS = {"incepgcn": ("dropedge-full-aug", "incepgcn", 8, 86.70, 88.20, RONG_DROP_EDGE_INCEPGCN_FULL),
                  "dropedge-jknet": ("dropedge-full-aug", "jknet", 16, 86.20, 88.00, RONG_DROP_EDGE_JKNET_FULL),
                  "dropedge-jknet-semi": ("semi-rw", "jknet", 4, 80.20, 83.30, RONG_DROP_EDGE_JKNET_SEMI)}
BACKBONE_LABELS = {"incepgcn": "IncepGCN", "jknet": "JKNet"}
#: Their README's semi-supervised IncepGCN at the depth of each dataset's script (4: two branches):
#: dataset -> (original, DropEdge); the values are ``STANDARD_FORMS[("semi", "incepgcn")]``'s.
INCEPGCN_SEMI = {"citeseer": (69.30, 72.70), "pubmed": (77.70, 79.50)}
GROUPS = ["kipf", "gcnii", "gunet", "table3", "mlp", "gcnii-full", "errica", "methods", "dropedge", "incepgcn",
          "dropedge-jknet", "dropedge-jknet-semi", "incepgcn-semi"]
LAYERS = (2, 4, 8)
FLAGS = {"splits": "split", "seeds": "seed"}
#: What the original arm does not read (left out of its command).
ORTHO_ONLY = {f.name for f in by_group(OrthoSettings, Group.ORTHO, Group.VARIANT)}


@dataclass
class Row:
    """One reference cell: the config values of one ``orthotune train`` command."""

    group: str
    label: str
    values: dict[str, Any]
    published: float | None
    published_std: float | None = None
    budget: list[str] = field(default_factory=list)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root")
    parser.add_argument("--only", nargs="+", choices=GROUPS, default=GROUPS)
    parser.add_argument("--datasets", nargs="+", help="only these datasets")
    parser.add_argument("--seeds", type=int, help="the first N seeds of the protocol's 10")
    parser.add_argument("--folds", type=int, help="the first N folds of 10 (gunet)")
    parser.add_argument("--max-epochs", type=int, help="cap every row's epochs")
    parser.add_argument("--layers", type=int, nargs="+", default=list(LAYERS), help="table3: the paper's layers")
    parser.add_argument("--backbones", nargs="+", help="table3, methods: only these backbones")
    parser.add_argument("--arms", nargs="+", choices=["original", "ortho"], default=["original", "ortho"],
                        help="table3: which arms")
    parser.add_argument("--device")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()
    device = choose_device(args.device)
    print(f"reference suite: device {device}, {torch.get_num_threads()} thread(s); test accuracy (%) at each "
          f"repeat's selected epoch, mean +- std (ddof 1) over the repeats")
    print("| # | group | cell | published | ours | ours - published | repeats | budget | mean epochs | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    commands = []
    for number, row in enumerate(rows(args), start=1):
        reduce(row, args)
        commands.append(f"{number}. `{command(row.values)}`")
        print(run_row(number, row, device, args.data_root), flush=True)
    print("\nCommands (each row is one `orthotune train`):")
    print("\n".join(commands))


def rows(args: argparse.Namespace) -> Iterator[Row]:
    wanted = set(args.datasets or [*SEMI, *GUNET, *WEBKB])
    if "kipf" in args.only:
        for dataset in (d for d in SEMI if d in wanted):
            values = {"dataset": dataset, "setting": "semi", "backbone": "gcn", "depth": 2, "ortho": False,
                      **standard_form("semi", "gcn", dataset), "seeds": list(range(10))}
            yield Row("kipf", f"{dataset} GCN-2 (Kipf & Welling)", values, KIPF[dataset])
    if "gcnii" in args.only:
        for dataset in (d for d in SEMI if d in wanted):
            depth, mean, std = GCNII[dataset]
            values = {"dataset": dataset, "setting": "semi", "backbone": "gcnii", "depth": depth, "ortho": False,
                      **standard_form("semi", "gcnii", dataset), "seeds": list(range(10))}
            yield Row("gcnii", f"{dataset} GCNII-{depth} (Chen et al.)", values, mean, std)
    if "gunet" in args.only:
        for dataset in (d for d in GUNET if d in wanted):
            values = {"dataset": dataset, "backbone": "gunet", "ortho": False, "splits": list(range(10))}
            yield Row("gunet", f"{dataset} Graph U-Nets (Gao & Ji)", values, GUNET[dataset])
    if "table3" in args.only:
        yield from table3_rows(args, wanted)
    if "methods" in args.only:
        for (dataset, backbone), (depth, mean, std, setting) in METHODS.items():
            if dataset in wanted and (not args.backbones or backbone in args.backbones):
                values = {"dataset": dataset, "setting": setting, "backbone": backbone, "depth": depth, "ortho": False,
                          **standard_form(setting, backbone, dataset), "seeds": list(range(10))}
                yield Row("methods", f"{dataset} {backbone.upper()} depth {depth}", values, mean, std)
    if "dropedge" in args.only:
        yield from dropedge_rows(wanted)
    for group, (setting, backbone, depth, plain, dropped, treatment) in DROPEDGE_FORMS.items():
        if group not in args.only or "cora" not in wanted:
            continue
        task = "semi" if setting.startswith("semi") else "full"
        for arm, arm_values, number in (("original", {}, plain), ("DropEdge", treatment, dropped)):
            values = {"dataset": "cora", "setting": setting, "backbone": backbone, "depth": depth,
                      "ortho": False, **standard_form(setting, backbone, "cora"), **arm_values,
                      "seeds": list(range(10))}
            label = (f"cora {BACKBONE_LABELS[backbone]}-{depth} {arm} (Rong et al., {task}-supervised; one run "
                     f"published, no std)")
            yield Row(group, label, values, number)
    if "incepgcn-semi" in args.only:
        yield from incepgcn_semi_rows(wanted)
    yield from structure_rows(args, wanted)


def incepgcn_semi_rows(wanted: set[str]) -> Iterator[Row]:
    """IncepGCN-4 on the public split, each arm at its dataset's script values (module doc)."""
    for dataset, published in INCEPGCN_SEMI.items():
        if dataset not in wanted:
            continue
        form = standard_form("semi", "incepgcn", dataset)
        for arm, rate, number in (("original", 0.0, published[0]), ("DropEdge", form["drop_edge"], published[1])):
            values = {"dataset": dataset, "setting": "semi", "backbone": "incepgcn", "depth": 4, "ortho": False,
                      **form, "drop_edge": rate, "seeds": list(range(10))}
            label = f"{dataset} IncepGCN-4 {arm} (Rong et al., semi-supervised; one run published, no std)"
            yield Row("incepgcn-semi", label, values, number)


def dropedge_rows(wanted: set[str]) -> Iterator[Row]:
    """DropEdge's GCN rows, each arm at its script's values (module doc)."""
    for depth, published in DROPEDGE.items() if "cora" in wanted else ():
        for arm, treatment, number in (("original", {}, published[0]), ("DropEdge", RONG_DROP_EDGE, published[1])):
            values = {"dataset": "cora", "setting": "dropedge-full", "backbone": "gcn", "depth": depth,
                      "ortho": False, **standard_form("dropedge-full", "gcn", "cora"), **treatment,
                      "seeds": list(range(10))}
            label = f"cora GCN-{depth} {arm} (Rong et al., full-supervised; one run published, no std)"
            yield Row("dropedge", label, values, number)
    for dataset, (setting, form, dropped, plain_number, dropped_number) in DROPEDGE_SEMI.items():
        if dataset not in wanted:
            continue
        for arm, treatment, number in (("original", {}, plain_number), ("DropEdge", dropped, dropped_number)):
            values = {"dataset": dataset, "setting": setting, "backbone": "gcn", "depth": 2, "ortho": False,
                      **form, **treatment, "seeds": list(range(10))}
            label = f"{dataset} GCN-2 {arm} (Rong et al., semi-supervised; one run published, no std)"
            yield Row("dropedge", label, values, number)


def structure_rows(args: argparse.Namespace, wanted: set[str]) -> Iterator[Row]:
    """The structure-agnostic references and GCNII full-supervised on WebKB (module doc)."""
    ten = list(range(10))
    if "mlp" in args.only:
        for dataset in (d for d in WEBKB if d in wanted):
            values = {"dataset": dataset, "setting": "full", "backbone": "mlp", "depth": 2, "ortho": False,
                      "splits": ten}
            yield Row("mlp", f"{dataset} MLP (H2GCN's baseline)", values, H2GCN_MLP[dataset])
    if "gcnii-full" in args.only:
        for dataset in (d for d in WEBKB if d in wanted):
            depth, plain, star = GCNII_FULL[dataset]
            for variant, published in ((False, plain), (True, star)):
                values = {"dataset": dataset, "setting": "full", "backbone": "gcnii", "depth": depth, "ortho": False,
                          **standard_form("full", "gcnii", dataset), "gcnii_variant": variant, "splits": ten}
                name = "GCNII*" if variant else "GCNII"
                yield Row("gcnii-full", f"{dataset} {name}-{depth} (Chen et al., full.sh)", values, published)
    if "errica" in args.only:
        for dataset in (d for d in ERRICA if d in wanted):
            mean, std = ERRICA[dataset]
            values = {"dataset": dataset, "backbone": "sum-mlp", "depth": 2, "ortho": False, **ERRICA_POINT,
                      "splits": ten}
            yield Row("errica", f"{dataset} sum-of-features MLP (Errica et al.)", values, mean, std)


def table3_rows(args: argparse.Namespace, wanted: set[str]) -> Iterator[Row]:
    """The authors' semi scripts (the official-semi preset) at each of the paper's depths."""
    scripts = {}
    for cell in resolve_space("official-semi").cells():
        point = cell.grid()[0]
        scripts[(point["dataset"], point["backbone"], point["ortho"])] = point
    for (dataset, backbone, ortho), point in scripts.items():
        if dataset not in wanted or (args.backbones and backbone not in args.backbones):
            continue
        arms = [("original", False), ("ortho", True)] if ortho else [("original", False)]
        for layers in args.layers:
            for arm, arm_ortho in arms:
                if arm not in args.arms:
                    continue
                depth = layers if backbone == "gcnii" else layers + 2
                values = {k: v for k, v in point.items() if arm_ortho or k not in ORTHO_ONLY}
                values.update(depth=depth, ortho=arm_ortho)
                published = TABLE3.get((dataset, backbone, layers))
                label = f"{dataset} {backbone} {layers} layers (depth {depth}), {arm}"
                yield Row("table3", label, values, None if published is None else published[int(arm_ortho)])


def reduce(row: Row, args: argparse.Namespace) -> None:
    """Apply --seeds/--folds/--max-epochs, noting each reduction in the row's budget."""
    values = row.values
    for key, count in (("seeds", args.seeds), ("splits", args.folds)):
        if count is not None and key in values and len(values[key]) > count:
            values[key] = values[key][:count]
            row.budget.append(f"{count} {key}")
    config = TrainConfig.from_dict(values)
    if args.max_epochs is not None and config.epochs > args.max_epochs:
        values["epochs"] = args.max_epochs
        row.budget.append(f"{args.max_epochs} of {config.epochs} epochs")


def run_row(number: int, row: Row, device: torch.device, data_root: str | None) -> str:
    config = TrainConfig.from_dict(row.values)
    best_test: dict[int, float] = {}

    def on_epoch(report):  # the maximum test accuracy over the epochs: Gao & Ji's number
        for values in report.history:
            for run, (test, trained) in enumerate(zip(values.test_acc[0], values.trained[0])):
                if trained and math.isfinite(test):
                    best_test[run] = max(best_test.get(run, 0.0), test)

    start = time.perf_counter()
    (result,) = run_configs([config], device, data_root, on_epoch=on_epoch if row.group == "gunet" else None)
    wall = time.perf_counter() - start
    budget = ", ".join(row.budget) or "full protocol"
    if result.status == "failed":
        return f"| {number} | {row.group} | {row.label} | | failed: {result.reason} | | | {budget} | | {wall:.0f} |"
    tests = [100 * r.test_acc for r in result.runs]
    ours = f"{statistics.fmean(tests):.2f} +- {_std(tests)}"
    if row.group == "gunet" and best_test:
        maxima = [100 * v for v in best_test.values()]
        ours += f" (max over epochs, their selection: {statistics.fmean(maxima):.2f} +- {_std(maxima)})"
    published = "—" if row.published is None else f"{row.published:.2f}" + (
        f" +- {row.published_std:.1f}" if row.published_std is not None else "")
    gap = "—" if row.published is None else f"{statistics.fmean(tests) - row.published:+.2f}"
    epochs = statistics.fmean(r.epochs for r in result.runs)
    return (f"| {number} | {row.group} | {row.label} | {published} | {ours} | {gap} | {len(tests)} | {budget} "
            f"| {epochs:.0f} | {wall:.0f} |")


def _std(values: list[float]) -> str:
    return f"{statistics.stdev(values):.2f}" if len(values) > 1 else "—"


def command(values: dict[str, Any]) -> str:
    """The ``orthotune train`` command line that trains ``values`` (config fields)."""
    parts = ["orthotune", "train"]
    for key, value in values.items():
        if value is None:
            continue
        flag = "--" + FLAGS.get(key, key).replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (list, tuple)):
            parts += [flag, *map(str, value)]
        else:
            parts += [flag, str(value)]
    return shlex.join(parts)


if __name__ == "__main__":
    main()
