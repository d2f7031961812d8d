"""The scale benchmark runs end to end on small stores (figures are the benchmark's job, not the test's)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = [sys.executable, str(ROOT / "bench" / "scale.py")]


@pytest.mark.slow  # a dozen orthotune processes and moto's server: about a minute
def test_scale_bench_measures_both_layouts_compacts_and_estimates_growth(tmp_path):
    proc = subprocess.run([*BENCH, "--store", str(tmp_path / "scale"), "--trials", "40", "80", "--commands", "status",
                           "best", "--only", "stores", "s3", "--jobs", "1", "--json"],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout)
    for size, found in figures["stores"].items():
        assert found["per-trial files"]["parquet_files"] == 2 * int(size)  # a file per trial per table
        assert found["compacted"]["parquet_files"] == 2  # one per table once compacted
        measured = [found["compact"], *(found[layout][name] for layout in ("per-trial files", "compacted")
                                        for name in ("status", "best"))]
        assert all(m["exit"] == 0 and m["seconds"] > 0 and m["cpu_s"] > 0 for m in measured), measured
    assert set(figures["growth"]) == {"per-trial files: status", "per-trial files: best", "compacted: status",
                                      "compacted: best", "store compact"}
    assert all(g["grows_with"] for g in figures["growth"].values())
    s3 = figures["s3_write_per_trial"]
    assert s3["requests_per_trial"] == 3 and s3["trial_files_requests"] == 2, s3  # two files and the summary

    # the same stores again: found compacted, measured compacted only; sizes measured apart combine
    again = subprocess.run([*BENCH, "--store", str(tmp_path / "scale"), "--trials", "80", "--commands", "status",
                            "--only", "stores", "--json"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert list(json.loads(again.stdout)["stores"]["80"]) == ["trials", "generated_s", "compacted"]
    (tmp_path / "all.json").write_text(proc.stdout)
    combined = subprocess.run([*BENCH, "--growth-of", str(tmp_path / "all.json")], capture_output=True, text=True,
                              timeout=600, cwd=ROOT)
    assert combined.returncode == 0 and "store compact" in combined.stdout, combined.stderr
