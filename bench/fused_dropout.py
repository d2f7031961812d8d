"""What a compiled, fused dropout kernel would save against the trainer's eager one.

The trainer's dropout (``orthotune.models.dropout``) draws each slot's 16-bit uniforms from its
own CPU stream, then makes a float mask and multiplies: several passes over the state in eager
torch. This bench builds, with ``torch.utils.cpp_extension.load_inline``, a C++ kernel that
reads the state and the draws once and writes the dropped state once, checks that it gives
the trainer's bits, and times both on the packed states of the floor bench's cases (one
thread). It prints the build's seconds too: a kernel compiled at first use costs that on
every fresh machine (and Ray node) before its first epoch.

    python bench/fused_dropout.py [--json]

Needs a C++ compiler; the build goes to a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

SOURCE = r"""
#include <ATen/ATen.h>
#include <torch/library.h>

// x * ((u >= threshold) ? scale : 0): each row of u holds one slot's signed 16-bit fields
at::Tensor masked_scale(const at::Tensor& x, const at::Tensor& u, int64_t threshold, double scale) {
  TORCH_CHECK(x.is_contiguous() && u.is_contiguous() && x.scalar_type() == at::kFloat, "contiguous float x");
  auto out = at::empty_like(x);
  const int64_t slots = u.size(0), per = x.numel() / slots, stride = u.size(1);
  const float* xp = x.data_ptr<float>();
  const int16_t* up = u.data_ptr<int16_t>();
  float* op = out.data_ptr<float>();
  const float s = static_cast<float>(scale);
  const int16_t t = static_cast<int16_t>(threshold);
  for (int64_t slot = 0; slot < slots; ++slot) {
    const float* xs = xp + slot * per;
    const int16_t* us = up + slot * stride;
    float* os = op + slot * per;
    for (int64_t j = 0; j < per; ++j) {
      os[j] = xs[j] * (us[j] >= t ? s : 0.0f);
    }
  }
  return out;
}
TORCH_LIBRARY(orthotune_bench_fused, m) {
  m.def("masked_scale(Tensor x, Tensor u, int threshold, float scale) -> Tensor");
}
TORCH_LIBRARY_IMPL(orthotune_bench_fused, CPU, m) { m.impl("masked_scale", &masked_scale); }
"""

#: The floor bench's packed hidden states: Cora GCN-2 at 64 runs, PubMed GCN-8 at 5 runs.
SHAPES = {"cora-gcn2-64": (64, 2708, 64), "pubmed-gcn8-5": (5, 19717, 64), "small": (4, 300, 16)}


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def measure(shape: tuple[int, int, int], op, repeats: int, p: float = 0.5) -> dict:
    import torch

    from orthotune.models import dropout, dropout_fields, dropout_streams, dropout_threshold

    slots, per = shape[0], shape[1] * shape[2]
    x = torch.randn(*shape)
    threshold, scale = dropout_threshold(p), 1.0 / (1.0 - p)

    def draws():
        return dropout_fields(streams, per)

    streams = dropout_streams(range(slots), torch.device("cpu"))
    eager = dropout(x, p, True, streams)
    streams = dropout_streams(range(slots), torch.device("cpu"))
    compiled = op(x, draws(), threshold, scale)
    same = torch.equal(eager.view(torch.int32), compiled.view(torch.int32))
    streams = dropout_streams(range(slots), torch.device("cpu"))
    fixed = draws()
    return dict(shape=list(shape), same_bits=same,
                trainer_ms=median_ms(lambda: dropout(x, p, True, streams), repeats),
                draws_ms=median_ms(draws, repeats),
                compiled_apply_ms=median_ms(lambda: op(x, fixed, threshold, scale), repeats),
                copy_ms=median_ms(x.clone, repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(SHAPES), default=["cora-gcn2-64", "pubmed-gcn8-5"])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import torch
    from torch.utils.cpp_extension import load_inline

    from orthotune.training import retain_freed_memory

    torch.set_num_threads(1)
    retain_freed_memory()  # as the trainer: freed blocks stay mapped, no page faults per epoch
    with tempfile.TemporaryDirectory() as build:
        start = time.perf_counter()
        load_inline("orthotune_bench_fused", cpp_sources=[SOURCE], is_python_module=False, build_directory=build,
                    extra_cflags=["-O3", "-ffp-contract=off"])
        seconds = time.perf_counter() - start
    op = torch.ops.orthotune_bench_fused.masked_scale
    results = {case: measure(SHAPES[case], op, args.repeats) for case in args.cases}
    if args.json:
        print(json.dumps(dict(build_seconds=seconds, cases=results)))
        return
    print(f"build {seconds:.1f} s (load_inline, -O3), one thread, medians of {args.repeats}")
    print(f"  {'case':16s} {'same bits':>9s} {'trainer ms':>11s} {'its draws ms':>13s} "
          f"{'compiled apply ms':>18s} {'one copy ms':>12s}")
    for case, r in results.items():
        print(f"  {case:16s} {str(r['same_bits']):>9s} {r['trainer_ms']:11.1f} {r['draws_ms']:13.1f} "
              f"{r['compiled_apply_ms']:18.1f} {r['copy_ms']:12.1f}")


if __name__ == "__main__":
    main()
