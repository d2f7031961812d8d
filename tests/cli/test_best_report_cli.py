"""`orthotune best` and `orthotune report` end to end, and `train --config` rerunning a best config."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))  # the shared store builders
from report_stores import build_real_store, hand_row, hand_store, shrinking_rows  # noqa: E402

from orthotune.cli import main  # noqa: E402
from orthotune.reports import build_report  # noqa: E402


@pytest.fixture(scope="module")
def real_store(tmp_path_factory, data_root):
    return build_real_store(tmp_path_factory.getbasetemp() / "real-store")


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_best_prints_a_table_of_winners(real_store, capsys):
    code, out, _ = run_cli(capsys, "best", "--store", real_store.uri)
    assert code == 0
    table, verdicts = out.split("\n\n", 1)
    lines = table.splitlines()
    assert lines[0].split()[:6] == ["dataset", "setting", "backbone", "depth", "variant", "arm"]
    assert len(lines) == 1 + 4 and all("texas" in line for line in lines[1:])
    # then one verdict line per pair (depths 2 and 4) and the warnings (one trial or two per cell)
    lines = verdicts.splitlines()
    assert lines[0].startswith("verdict per pair")
    assert [line.split(":")[0] for line in lines[1:3]] == ["  texas full gcn depth 2 (default)",
                                                          "  texas full gcn depth 4 (default)"]
    assert all("95% CI" in line and "Holm p" in line for line in lines[1:3])
    assert any(line.startswith("warning: 4 of 4 cells chose their winner among fewer than 20") for line in lines)


@pytest.mark.slow
def test_best_json_reruns_exactly_with_train_config(real_store, capsys, tmp_path):
    code, out, _ = run_cli(capsys, "best", "--store", real_store.uri, "--depth", "4", "--ortho", "--json")
    assert code == 0
    configs = json.loads(out)["configs"]
    assert len(configs) == 1 and configs[0]["depth"] == 4 and configs[0]["ortho"] is True
    file = tmp_path / "best.json"
    file.write_text(out)
    code, out, _ = run_cli(capsys, "train", "--config", str(file), "--json")
    assert code == 0
    rerun = json.loads(out)
    stored = real_store.read("trials").to_pandas()
    row = stored[(stored["depth"] == 4) & stored["ortho"] & (stored["T"] == configs[0]["T"])].iloc[0]
    assert rerun["config"] == configs[0]
    assert (rerun["val_acc"], rerun["test_acc"]) == (row["val_acc"], row["test_acc"])


@pytest.mark.slow
def test_best_yaml_is_the_same_configs_as_json(real_store, capsys, tmp_path):
    _, as_json, _ = run_cli(capsys, "best", "--store", real_store.uri, "--json")
    _, as_yaml, _ = run_cli(capsys, "best", "--store", real_store.uri, "--yaml")
    assert yaml.safe_load(as_yaml) == json.loads(as_json)
    assert len(json.loads(as_json)["configs"]) == 4


def test_train_config_is_exclusive_with_flags_and_needs_one_config(real_store, capsys, tmp_path):
    _, as_yaml, _ = run_cli(capsys, "best", "--store", real_store.uri, "--yaml")
    file = tmp_path / "all.yaml"
    file.write_text(as_yaml)
    code, _, err = run_cli(capsys, "train", "--config", str(file))
    assert code == 2 and "holds 4 configs; it must hold one" in err
    code, _, err = run_cli(capsys, "train", "--config", str(file), "--depth", "8")
    assert code == 2 and "--config is exclusive with the config options; also given: --depth" in err
    (tmp_path / "bad.yaml").write_text("dataset: cora\nlayers: 3\n")
    code, _, err = run_cli(capsys, "train", "--config", str(tmp_path / "bad.yaml"))
    assert code == 2 and "unknown config key 'layers'" in err


@pytest.mark.slow
def test_report_md_to_stdout_and_to_a_file(real_store, capsys, tmp_path):
    code, out, _ = run_cli(capsys, "report", "--store", real_store.uri)
    assert code == 0 and out.startswith("# orthotune report") and "| texas | gcn |" in out
    code, out, _ = run_cli(capsys, "report", "--store", real_store.uri, "--format", "html", "-o",
                           str(tmp_path / "r.html"))
    assert code == 0 and out == "" and (tmp_path / "r.html").read_text().count("data:image/png;base64,") == 5



@pytest.mark.slow
def test_report_writes_several_formats_of_one_report(real_store, capsys, tmp_path, monkeypatch):
    """`-o` repeated: each file in the format its suffix names, from one build of the report."""
    import orthotune.reports as reports

    builds = []
    build = reports.build_report
    monkeypatch.setattr(reports, "build_report", lambda *a, **k: builds.append(k) or build(*a, **k))
    files = [tmp_path / "r.md", tmp_path / "r.html", tmp_path / "r.csv", tmp_path / "r.tex", tmp_path / "r.txt"]
    code, out, _ = run_cli(capsys, "report", "--store", real_store.uri, *[a for f in files for a in ("-o", str(f))])
    assert code == 0 and out == "" and builds == [{"plots": True}]
    md, page, csv, tex, txt = (f.read_text() for f in files)
    assert md.startswith("# orthotune report") and md.count("](r-") == len(list(tmp_path.glob("r-*.png"))) == 5
    assert page.count("data:image/png;base64,") == 5
    assert csv.startswith("setting,") and "\\begin{table" in tex
    assert txt.startswith("# orthotune report")  # a suffix no format has: md
    code, _, _ = run_cli(capsys, "report", "--store", real_store.uri, "--format", "md", "-o", str(tmp_path / "x.html"))
    assert code == 0 and (tmp_path / "x.html").read_text().startswith("# orthotune report")  # --format wins


def test_best_json_and_csv_print_decimals_and_integers(tmp_path, capsys):
    # beta and lr as a search's arithmetic leaves them (0.1 * 7, 0.1 + 0.2)
    store = hand_store(tmp_path / "s", [
        hand_row("o", val=[0.8] * 5, test=[0.6] * 5),
        hand_row("x", ortho=True, beta=0.1 * 7, lr=0.1 + 0.2, val=[0.8] * 5, test=[0.7] * 5),
    ])
    code, out, _ = run_cli(capsys, "best", "--store", store.uri, "--ortho", "--json")
    assert code == 0 and '"beta": 0.7,' in out and '"lr": 0.3,' in out and "000000" not in out
    code, out, _ = run_cli(capsys, "report", "--store", store.uri, "--format", "csv")
    header, row = out.splitlines()[:2]
    values = dict(zip(header.split(","), row.split(","), strict=True))
    assert (values["orig_repeats"], values["ortho_repeats"], values["n_pairs"]) == ("5", "5", "5")


@pytest.mark.slow
def test_a_winner_prints_the_fields_its_backbone_reads_and_reruns_as_them(tmp_path, capsys):
    """A GCN winner prints no alpha, theta, heads, aggr or K (GCN reads none; its self_loop it does); GCNII prints its
    alpha and theta, GAT its heads, APPNP alpha and K. ``best --yaml`` reruns with ``train
    --config`` to the same config, and the report's winners table leaves the others empty."""
    common = dict(val=[0.8], test=[0.7], splits=[0], max_epochs=2, patience=2, hidden=8, selection="val_acc",
                  variant="default", alpha=0.3, theta=1.5, heads=2, aggr="max", K=4)
    store = hand_store(tmp_path / "s", [hand_row(b, backbone=b, **common) for b in ("gcn", "gcnii", "gat", "appnp")])
    code, out, _ = run_cli(capsys, "best", "--store", store.uri, "--yaml")
    configs = {c["backbone"]: c for c in yaml.safe_load(out)["configs"]}
    specific = {"alpha", "theta", "heads", "aggr", "K", "jk", "self_loop", "gcnii_variant", "batch_size"}
    assert {b: specific & set(c) for b, c in configs.items()} == {
        "gcn": {"self_loop"}, "gcnii": {"alpha", "theta", "gcnii_variant"}, "gat": {"heads"}, "appnp": {"alpha", "K"}}
    assert (configs["gcnii"]["alpha"], configs["gcnii"]["theta"], configs["gat"]["heads"]) == (0.3, 1.5, 2)
    assert {"conv_bias", "batch_norm", "input_T"} & set(configs["appnp"]) == set()
    file = tmp_path / "gcnii.yaml"
    file.write_text(yaml.safe_dump(configs["gcnii"]))
    code, out, _ = run_cli(capsys, "train", "--config", str(file), "--json")
    assert code == 0 and json.loads(out)["config"] == configs["gcnii"]
    report = build_report(store, plots=False).hyperparameters.set_index("backbone")
    assert report.loc["gcn", ["alpha", "theta", "heads"]].isna().all()
    assert (report.loc["gcnii", "alpha"], report.loc["gat", "heads"], report.loc["appnp", "K"]) == (0.3, 2, 4)


