"""lmpolicy pins torch's, oneDNN's and MKL's code paths, so that a seeded training run gives the same numbers on
Intel and AMD processors alike (lmpolicy.arithmetic); each case runs in a fresh interpreter, since the pin
only takes before torch's first operation."""
import subprocess
import sys
from pathlib import Path

import pytest

CPU_FLAGS = set(Path("/proc/cpuinfo").read_text().split()) if Path("/proc/cpuinfo").exists() else set()
HAS_AVX2, HAS_AVX512 = "avx2" in CPU_FLAGS, "avx512f" in CPU_FLAGS
CLEAN_ENV = {"PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "default"}


def run(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**CLEAN_ENV, **(env or {})}, check=True)


@pytest.mark.skipif(not HAS_AVX2, reason="needs an x86-64 processor with AVX2")
def test_torch_imported_first_still_runs_the_pinned_kernels():
    done = run("import os, torch, lmpolicy; "
               "print(torch.backends.cpu.get_cpu_capability(), os.environ['ONEDNN_MAX_CPU_ISA'], os.environ['MKL_CBWR'])")
    assert done.stdout.split() == ["AVX2", "AVX2", "COMPATIBLE"]
    assert "Warning" not in done.stderr, done.stderr


@pytest.mark.skipif(not HAS_AVX512, reason="only a processor with AVX-512 picks other kernels when unpinned")
def test_torch_that_computed_first_gets_a_warning_that_says_to_restart():
    done = run("import torch; torch.ones(3).sum(); import lmpolicy; print(torch.backends.cpu.get_cpu_capability())")
    assert done.stdout.split() == ["AVX512"]
    assert "restart the kernel and run the notebook from its first cell" in done.stderr


@pytest.mark.skipif(not HAS_AVX2, reason="needs an x86-64 processor with AVX2")
def test_a_choice_made_in_the_environment_is_kept():
    done = run("import os, torch, lmpolicy; print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_CBWR'])",
               env={"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AUTO"})
    assert done.stdout.split() == ["DEFAULT", "AUTO"]
    assert "Warning" not in done.stderr, done.stderr


# TinyLM's GELU, run as notebook 08's training runs it: oneDNN says which of its generated kernels ran
GELU = ("import torch, lmpolicy; x = torch.randn(64, 35, 256, generator=torch.Generator().manual_seed(0)); "
        "print(torch.nn.functional.gelu(x).double().sum().item().hex())")


def onednn_kernels(env: dict | None = None) -> set[str]:
    done = run(GELU, env={"ONEDNN_VERBOSE": "1", **(env or {})})
    return {fields[6] for line in done.stdout.splitlines()
            if (fields := line.split(","))[:4] == ["onednn_verbose", "v1", "primitive", "exec"]}


@pytest.mark.skipif(not HAS_AVX2, reason="needs an x86-64 processor with AVX2")
def test_onednn_generates_its_avx2_kernels_and_obeys_the_variable_that_caps_them():
    """oneDNN picks its kernels by the processor and ignores ATEN_CPU_CAPABILITY; pinned, it stops at AVX2
    here as on a processor with AVX-512; and it reads the variable the pin sets (capped lower, it goes lower,
    with other bits: which kernels run changes the numbers)."""
    assert onednn_kernels() == {"jit:avx2"}
    assert onednn_kernels({"ONEDNN_MAX_CPU_ISA": "SSE41"}) == {"jit:sse41"}
    assert run(GELU).stdout != run(GELU, env={"ONEDNN_MAX_CPU_ISA": "SSE41"}).stdout


@pytest.mark.skipif(not HAS_AVX512, reason="compares AVX-512 with the pinned path")
def test_the_pinned_path_gives_other_bits_than_the_native_one_and_the_same_bits_every_time():
    """The pin is not a no-op on this machine: a product and a log-softmax of seeded inputs round differently
    on the native AVX-512 path, and identically in two pinned runs; so does the GELU (oneDNN's own kernels)."""
    code = ("import torch, lmpolicy; g = torch.Generator().manual_seed(0); a = torch.randn(300, 257, generator=g); "
            "b = torch.randn(257, 311, generator=g); print((a @ b).log_softmax(-1).double().sum().item().hex())")
    native_env = {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "ALL", "MKL_CBWR": "AUTO"}
    for computation in (code, GELU):
        pinned = {run(computation).stdout for _ in range(2)}
        native = run(computation, env=native_env).stdout
        assert len(pinned) == 1 and native not in pinned
    assert onednn_kernels() == {"jit:avx2"} and onednn_kernels(native_env) != {"jit:avx2"}
