"""The two kernels of one notebook, from one place: the spares started for it when they fit, else new ones.

A notebook is graded with two kernels: the sandboxed grading kernel (``grading_kernel``), which runs the
submission, and the trusted test kernel (``trusted_kernel``), which runs its tests. ``NotebookKernels`` gives one
notebook both: for each kind, the spare started ahead for it (``spares``) if it fits, else one started now; a
kernel that died at start-up replaced (``start_again``); both stopped after the notebook (``stop``). nbclient gets
each kernel's manager through its own door, the ``km`` a ``NotebookClient`` is made or run with
(``Execute.preprocess(nb, resources, km)`` for the grading kernel, the trusted runner's ``Execute(km=...)``), and
makes its client itself. ``start_spares`` starts the kernels of the next notebook.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync

from lmpolicy_grader.isolation import library_view
from lmpolicy_grader.kernels import spares
from lmpolicy_grader.kernels.trusted_kernel import TrustedKernelManager

GRADING, TRUSTED = "grading", "trusted"


def start_trusted_kernel(config) -> spares.Kernel:
    """A trusted kernel, starting, in an empty folder of its own (the notebook's folder holds the
    submission's files, and a torch.py there would be imported by `import torch`)."""
    km, folder = TrustedKernelManager(config=config), tempfile.TemporaryDirectory(prefix="lmpolicy-trusted-tests-")
    kernel = spares.Kernel(km, km.recipe(), folder)
    with kernel.stopped_if_it_fails():
        run_sync(km.start_kernel)(cwd=folder.name)
    return kernel


def grading_recipe(km, kernel_arguments: list[str]) -> tuple | None:
    """What a spare grading kernel must have been started from to serve a notebook graded with ``km``'s
    kind of kernel and these arguments (None: a manager that says nothing of it never uses spares)."""
    return (*km.recipe(), *kernel_arguments) if hasattr(km, "recipe") else None


def start_spares(config, grading_manager: Callable[[], AsyncKernelManager], kernel_arguments: list[str]) -> None:
    """Start the two kernels of the next notebook, each a spare waiting for it (``spares.start_spare``)."""
    km = grading_manager()
    recipe = grading_recipe(km, kernel_arguments)
    if recipe is None:
        return

    def start_grading_kernel() -> spares.Kernel:
        kernel = spares.Kernel(km, recipe)
        with kernel.stopped_if_it_fails():
            run_sync(km.start_for_a_later_notebook)(extra_arguments=list(kernel_arguments))
        return kernel
    spares.start_spare(GRADING, start_grading_kernel)  # first: it imports torch, the trusted one is forked
    spares.start_spare(TRUSTED, lambda: start_trusted_kernel(config))


class NotebookKernels:
    """The grading and the trusted kernel of one notebook."""

    def __init__(self, config, notebook: str, folder: Path, grading_manager: Callable[[], AsyncKernelManager],
                 kernel_arguments: list[str], use_spares: bool):
        self.config, self.folder, self.use_spares = config, folder, use_spares
        self._grading_manager, self._kernel_arguments = grading_manager, kernel_arguments
        self.grading: spares.Kernel | None = None
        self.trusted: spares.Kernel | None = None
        library_view.grading(notebook)  # the grading kernel, started or moved in after this, shows its library view
        try:
            self.trusted = self._spare(TRUSTED, TrustedKernelManager(config=config).recipe())
            self.trusted = self.trusted or start_trusted_kernel(config)
            spare = self._spare(GRADING, grading_recipe(grading_manager(), kernel_arguments))
            if spare is not None and not spare.manager.can_take(folder):
                spare.stop()
                spare = None
            self._moves_in = spare is not None
            self.grading = spare or self._start_grading_kernel()
        except BaseException:
            self.stop()
            raise

    def _spare(self, kind: str, recipe: tuple | None) -> spares.Kernel | None:
        return spares.take(kind, recipe) if self.use_spares and recipe is not None else None

    def _start_grading_kernel(self) -> spares.Kernel:
        """A grading kernel started now in the notebook's folder, as nbclient would start it."""
        km = self._grading_manager()
        kernel = spares.Kernel(km, ())
        with kernel.stopped_if_it_fails():
            run_sync(km.start_kernel)(extra_arguments=list(self._kernel_arguments), cwd=str(self.folder))
        return kernel

    async def move_in(self) -> dict | None:
        """Before nbclient's client connects: a grading kernel started ahead of its notebook takes the
        notebook's folder; returns the arguments of ``moving_in.take_files`` (None: nothing to take)."""
        moves_in, self._moves_in = self._moves_in, False
        return await self.grading.manager.move_in(self.folder) if moves_in else None

    def start_again(self, kind: str) -> spares.Kernel:
        """Stop the kernel of ``kind`` (it died at start-up) and start a new one in its place."""
        if kind == GRADING:
            self.grading.stop()
            self._moves_in = False
            self.grading = self._start_grading_kernel()
            return self.grading
        self.trusted.stop()
        self.trusted = start_trusted_kernel(self.config)
        return self.trusted

    def start_next(self) -> None:
        """Start the next notebook's kernels (now that this one's grading kernel is ready)."""
        if self.use_spares:
            start_spares(self.config, self._grading_manager, self._kernel_arguments)

    def stop(self) -> None:
        """Stop both kernels (a notebook's kernels serve it only)."""
        try:
            if self.trusted is not None:
                self.trusted.stop()
        finally:
            if self.grading is not None:
                self.grading.stop()
