"""The kernels the student's JupyterLab starts: IPython kernels that know which run of which cell left each name
from their first cell on (``lmpolicy.notebook.answer_runs``, loaded as an IPython extension as the kernel starts).

Without it the watch begins when a notebook first imports the checks, and a cell that raised before that, and not
just before, is unknown: the first check judges what an earlier run left. The student's server configuration
(``jupyter-config/student`` for ``make lab``, ``deploy/singleuser/student`` on the hubs) makes
``StudentKernelSpecManager`` its kernel spec manager: every IPython kernel spec it hands out starts the kernel with
the extension. The extension imports the few small modules of the watch, not the checks, and its hooks read each
cell's top-level names (an ``ast`` parse): a notebook that never runs a check pays that and nothing more. nbgrader's
kernels (Validate's subprocess, autograding) are started by nbgrader's own kernel manager, never through this one,
and the extension does nothing under ``NBGRADER_EXECUTION`` either.
"""
from __future__ import annotations

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

WATCH = "--InteractiveShellApp.extra_extensions=lmpolicy.notebook.answer_runs"
IPYTHON_KERNEL_MODULES = ("ipykernel_launcher", "ipykernel")  # what `python -m` runs in an IPython kernel's spec


def is_ipython_kernel(argv: list[str]) -> bool:
    """True for a kernel spec's command that runs ipykernel (``python -m ipykernel_launcher -f ...``)."""
    return any(first == "-m" and module in IPYTHON_KERNEL_MODULES for first, module in zip(argv, argv[1:]))


def watching(spec: KernelSpec) -> KernelSpec:
    """``spec``, its command loading the watch when it starts an IPython kernel; any other kernel as it is."""
    if is_ipython_kernel(spec.argv) and WATCH not in spec.argv:
        spec.argv = [*spec.argv, WATCH]
    return spec


class StudentKernelSpecManager(KernelSpecManager):
    """The installed kernel specs, each IPython kernel's started with the watch (``watching``)."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return watching(super().get_kernel_spec(kernel_name))
