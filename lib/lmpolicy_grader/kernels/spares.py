"""Kernels started before their notebook is known, so that a notebook finds its kernels ready.

A grading worker grades one notebook at a time, with two kernels: the sandboxed grading kernel and
the trusted test kernel. Starting one (Python, ipykernel, numpy and torch) takes over a second, as
long as a short notebook's cells. So while a notebook is graded, the kernels of the next one start
beside it, and a worker's start-up starts those of its first: one spare of each kind per worker
process. A spare serves one notebook only and is stopped after it, so nothing of one submission
reaches the next; a spare that does not fit (its kernel died, it was started with other limits, its
sandbox would show the notebook's folder) is stopped, and the notebook starts its own kernel as if
there were no spares. Spares start only while another notebook is expected in this process
(``expect_next_notebook``): the grader says so with each task, so that the last notebooks of a class
leave no kernels started for nothing.
"""
from __future__ import annotations

import atexit
import contextlib
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync


@dataclass
class Kernel:
    """A started kernel, what it was started from (``recipe``), and the folder it works in if it owns one."""
    manager: AsyncKernelManager
    recipe: tuple
    folder: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    def alive(self) -> bool:
        return run_sync(self.manager.is_alive)()

    @contextlib.contextmanager
    def stopped_if_it_fails(self):
        """Around the kernel's start: if it raises, stop what it started (a process, a sandbox) and re-raise."""
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise

    def stop(self) -> None:
        """Stop the kernel now and remove what it leaves (its sandbox, its folder)."""
        try:
            with contextlib.suppress(RuntimeError):  # "No kernel is running!": it died on its own
                run_sync(self.manager.shutdown_kernel)(now=True)
            run_sync(self.manager.cleanup_resources)()
        finally:
            if self.folder is not None:
                self.folder.cleanup()


_SPARES: dict[str, Kernel] = {}  # kind ("grading", "trusted") -> started for the next notebook
SERVED: Counter = Counter()      # kind -> notebooks a spare served in this process
_next_notebook_expected = True   # see expect_next_notebook


def take(kind: str, recipe: tuple) -> Kernel | None:
    """The spare kernel of ``kind`` if it was started from ``recipe`` and is alive; None otherwise
    (a spare that does not fit is stopped). Take it for one notebook, then ``Kernel.stop`` it."""
    spare = _SPARES.pop(kind, None)
    if spare is not None and not (spare.recipe == recipe and spare.alive()):
        spare.stop()
        spare = None
    SERVED[kind] += spare is not None
    return spare


def expect_next_notebook(expected: bool) -> None:
    """Say whether this process will grade another notebook after the one it grades now (default: yes)."""
    global _next_notebook_expected
    _next_notebook_expected = expected


def start_spare(kind: str, start: Callable[[], Kernel]) -> None:
    """Have a kernel of ``kind`` started by ``start`` wait for the next notebook (unless one already
    waits, or no next notebook is expected)."""
    if kind not in _SPARES and _next_notebook_expected:
        _SPARES[kind] = start()


@atexit.register
def stop_spares() -> None:
    """Stop every spare (when the worker process ends, or before a test that counts kernels)."""
    while _SPARES:
        _, spare = _SPARES.popitem()
        with contextlib.suppress(Exception):
            spare.stop()