@pytest.mark.slow
def test_report_filters_by_search(tmp_path, capsys):
    store = hand_store(tmp_path / "s", [hand_row("a", search="one", test=[0.5, 0.5]),
                                        hand_row("b", search="two", val=[0.9, 0.9], test=[0.4, 0.4])])
    _, out, _ = run_cli(capsys, "report", "--store", str(tmp_path / "s"), "--format", "csv")
    assert "two,b," in out
    _, out, _ = run_cli(capsys, "report", "--store", store.uri, "--format", "csv", "--search", "one")
    assert "one,a," in out and "two" not in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["best", "--store", "{tmp}/absent"], "no orthotune store at"),
        (["report", "--store", "{tmp}/folder"], "is not an orthotune store"),
        (["best", "--store", "{tmp}/s", "--dataset", "coraa"], "unknown dataset 'coraa'; valid:"),
        (["report", "--store", "{tmp}/s", "--format", "pdf"], "unknown report format 'pdf'; valid: md, csv"),
        (["best", "--store", "{tmp}/s", "--search", "nope"], "no search 'nope' in store"),
        (["best", "--store", "{tmp}/s", "--dataset", "texas"], "no trial in store"),
        (["report", "--store", "{tmp}/s", "--format", "csv", "-o", "{tmp}/folder"], "is a folder"),
        (["report", "--store", "{tmp}/s", "-o", "{tmp}/folder/data.csv/r.md"], "cannot write the report"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    hand_store(tmp_path / "s", [hand_row("a")])
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "data.csv").write_text("x\n")
    code, out, err = run_cli(capsys, *[a.replace("{tmp}", str(tmp_path)) for a in args])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and message in lines[0], err



