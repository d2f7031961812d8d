"""``orthotune plan``: bad input refused in one line before torch or Ray load, the JSON shape,
and the resources given."""

import json
import subprocess
import sys

import pytest
import yaml

from orthotune.cli import main

SPACE = {"name": "tiny", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2],
         "original": True, "ortho": {"T": 2, "beta": 1.0, "lam": 5.0e-4},
         "train": {"lr": [0.01, 0.02, 0.05], "hidden": 16, "epochs": 30, "patience": 30},
         "asha": {"grace_period": 10, "reduction_factor": 3}, "samples": 3}

#: Run in a fresh interpreter: each case's exit code and the heavy libraries loaded after it.
VALIDATION_IMPORTS = r"""
import json, sys
from orthotune.cli import main

heavy = ("torch", "torch_geometric", "ray", "pyarrow")  # pyarrow: the store loads after validation
seen = []
for words in json.loads(sys.argv[1]):
    try:
        code = main(["plan", *words])
    except SystemExit as exit:  # argparse's usage errors exit
        code = exit.code
    seen.append([code, sorted(m for m in heavy if m in sys.modules)])
print(json.dumps(seen))
"""


@pytest.mark.slow
def test_plan_refuses_bad_input_in_one_line_before_torch_ray_or_pyarrow_load(tmp_path):
    (tmp_path / "malformed.yaml").write_text("datasets: [cora\n")
    (tmp_path / "unknown-key.yaml").write_text("datasets: [cora]\nbackbones: [gcn]\ndepths: [2]\nbudget: 3\n")
    (tmp_path / "binary.yaml").write_bytes(b"\x00\xff\xfe datasets")
    (tmp_path / "good.yaml").write_text("datasets: [cora]\nbackbones: [gcn]\ndepths: [2]\n")
    (tmp_path / "binary.json").write_bytes(b"\x00\xff\xfe per_trial_s")
    (tmp_path / "malformed.json").write_text('{"per_trial_s": 0.1, ')
    (tmp_path / "negative.json").write_text('{"per_trial_s": 0.1, "per_report_s": -1}')
    good = str(tmp_path / "good.yaml")
    cases = [["--space", str(tmp_path / "malformed.yaml")], ["--space", str(tmp_path / "unknown-key.yaml")],
             ["--space", str(tmp_path / "binary.yaml")], ["--space", str(tmp_path / "missing.yaml")],
             ["--space", "quick", "--datasets", "mnist"], ["--space", "no-such-preset"],
             ["--space", good, "--samples", "0"], ["--space", good, "--searcher", "bayes"],
             ["--space", good, "--cpus", "0"], ["--space", good, "--nodes", "1.5"], ["--space", good, "--gpus", "-1"],
             *(["--space", good, "--service-overhead", str(tmp_path / name)]
               for name in ("binary.json", "malformed.json", "negative.json", "missing.json"))]
    out = subprocess.run([sys.executable, "-c", VALIDATION_IMPORTS, json.dumps(cases)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == [[2, []]] * len(cases), list(zip(cases, json.loads(out.stdout)))
    errors = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(errors) == len(cases), errors  # one line each
    assert all(line.startswith(("orthotune plan: error:", "orthotune: error:", "orthotune plan: error")) or
               "error:" in line for line in errors)


def test_bad_space_file_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets: [cora]\nbackbones: [gcn]\ndepths: [0]\n")
    assert main(["plan", "--space", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "depths value 0 must be an integer >= 1" in err


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """``plan --json`` of a small space on real Cora, with resources of a made-up cluster."""
    path = tmp_path_factory.mktemp("plan") / "tiny.yaml"
    path.write_text(yaml.safe_dump(SPACE))
    service = path.with_name("service.json")  # as bench/service_overhead.py writes it, elsewhere
    service.write_text(json.dumps({"per_trial_s": 0.2, "per_report_s": 0.01, "measured": {"date": "2026-11-28"}}))
    out = subprocess.run([sys.executable, "-m", "orthotune.cli", "plan", "--space", str(path), "--json",
                          "--cpus", "8", "--nodes", "2", "--memory", "0.001", "--measure-epochs", "2",
                          "--service-overhead", str(service)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.slow
def test_plan_json_shape(planned):
    assert set(planned) >= {"space", "scheduler", "searcher", "resources", "machine", "cells", "totals"}
    assert planned["resources"]["cpus"] == 8 and planned["resources"]["nodes"] == 2
    assert [c["cell"] for c in planned["cells"]] == ["cora/gcn/2/original", "cora/gcn/2/ortho"]
    for cell in planned["cells"]:
        assert {"trials", "repeats", "epochs", "patience", "seconds_per_epoch", "setup_s", "expected_epochs",
                "trial_s", "peak_bytes", "seconds", "cached", "device"} <= set(cell)
        assert (cell["trials"], cell["repeats"], cell["epochs"], cell["patience"]) == (3, 1, 30, 30)
        assert cell["seconds_per_epoch"] > 0 and cell["device"] == "cpu"
    totals = planned["totals"]
    assert totals["trials"] == 6 and totals["slots"] == 16 and totals["gpu_s"] is None
    assert planned["service_overhead"] == {"included": True, "source": "file service.json", "per_trial_s": 0.2,
                                           "per_report_s": 0.01, "measured": {"date": "2026-11-28"}}
    for cell in planned["cells"]:  # 30 epochs under FIFO-like ASHA (grace 10, rf 3), reports every 10
        assert 1 <= cell["expected_reports"] <= 3
        assert cell["service_s"] == pytest.approx(0.2 + 0.01 * cell["expected_reports"])
        assert cell["trial_s"] == pytest.approx(cell["trainer_s"] + cell["service_s"])
    assert totals["service_s"] == pytest.approx(sum(c["service_s"] * c["trials"] for c in planned["cells"]))
    assert 0 < totals["service_share"] < 1
    assert totals["core_s"] == pytest.approx(sum(c["seconds"] for c in planned["cells"]))
    assert totals["wall_s"] >= max(c["trial_s"] for c in planned["cells"])


@pytest.mark.slow
def test_a_node_too_small_names_every_cell_with_its_figure(planned):
    """--memory 0.001 GiB (1 MiB): no trial's process fits."""
    misfits = planned["totals"]["does_not_fit"]
    assert [line.split(":")[0] for line in misfits] == ["cora/gcn/2/original", "cora/gcn/2/ortho"]
    assert all("more than the 0.0 GiB a node has" in line and "GiB (" in line for line in misfits)
