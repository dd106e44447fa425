"""The trusted test kernel: where a notebook's test cells run, beside the sandboxed grading kernel.

A plain ipykernel of the grader's own Python, unsandboxed (it runs only the instructor's code), which
reaches the submission only through the channel (``trusted_tests``). It is forked from a process that
has already imported torch (``kernels.forked``), and talks over ZMQ ipc sockets in its own folder.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, DottedObjectName

from lmpolicy_grader.kernels.forked import PRELOAD, PROVISIONER_NAME, ZYGOTE, provisioner_installed
from lmpolicy_grader.kernels.grading_kernel import DEFAULT_MEMORY_BYTES, MOVING_IN, ONE_THREAD, warn_once


# The longest path a Unix socket may have (sun_path: 108 bytes with its terminating NUL).
MAX_SOCKET_PATH = 107

# Imported while the kernel starts, beside the grading kernel's own start-up, so that the first test
# or set-up cell does not wait for them (a forked kernel has them already).
TRUSTED_KERNEL_IMPORTS = tuple(f"import {module}" for module in PRELOAD)


# What the trusted kernel runs for the grader, loaded at its start (called by name, never sent as code).
IN_KERNEL = "lmpolicy_grader.trusted_tests.in_kernel"
# The comm target it serves (kept here, so that the grader names it without importing torch through in_kernel).
IN_KERNEL_TARGET = "lmpolicy_grader.trusted_tests"


class TrustedKernelManager(AsyncKernelManager):
    """Starts the trusted test kernel: the grader's Python, one thread, no sandbox, no extension, under
    the grading kernel's memory limit (what it decodes from the submission is bounded there too)."""

    client_class = DottedObjectName("lmpolicy_grader.kernels.ready_client.ReadyKernelClient")

    forked = Bool(True, help="fork the kernel from a zygote that has imported torch (``kernels.forked``) instead "
                             "of starting it from its command line").tag(config=True)

    @property
    def kernel_spec(self):
        if self._kernel_spec is None:
            provisioner = {"provisioner_name": PROVISIONER_NAME, "config": {"memory_bytes": DEFAULT_MEMORY_BYTES}}
            prlimit = shutil.which("prlimit")
            if prlimit is None:
                raise RuntimeError("the trusted test kernel needs `prlimit` (Debian/Ubuntu package util-linux) on PATH")
            self._kernel_spec = KernelSpec(
                resource_dir="", display_name="Python 3 (lmpolicy trusted tests)", language="python",
                argv=[prlimit, f"--as={DEFAULT_MEMORY_BYTES}", "--",
                      sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                      "--IPKernelApp.log_level=ERROR", "--HistoryManager.hist_file=:memory:",
                      f"--ext={IN_KERNEL}", f"--ext={MOVING_IN}",
                      *(f"--IPKernelApp.exec_lines={line}" for line in TRUSTED_KERNEL_IMPORTS)],
                env=dict(ONE_THREAD, MPLBACKEND="Agg", NBGRADER_EXECUTION="autograde"),
                metadata={"kernel_provisioner": provisioner} if self._fork() else {})
        return self._kernel_spec

    async def _async_pre_start_kernel(self, **kw):
        # ZMQ ipc sockets in the kernel's own folder, not TCP ports: a port the grader picks is free only
        # until the kernel binds it, and any process on the machine may take it first
        sockets = Path(kw.get("cwd") or "") / ".kernel"
        if kw.get("cwd") and len(f"{sockets}-00000") <= MAX_SOCKET_PATH:
            self.transport, self.ip, self.cache_ports = "ipc", str(sockets), False
        return await super()._async_pre_start_kernel(**kw)

    def _fork(self) -> bool:
        if self.forked and not provisioner_installed():
            warn_once(self.log, "the trusted test kernels start from their command line, not forked: the course's "
                                 "kernel provisioner is not installed (`make install`, or `pip install -e .` in the "
                                 "course's folder, installs it)")
        return self.forked and provisioner_installed()

    def start_zygote(self) -> None:
        """Start the zygote the kernels of this manager are forked from (if they are), so that its imports
        run beside what the grader does before its first trusted kernel."""
        if self._fork():
            ZYGOTE.start_soon({**os.environ, **self.kernel_spec.env})

    def recipe(self) -> tuple:
        """What a kernel of this manager is started from (see GradingKernelManager.recipe)."""
        return (type(self).__name__, json.dumps(self.kernel_spec.to_dict(), sort_keys=True),
                tuple(sorted(os.environ.items())))
