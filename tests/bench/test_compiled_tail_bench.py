"""The torch.compile bench compiles a packed layer's elementwise tail, checks it against eager
and times both."""

import subprocess
import sys

import pytest
import torch
from benches import ROOT, compiled_bench


@pytest.mark.slow  # inductor builds its C++ kernels (10-20 s on 2 cores)
def test_the_compiled_tail_equals_eager_where_it_should_and_both_are_timed():
    figures = compiled_bench("compiled_tail.py", "--cases", "small", "--repeats", "2", timeout=600)
    small = figures["cases"]["small"]
    assert figures["device"] == "cpu" and small["shape"] == [4, 300, 16]
    # elementwise results are exact either way; only the bias's gradient, a sum, may round differently
    assert small["eval_same_bits"] == [True] and small["train_same_bits"][:2] == [True, True]
    assert small["train_max_abs_diff"] < 1e-4
    assert min(small["eval_compile_s"], small["train_compile_s"]) > 0
    parts = ("eval", "train", "forward_with_mask", "forward_with_state")
    assert min(small[f"{part}_{mode}_ms"] for part in parts for mode in ("eager", "compiled")) > 0


@pytest.mark.slow
def test_cuda_asked_where_torch_has_none_is_one_line_and_a_non_zero_exit():
    if torch.cuda.is_available():
        pytest.skip("this torch sees a CUDA device")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "compiled_tail.py"), "--device", "cuda"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 1
    expected = f"compiled_tail: --device cuda, but this torch ({torch.__version__}) sees no CUDA device"
    assert proc.stderr.strip() == expected
