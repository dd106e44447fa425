"""The trusted test runner: a notebook's test cells (and its locked set-up cells again) in a kernel of their own.

One runner serves one notebook. It runs cells in the notebook's trusted test kernel (from its
``kernels.notebook_kernels.NotebookKernels``, handed to a stock nbgrader ``Execute`` of its own as its ``km``), and talks to what the kernel loaded at
start (``in_kernel``) by name with data (``kernels.remote_call``): ``connect`` once, to reach the
submission's kernel; before each test ``outside_the_rule`` (the code rule, ``lmpolicy.notebook.code_rule``: a test it
refuses fails with its reason, as the grader's verdict, and never reaches the submission) and ``bind``,
with the test's visible part only, so that nothing of the hidden tests crosses to the submission's
process but the inputs of the calls themselves; and ``failed_line`` after a test that raised.
"""
from __future__ import annotations

import nbformat
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader import utils
from nbgrader.preprocessors import Execute

from lmpolicy.notebook import checks
from lmpolicy.notebook.catalogue import exercise_key
from lmpolicy_grader.cells import is_test, set_failed_line
from lmpolicy_grader.kernels import remote_call
from lmpolicy_grader.kernels.moving_in import TARGET as MOVING_IN
from lmpolicy_grader.kernels.notebook_kernels import TRUSTED, NotebookKernels
from lmpolicy_grader.kernels.output_cap import OutputCap
from lmpolicy_grader.kernels.trusted_kernel import IN_KERNEL_TARGET as TARGET
from lmpolicy_grader.incidents import GradingFailed

# Seconds a trusted test cell may take beyond the cell timeout its calls share (an interrupt's grace).
CELL_SLACK = 30
HIDDEN_TESTS = "### BEGIN HIDDEN TESTS"


def visible_part(source: str) -> str:
    """A test cell's source up to its hidden tests."""
    return source.split(HIDDEN_TESTS, 1)[0]


class CappedExecute(OutputCap, Execute):
    """nbgrader's Execute, with the grader's cap on what a cell may print."""


