"""kernels.notebook_kernels: a notebook's two kernels from one place, handed to nbclient through its own door."""
from __future__ import annotations

import ast
from pathlib import Path

from jupyter_core.utils import run_sync
from traitlets.config import Config

import lmpolicy_grader
from lmpolicy_grader.kernels import spares
from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager
from lmpolicy_grader.kernels.notebook_kernels import GRADING, TRUSTED, NotebookKernels

GRADER = Path(lmpolicy_grader.__file__).parent


def test_the_grader_never_sets_an_nbclient_clients_kernel_by_hand():
    """nbclient is handed a kernel as the ``km`` it is made or run with; no ``x.km = ...`` nor ``x.kc = ...``."""
    offenders = []
    for path in sorted(GRADER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                for element in (target.elts if isinstance(target, ast.Tuple) else [target]):
                    if isinstance(element, ast.Attribute) and element.attr in ("km", "kc"):
                        offenders.append(f"{path.relative_to(GRADER)}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not offenders, offenders


def test_a_notebooks_kernels_start_run_start_again_and_stop_together(tmp_path):
    config = Config({"GradingKernelManager": {"sandbox": False}})
    served = dict(spares.SERVED)
    kernels = NotebookKernels(config, "01_policy_softmax", tmp_path, lambda: GradingKernelManager(config=config),
                              [], use_spares=False)
    try:
        started = {GRADING: kernels.grading, TRUSTED: kernels.trusted}
        assert all(kernel.alive() for kernel in started.values())
        assert run_sync(kernels.move_in)() is None  # a kernel started for its notebook has nothing to take
        again = kernels.start_again(GRADING)
        assert again is kernels.grading and again is not started[GRADING]
        assert not started[GRADING].alive() and again.alive()
    finally:
        kernels.stop()
    assert not kernels.grading.alive() and not kernels.trusted.alive()
    assert dict(spares.SERVED) == served  # with spares off, none is taken