@pytest.mark.slow
@pytest.mark.parametrize("command", [["best"], ["report", "--format", "csv"]])
def test_a_torn_trial_file_is_named_once_and_the_rest_still_answers(tmp_path, capsys, command):
    store = hand_store(tmp_path / "s", [hand_row("a", val=[0.9] * 3), hand_row("b", ortho=True, val=[0.8] * 3)])
    torn = next(Path(store.root, "trials").rglob("trial-*.parquet"))
    torn.write_bytes(torn.read_bytes()[:200])  # a file cut short, as a full disk or a bad copy leaves it
    code, out, err = run_cli(capsys, *command, "--store", store.uri)
    warnings = [line for line in err.splitlines() if line.strip()]
    assert code == 0 and out and len(warnings) == 1, err
    assert "skipping unreadable file" in warnings[0] and torn.name in warnings[0]
    assert "orthotune store check" in warnings[0]


@pytest.mark.slow
def test_best_prints_each_verdicts_tuning_curve_word_and_json_carries_the_curve(tmp_path, capsys):
    """issue 40: the word after each verdict line; --curve adds the curves: as tables in the
    text view; --json/--yaml always carry them beside the configs and the pairs."""
    store = hand_store(tmp_path / "s", shrinking_rows())
    code, out, _ = run_cli(capsys, "best", "--store", store.uri)
    verdict = next(line for line in out.splitlines() if line.startswith("  cora full gcn depth 2"))
    assert code == 0 and verdict.endswith("; tuning curve: still shrinking (+2.00 pts at k = 7, outside the 95% CI "
                                          "at k = 8)")
    code, out, _ = run_cli(capsys, "best", "--store", store.uri, "--json")
    data = json.loads(out)
    assert code == 0 and len(data["configs"]) == 2
    (pair,) = data["pairs"]
    assert pair["settled"] == "still shrinking (+2.00 pts at k = 7, outside the 95% CI at k = 8)"
    assert (pair["orig_trial_id"], pair["ortho_trial_id"]) == ("o7", "x0")
    (curve,) = data["curves"]
    assert (curve["pair"], curve["settled"], curve["trials_per_arm"]) == (
        "cora full gcn depth 2 (default)", False, {"original": 8, "Ortho-GConv": 8})
    assert [p["k"] for p in curve["by_trials"]] == list(range(1, 9))
    assert [round(100 * p["diff_mean"], 2) for p in curve["by_trials"]] == [5.0, 4.5, 4.0, 3.5, 3.0, 2.5, 2.0, 1.5]
    first = curve["by_trials"][0]
    assert (first["orig_trial_id"], first["ortho_trial_id"], first["n_pairs"]) == ("o0", "x0", 5)
    assert len(first["orig_repeat_test_acc"]) == 5 and first["ci_low"] < first["diff_mean"] < first["ci_high"]
    assert curve["by_epochs"][-1]["orig_epochs"] == 800  # 8 trials of 5 repeats of 20 epochs
    code, out, _ = run_cli(capsys, "best", "--store", store.uri, "--yaml")
    assert code == 0 and yaml.safe_load(out) == data
    code, out, _ = run_cli(capsys, "best", "--store", store.uri, "--curve")
    table = out[out.index("tuning curve of cora full gcn depth 2 (default): still shrinking"):].splitlines()
    assert table[1].split()[:3] == ["k", "original", "test"] and len(table) == 2 + 8
    assert table[-1].split()[:4] == ["8", "74.50", "76.00", "+1.50"]
