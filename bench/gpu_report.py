"""How ``bench/gpu.py`` prints its summary: one Markdown table or list per part."""

from __future__ import annotations

import json
from typing import Any


def markdown(summary: dict[str, Any]) -> str:
    lines = [f"{summary['device']}, torch {summary['torch']}: {summary['configs']} Cora GCN-{summary['depth']} "
             f"configs x {summary['epochs']} epochs"]
    if "throughput" in summary:
        lines += ["", "| how | s | trials/s | speedup over one at a time | test acc mean +- std |",
                  "|---|---|---|---|---|"]
        for how, row in summary["throughput"].items():
            lines.append(f"| {how} | {row['seconds']:.2f} | {row['trials_per_s']:.2f} | {row['speedup']:.1f}x | "
                         f"{row['test_acc_mean']:.4f} +- {row['test_acc_std']:.4f} |")
    if "per_epoch" in summary:
        lines += ["", "| pack | graph | ms / epoch | kernels or aten ops / epoch | launches / epoch "
                  "| host reads / epoch | GPU busy | memory |", "|---|---|---|---|---|---|---|---|"]
        for row in summary["per_epoch"]:
            ops = row.get("kernels_per_epoch", row.get("aten_ops_per_epoch"))
            busy = "n/a (CPU)" if row["gpu_busy_share"] is None else f"{row['gpu_busy_share']:.0%}"
            launches = "n/a" if row["launches_per_epoch"] is None else f"{row['launches_per_epoch']:.0f}"
            memory = (f"{row['peak_mib_per_run']:.1f} MiB/run" if "peak_mib_per_run" in row
                      else f"peak RSS {row['peak_rss_mib_process']:.0f} MiB (process)")
            lines.append(f"| {row['pack']} | {'yes' if row['graph'] else 'no'} | {row['ms_per_epoch']:.2f} | {ops:.0f} "
                         f"| {launches} | {row['host_reads_per_epoch']:.1f} | {busy} | {memory} |")
    for part in ("precision", "equality", "shares"):
        if part in summary:
            lines += ["", f"{part}:"]
            for key, row in summary[part].items():
                shown = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}
                lines.append(f"- {key}: {json.dumps(shown)}")
    if "projection" in summary:
        projection = summary["projection"]
        whole = projection["hours_whole_grid"]
        lines += ["", f"paper-full grid: {projection['grid']}; cells measured: {projection['cells_measured']}; "
                  f"projected hours for those cells: {projection['hours_for_measured_cells']:.2f}; whole grid: "
                  + ("not projected (not every cell measured)" if whole is None else f"{whole:.2f} h")]
        for cell, row in projection["per_cell"].items():
            lines.append(f"- {cell}: pack {row['pack']}, {row['s_per_run_epoch'] * 1e3:.3f} ms per run-epoch, "
                         f"{row['grid_hours']:.2f} h in the grid")
    return "\n".join(lines)
