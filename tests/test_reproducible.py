"""The numeric pins that make the committed outputs reproducible on any x86-64 CPU (see the Makefile).

nbval compares every output exactly, and the chapters glue full-precision numbers from trained models. Without
the pins, torch and MKL pick kernels by CPU (AVX-512 on one machine, AVX2 on another, another branch of MKL on
AMD than on Intel), and a model trained on one machine ends a few float32 roundings away from the same model
trained on another. These tests fail when the pins are missing, before nbval fails on someone else's machine.
"""

import os
import platform
import subprocess
from pathlib import Path

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


PINS = ("MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")


def test_binder_exports_the_same_pins_as_make():
    """.binder/start (run by Binder before the notebook server) sets what the Makefile sets, on this CPU too."""
    start = Path(__file__).resolve().parent.parent / ".binder" / "start"
    clean = {k: v for k, v in os.environ.items() if k not in PINS}
    out = subprocess.run([str(start), "env"], env=clean, capture_output=True, text=True, check=True).stdout
    exported = dict(line.split("=", 1) for line in out.splitlines() if line.split("=", 1)[0] in PINS)
    expected = {k: os.environ[k] for k in PINS if k in os.environ}
    assert exported == expected, f"compare .binder/start with the Makefile; {HOW}"
