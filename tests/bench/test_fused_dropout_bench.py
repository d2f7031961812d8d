"""The compiled-dropout bench builds its kernel, gives the trainer's bits and prints its figures."""

import pytest
from benches import compiled_bench


@pytest.mark.slow  # compiles a C++ kernel against torch's headers (about 50 s on 2 cores)
def test_the_compiled_kernel_gives_the_trainers_bits_and_both_are_timed():
    figures = compiled_bench("fused_dropout.py", "--cases", "small", "--repeats", "2")
    small = figures["cases"]["small"]
    assert figures["build_seconds"] > 0 and small["shape"] == [4, 300, 16]
    assert small["same_bits"] is True
    assert min(small["trainer_ms"], small["draws_ms"], small["compiled_apply_ms"], small["copy_ms"]) > 0
