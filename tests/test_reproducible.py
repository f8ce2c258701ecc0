"""The numeric pins that make the committed outputs reproducible on any x86-64 CPU (see the Makefile).

nbval compares every output exactly, and the chapters glue full-precision numbers from trained models. Without
the pins, torch and MKL pick kernels by CPU (AVX-512 on one machine, AVX2 on another, another branch of MKL on
AMD than on Intel), and a model trained on one machine ends a few float32 roundings away from the same model
trained on another. These tests fail when the pins are missing, before nbval fails on someone else's machine.
"""

import os
import platform

import pytest
import torch

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the pins are for x86-64 CPUs")

HOW = "run the tests through make (make test, make unit), which exports the pins of the Makefile"


def test_torch_kernels_are_capped_at_avx2():
    capability = torch.backends.cpu.get_cpu_capability()
    if "ATEN_CPU_CAPABILITY" not in os.environ:  # the Makefile leaves it unset only on a CPU without AVX2
        assert capability == "DEFAULT", f"ATEN_CPU_CAPABILITY is not set, and torch chose {capability}: {HOW}"
        return
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2", f"ATEN_CPU_CAPABILITY is not avx2: {HOW}"
    assert capability == "AVX2"


def test_mkl_runs_one_code_path_on_every_cpu():
    assert os.environ.get("MKL_CBWR") == "COMPATIBLE", f"MKL_CBWR is not COMPATIBLE: {HOW}"
    assert os.environ.get("ONEDNN_MAX_CPU_ISA") == "AVX2", f"ONEDNN_MAX_CPU_ISA is not AVX2: {HOW}"
    assert torch.backends.mkl.is_available(), "this torch has no MKL: the pin means nothing, and outputs may differ"

