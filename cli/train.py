"""Train one config on its repeats and print validation/test accuracy and steadiness."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from orthotune.cli._common import OK, RUN_FAILED, add_data_arguments
from orthotune.core import (
    BACKBONE_INFO,
    DATASETS,
    OBJECTIVE,
    PROFILES,
    SETTINGS,
    ConfigError,
    Group,
    TrainConfig,
    all_backbones,
    check_memory,
    declared,
    treatment_function,
)

if TYPE_CHECKING:
    from orthotune.core import ConfigResult, EpochReport

#: Flags named otherwise than their field: the repeats are given as lists of one kind.
FLAG_NAMES = {"splits": "split", "seeds": "seed"}
#: The help's sections, one per field group, in this order.
SECTIONS = {
    Group.CELL: "experiment cell",
    Group.ORTHO: "Ortho-GConv values (ignored with --no-ortho)",
    Group.VARIANT: "variant switches",
    Group.TRAIN: "training",
    Group.REPEATS: "repeats (run i uses split i and seed i; one value is broadcast)",
}
TYPES = {"int": int, "float": float, "str": str, "ints": int}


def catalogue_names() -> dict[str, list[str]]:
    """Valid names of the string fields whose rule is the catalogue, not a fixed choice."""
    return {"dataset": DATASETS.names(), "setting": SETTINGS.names(), "backbone": all_backbones()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="a YAML or JSON config (TrainConfig keys, e.g. from `orthotune best --yaml`); "
                             "exclusive with the config options")
    parser.add_argument("--profile", choices=list(PROFILES), metavar="{" + ",".join(PROFILES) + "}",
                        help="a named bundle of variant switches; explicit options win (default: none, "
                             "orthotune's own defaults)")
    add_config_options(parser)
    run_group = parser.add_argument_group("run")
    add_data_arguments(run_group)
    run_group.add_argument("--device", help="cpu or cuda[:N] (default: cuda when present, else cpu)")
    run_group.add_argument("--json", action="store_true", help="print one JSON object")
    add_switch_flags(parser.add_argument_group("GPU execution"))


def add_switch_flags(group: Any) -> None:
    """``--NAME/--no-NAME`` per GPU switch of ``TrainOptions`` (its doc and default from there);
    None when neither is given, so TrainOptions applies its own default."""
    from orthotune.training import EXECUTION_SWITCHES

    for name, switch in EXECUTION_SWITCHES.items():
        group.add_argument(f"--{name.replace('_', '-')}", action=argparse.BooleanOptionalAction, default=None,
                           help=f"{switch.metadata['switch']} (default: {'on' if switch.default else 'off'})"
                           .replace("%", "%%"))


def switches_given(args: argparse.Namespace) -> dict[str, bool]:
    """The GPU switches given on the command line, by ``TrainOptions`` field."""
    from orthotune.training import EXECUTION_SWITCHES

    return {name: getattr(args, name) for name in EXECUTION_SWITCHES if getattr(args, name, None) is not None}


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """One option per declared config field, its help, default and choices from the
    declaration. Every option defaults to None here, so --config can tell which were given;
    TrainConfig applies the defaults and checks the rules (one place for both)."""
    sections = {group: parser.add_argument_group(title) for group, title in SECTIONS.items()}
    for f in declared(TrainConfig):
        rule = f.metadata["rule"]
        flag = "--" + FLAG_NAMES.get(f.name, f.name).replace("_", "-")
        kwargs: dict[str, Any] = {"dest": f.name, "default": None, "help": option_help(f)}
        if rule.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = TYPES[rule.kind]
            names = rule.choices or catalogue_names().get(f.name)
            kwargs["metavar"] = "{" + ",".join(map(str, names)) + "}" if rule.choices else (
                "N" if rule.kind == "ints" else f.name.upper() if names else None)
            if rule.kind == "ints":
                kwargs["nargs"] = "+"
        sections[f.metadata["group"]].add_argument(flag, **kwargs)


def option_help(f: dataclasses.Field) -> str:
    """The field's doc, its rule in words and its default (argparse %-formats help: escaped)."""
    rule = f.metadata["rule"]
    names = catalogue_names().get(f.name)
    valid = "one of: " + ", ".join(names) if names and not rule.choices else rule.describe()
    text = f.metadata["doc"] if rule.kind == "bool" else f"{f.metadata['doc']}; {valid}"
    default = default_text(f)
    if default:
        text += f" (default: {default})"
    return text.replace("%", "%%")