class TrustedTestRunner:
    """The trusted test kernel of one notebook, and the cells it runs."""

    def __init__(self, config, kernels: NotebookKernels, notebook: str, cell_timeout: int, startup_timeout: int,
                 log, student: dict | None = None, output_caps: dict | None = None):
        self.config, self.kernels, self.notebook, self.log = config, kernels, notebook, log
        self.student = student or {}  # the variables that say whose notebook it is (lmpolicy_grader.students)
        self.startup_timeout = startup_timeout
        self.cell_timeout = cell_timeout
        self.output_caps = output_caps or {}
        self.execute = self._execute(nbformat.v4.new_notebook())
        self.problem: str | None = None  # why the submission cannot be reached (every test then fails with it)
        self._connected = False
        self._ready = False

    def _execute(self, nb) -> CappedExecute:
        """A stock Execute of the trusted kernel, running the cells of ``nb`` (a copy, which it writes into)."""
        execute = CappedExecute(km=self.kernels.trusted.manager, config=self.config, allow_errors=True,
                                timeout=self.cell_timeout + CELL_SLACK, interrupt_on_timeout=True, **self.output_caps)
        execute.log, execute.notebook_name = self.log, self.notebook
        execute.nb.update(nb)
        return execute

    # --- the kernel ------------------------------------------------------------------------------

    def _client(self):
        """The kernel's client once it answers. A trusted kernel that died before it answered (a start-up
        crash: it has run nothing yet) is started again once; a second death makes the notebook FAILED."""
        if self._ready:
            return self.execute.kc
        for attempt in (1, 2):
            try:
                kc = self.execute.start_new_kernel_client()
            except RuntimeError as error:
                if "before replying to kernel_info" not in str(error):
                    raise
                if attempt == 2:
                    raise GradingFailed("trusted tests", f"the trusted test kernel died twice at start-up ({error})") from None
                self.log.warning("the trusted test kernel of %s died at start-up; starting it again", self.notebook)
                self.kernels.start_again(TRUSTED)
                self.execute = self._execute(self.execute.nb)
                continue
            self._ready = True
            if self.student:  # before any cell: the set-up cells and the tests see the student's variant
                self._call("become_student", self.startup_timeout, target=MOVING_IN, environment=self.student)
            return kc

    def _call(self, operation: str, seconds: float, target: str = TARGET, **arguments):
        try:
            return run_sync(remote_call.call)(self._client(), target, operation, seconds, **arguments)
        except remote_call.RemoteCallFailed as error:
            raise GradingFailed("trusted tests", f"the trusted test kernel could not {operation} ({error})") from None

    def connect(self, nb) -> None:
        """Open the channel to the submission's kernel (once, before the first test or set-up cell)."""
        if self._connected:
            return
        self._connected = True
        # a notebook of its own (nbclient writes each cell it runs back into it), holding the same cells
        self.execute.nb.update({**nb, "cells": list(nb.cells)})
        info = self.kernels.grading.manager.get_connection_info(session=False)
        info = {key: (value.decode() if isinstance(value, bytes) else value) for key, value in info.items()}
        sources = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code" and not is_test(c)]
        answers = [(i, exercise_key(c.metadata.nbgrader.grade_id)) for i, c in enumerate(nb.cells)
                   if c.cell_type == "code" and utils.is_solution(c) and c.metadata.nbgrader.get("grade_id")]
        self.problem = self._call("connect", self.cell_timeout + CELL_SLACK, info=info, sources=sources,
                                  cell_seconds=float(self.cell_timeout), answers=answers)

    # --- the cells -------------------------------------------------------------------------------

    def run_setup(self, cell, index: int, grade_id: str) -> None:
        """A locked set-up cell, run here too, so that the tests use trusted objects."""
        ran = self._run(cell.copy(), index, grade_id)
        errors = [out for out in ran.outputs if out.output_type == "error"]
        if errors:
            raise GradingFailed("trusted tests", f"the set-up cell {grade_id} failed in the trusted test kernel "
                                f"({errors[0].get('ename')}: {errors[0].get('evalue')})")

    def run_test(self, cell, index: int, grade_id: str):
        """A test cell, with the submission's current names bound through the channel; returns the cell
        with its outputs and, if it raised, ``failed_line``."""
        outside = self._call("outside_the_rule", self.cell_timeout + CELL_SLACK, test_source=cell.source,
                             cell_index=index, exercise=exercise_key(grade_id))
        if outside:
            cell.outputs = [_verdict(checks.LibraryShortcutUsed(outside))]
            return cell
        problem = self.problem or self._call("bind", self.cell_timeout + CELL_SLACK,
                                             cell_source=visible_part(cell.source), cell_index=index)
        if problem:
            cell.outputs = [_error("SubmissionUnreachable", problem)]
            return cell
        cell = self._run(cell, index, grade_id)
        if any(out.output_type == "error" for out in cell.outputs):
            line = self._call("failed_line", self.cell_timeout)
            if isinstance(line, int):
                set_failed_line(cell, line)
        return cell

    def _run(self, cell, index: int, grade_id: str):
        self._client()
        try:
            cell, _ = self.execute.preprocess_cell(cell, {}, index)
        except (DeadKernelError, CellTimeoutError) as error:
            raise GradingFailed("trusted tests", f"the trusted test kernel failed at {grade_id} ({error})") from None
        return cell

    def stop(self) -> None:
        """Close the client (the kernel is the notebook's ``NotebookKernels``' to stop)."""
        if self.execute.kc is not None:
            self.execute.kc.stop_channels()


def _verdict(failed: checks.CheckFailed):
    """A check that failed before the cell ran, as the cell's error: its verdict lines, as IPython shows them."""
    return nbformat.v4.new_output("error", ename=type(failed).__name__, evalue=str(failed),
                                  traceback=failed._render_traceback_())


def _error(ename: str, evalue: str):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])
