"""The grading kernel: an IPython kernel under memory and CPU-time limits, one thread, tamper guard.

Its command line is the stock ipykernel's wrapped in ``prlimit`` (util-linux):

    prlimit --as=<bytes> --cpu=<seconds> -- python -m ipykernel_launcher -f {connection_file}
            --ext=lmpolicy_grader.guard

``--as`` caps the address space, so a memory bomb gets a MemoryError instead of taking the machine;
``--cpu`` kills a kernel that burns more CPU seconds than any honest notebook needs. BLAS, OpenMP
and torch get one thread each, so N parallel kernels use N cores and no more.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from traitlets import Int

KERNEL_NAME = "lmpolicy-grader"
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")}
# The course's limits (nbgrader_config.py may change them): no honest ch11 notebook comes near either.
DEFAULT_MEMORY_BYTES = 3 * 1024**3
DEFAULT_CPU_SECONDS = 600


def grading_kernel_spec(memory_bytes: int = DEFAULT_MEMORY_BYTES, cpu_seconds: int = DEFAULT_CPU_SECONDS,
                        python: str = sys.executable) -> dict:
    """The kernel.json of the grading kernel, as a dict."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise RuntimeError("the grading kernel needs `prlimit` (Debian/Ubuntu package util-linux) on PATH")
    return {
        "argv": [prlimit, f"--as={memory_bytes}", f"--cpu={cpu_seconds}", "--",
                 python, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--ext=lmpolicy_grader.guard",
                 "--IPKernelApp.log_level=ERROR"],
        "display_name": "Python 3 (lmpolicy grader, limited)",
        "language": "python",
        "env": dict(ONE_THREAD, MPLBACKEND="Agg"),
        "metadata": {"debugger": False},
    }


def install_grading_kernel(prefix_dir: Path, **limits) -> Path:
    """Write ``<prefix_dir>/lmpolicy-grader/kernel.json`` (for formgrader or `jupyter kernelspec`)."""
    kernel_dir = Path(prefix_dir) / KERNEL_NAME
    kernel_dir.mkdir(parents=True, exist_ok=True)
    (kernel_dir / "kernel.json").write_text(json.dumps(grading_kernel_spec(**limits), indent=1) + "\n")
    return kernel_dir


class GradingKernelManager(AsyncKernelManager):
    """Starts the grading kernel whatever kernelspec a notebook names (none needs installing)."""

    memory_bytes = Int(DEFAULT_MEMORY_BYTES, help="address-space limit of the kernel (bytes)").tag(config=True)
    cpu_seconds = Int(DEFAULT_CPU_SECONDS, help="CPU-time limit of the kernel (seconds)").tag(config=True)

    @property
    def kernel_spec(self):
        if self._kernel_spec is None:
            self._kernel_spec = KernelSpec(resource_dir="", **grading_kernel_spec(self.memory_bytes, self.cpu_seconds))
        return self._kernel_spec