def default_text(f: dataclasses.Field) -> str:
    """The default in words: the declared one, or the per-setting/per-dataset defaults table."""
    if f.default is not None and f.default is not dataclasses.MISSING:
        value = f.default
        if isinstance(value, bool):
            return "true" if value else "false"
        if value == "":  # an empty string is a field's "none" (a treatment's)
            return "none"
        return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)
    if f.name == "dataset":
        return "none: required unless --config"
    if "default:" in f.metadata["doc"]:
        return ""  # the doc states it
    records = [*map(SETTINGS.get, SETTINGS), *map(DATASETS.get, DATASETS)]
    parts = [f"{r.name} {r.defaults[f.name]}" for r in records if f.name in r.defaults]
    return "by setting and dataset: " + ", ".join(parts) if parts else "none"


def run(args: argparse.Namespace) -> int:
    from orthotune.core import cache_dir

    config = config_from_args(args)  # bad input fails before torch is imported
    check_memory(config)
    from orthotune.training import (
        DataRoot,
        TrainOptions,
        check_dataset_files,
        choose_device,
        is_prepared,
        retain_freed_memory,
        run_configs,
    )

    retain_freed_memory()  # this command owns its process, as a trial's worker does: reuse freed activations
    root = DataRoot.resolve(args.data_root, args.download)
    check_dataset_files(config.dataset, config.setting, root)  # fetched here with --download
    device = choose_device(args.device)
    if not is_prepared(config.dataset, root):
        print(f"preparing {config.dataset} for the first time: processing it into the cache {cache_dir()} "
              f"(ORTHOTUNE_CACHE; later runs read it from there)", file=sys.stderr, flush=True)
    # reports at the trainer's own host-sync cadence: the progress display changes no result
    options = TrainOptions(**switches_given(args), report_every=TrainOptions().sync_every)
    with TrainProgress(config) as progress:
        result = run_configs([config], device, str(root.path), progress, options)[0]
    summary = summarise(result)
    print(json.dumps(summary) if args.json else format_text(summary))
    return OK if result.status != "failed" else RUN_FAILED


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The config from --config FILE, or from the options (a treatment's module imported: one
    line before any work if it cannot be)."""
    config = _config_named(args)
    if config.treatment:
        treatment_function(config.treatment)
    return config


def _config_named(args: argparse.Namespace) -> TrainConfig:
    """The config from --config FILE, or from the options; mixing both is refused, so a file
    from `orthotune best` reruns exactly what it says."""
    values = {f.name: getattr(args, f.name) for f in declared(TrainConfig) if getattr(args, f.name) is not None}
    if args.profile is not None:
        values["profile"] = args.profile
    if args.config is not None:
        if values:
            flags = sorted("--" + FLAG_NAMES.get(k, k).replace("_", "-") for k in values)
            raise ConfigError(f"--config is exclusive with the config options; also given: {', '.join(flags)}")
        return TrainConfig.from_dict(load_config_file(args.config))
    if "dataset" not in values:
        raise ConfigError("--dataset is required (or --config FILE)")
    return TrainConfig.from_dict({**default_arm(values.get("backbone")), **values})


def default_arm(backbone: str | None) -> dict[str, bool]:
    """The arm ``train`` takes when no --ortho/--no-ortho is given: the original for a backbone
    whose declaration has no Ortho-GConv arm (a structure-agnostic reference), else none (the
    config's default, the Ortho-GConv arm)."""
    has_arm = backbone not in BACKBONE_INFO or BACKBONE_INFO.get(backbone).ortho_arm
    return {} if has_arm else {"ortho": False}


def load_config_file(path: str) -> dict:
    """One config mapping from a YAML or JSON file (a one-item list, or `best --yaml`'s answer
    holding one config, is accepted)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--config {path!r} cannot be read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"--config {path!r} is not UTF-8 text ({error.reason} at byte {error.start}); "
                          f"it must be a YAML or JSON config") from None
    try:
        value = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError, RecursionError) as error:  # both parsers recurse into nesting
        why = "nested too deeply" if isinstance(error, RecursionError) else str(error).splitlines()[0]
        raise ConfigError(f"--config {path!r} is not valid {'JSON' if path.endswith('.json') else 'YAML'}: "
                          f"{why}") from None
    if isinstance(value, dict) and "configs" in value:  # `best --json`/`--yaml`'s whole answer: its configs
        value = value["configs"]
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, list):
        raise ConfigError(f"--config {path!r} holds {len(value)} configs; it must hold one "
                          f"(narrow `orthotune best` with --dataset/--backbone/--depth/--ortho)")
    if not isinstance(value, dict):
        raise ConfigError(f"--config {path!r} must hold a mapping of TrainConfig keys, not {type(value).__name__}")
    return value


def summarise(result: ConfigResult) -> dict:
    runs = result.runs
    return {
        "status": result.status,
        "reason": result.reason,
        "config": result.config.to_dict(read=True),
        OBJECTIVE: result.mean(OBJECTIVE),
        "test_acc": result.mean("test_acc"),
        "test_acc_std": result.std("test_acc"),
        # each repeat's own, in the repeats' order: where one published run sits among ours
        "val_accs": [r.val_acc for r in runs],
        "test_accs": [r.test_acc for r in runs],
        "best_epoch": [r.best_epoch for r in runs] if len(runs) > 1 else runs[0].best_epoch,
        "epochs": [r.epochs for r in runs] if len(runs) > 1 else runs[0].epochs,
        "m_sig": result.mean("m_sig"),
        "smoothness": result.mean("smoothness"),
        "grad_norms": [r.grad_norms for r in runs] if len(runs) > 1 else runs[0].grad_norms,
        "seconds_per_epoch": result.seconds_per_epoch,
        "device": result.device,
    }


def format_text(summary: dict) -> str:
    if summary["status"] == "failed":
        return f"failed: {summary['reason']}"
    grads = summary["grad_norms"]
    grads = grads if grads and isinstance(grads[0], float) else grads[0] if grads else []
    return "\n".join([
        f"val_acc            {summary['val_acc']:.4f}",
        f"test_acc           {summary['test_acc']:.4f} +- {summary['test_acc_std']:.4f}",
        f"best_epoch         {summary['best_epoch']}",
        f"epochs             {summary['epochs']}",
        f"M_sig              {summary['m_sig']:.4f}",
        f"smoothness D       {summary['smoothness']:.4f}",
        "grad norms ||dL/dW(l)||_F  " + " ".join(f"{g:.3g}" for g in grads),
        f"seconds_per_epoch  {summary['seconds_per_epoch']:.4f} ({summary['device']})",
    ])


class TrainProgress:
    """Progress over the epochs and repeats of `train`, on stderr (stdout keeps the result):
    a bar on a terminal, else a line every tenth of the epochs or every ``every_s`` seconds,
    whichever comes first. The repeats train together as one packed model; a repeat that
    early stopping (patience) ended stops counting."""

    def __init__(self, config: TrainConfig, stream: Any = None, every_s: float = 15.0) -> None:
        self.config, self.stream, self.every_s = config, stream or sys.stderr, every_s
        self.bar: Any = None
        self.next_line = 0
        self.step = max(1, config.epochs // 10)
        self.last_line = time.monotonic()

    def __enter__(self) -> TrainProgress:
        if self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=self.config.epochs, unit="epoch", file=self.stream, dynamic_ncols=True,
                            desc=f"{self.config.dataset} {self.config.backbone}-{self.config.depth}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()

    def __call__(self, report: EpochReport) -> None:
        text = self.describe(report)
        if self.bar is not None:
            self.bar.update(report.epoch - self.bar.n)
            self.bar.set_postfix_str(text.split(": ", 1)[1], refresh=True)
        elif (report.epoch >= self.next_line or not report.active[0]
              or time.monotonic() - self.last_line >= self.every_s):
            print(text, file=self.stream, flush=True)
            self.next_line, self.last_line = report.epoch + self.step, time.monotonic()

    def describe(self, report: EpochReport) -> str:
        runs = report.runs[0]
        training = sum(1 for r in runs if r.epochs >= report.epoch and r.status != "failed")
        best = report.best_val[0]
        return (f"epoch {report.epoch}/{self.config.epochs}: {training} of {len(runs)} repeats training, "
                f"best val_acc {best:.4f} (mean over repeats)")
