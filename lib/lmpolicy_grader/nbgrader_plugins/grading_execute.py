"""Autograding: stock ``Execute`` in the limited grading kernel, its test cells in a trusted one.

On top of nbgrader's ``Execute``: a per-notebook cell timeout and wall-clock budget, an allowlist of the kernel
messages that may become outputs and a cap on them per cell and per notebook, enforced while they stream
(``kernels.output_cap``: no display update, no widget state), hidden inputs drawn for this very submission
(``students.submission_digest``), and a clear reason when the kernel dies or stops responding. The test
cells never reach the grading kernel: the notebook's ``TrustedTestRunner`` runs them (and the locked
set-up cells again) in a trusted kernel of its own, which reaches the submission's functions and
values only through the channel. Nothing the submission does in its own kernel (input or AST
transformers, tracers, rebinding numpy, torch, builtins or the check helpers, fake output) is then
in the tests' process.

Both kernels come from the notebook's ``kernels.notebook_kernels.NotebookKernels`` (the spares started for
it when they fit), and the next notebook's are started once this one's grading kernel is ready. nbclient
runs the grading kernel it is handed as ``preprocess``'s ``km``. The limits are the defaults of the traits
below; nbgrader_config.py sets only what differs per notebook.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from traitlets import Bool, Dict, Int, Integer

from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute
from nbgrader.utils import setenv

from lmpolicy_grader.cells import is_locked_setup, is_test
from lmpolicy_grader.incidents import WHY_A_KERNEL_DIES, GradingFailed, Incident, note
from lmpolicy_grader.kernels import remote_call
from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager
from lmpolicy_grader.kernels.moving_in import TARGET as MOVING_IN
from lmpolicy_grader.kernels.notebook_kernels import GRADING, NotebookKernels, start_spares
from lmpolicy_grader.kernels.output_cap import OutputCap
from lmpolicy_grader.kernels.trusted_kernel import TrustedKernelManager
from lmpolicy_grader.students import kernel_environments, submission_digest
from lmpolicy_grader.trusted_tests.runner import TrustedTestRunner

# What jupyter_client raises when a kernel dies before it answers kernel_info (no cell has run in it yet).
DIED_AT_START_UP = "before replying to kernel_info"


class GradingExecute(OutputCap, Execute):
    """Stock Execute in the limited grading kernel; the test cells in the notebook's trusted test runner."""

    # Under NBGRADER_EXECUTION no ch11 cell needs more than 30 s and no notebook more than 60 s (08:
    # 120 s); the defaults leave 2x headroom for a slow machine, nbgrader_config.py raises them for 08.
    timeout = Integer(60, allow_none=True, help="seconds a cell may run before it is interrupted").tag(config=True)
    interrupt_on_timeout = Bool(True, help="interrupt a cell past its timeout (and go on)").tag(config=True)
    cell_timeouts = Dict({}, help="per-notebook cell timeout in seconds, e.g. {'08_tinylm_reinforce': 120}").tag(config=True)
    default_budget = Int(180, help="wall-clock budget (s) of a notebook not in notebook_budgets; past it the "
                                   "notebook is FAILED (timeout)").tag(config=True)
    notebook_budgets = Dict({}, help="per-notebook wall-clock budget in seconds").tag(config=True)
    probe_timeout = Int(10, help="seconds a kernel may take to answer after a timeout interrupt").tag(config=True)
    spare_kernels = Bool(True, help="while a notebook is graded, start the kernels of the next one (kernels.spares), "
                                    "each used for one notebook only").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", GradingKernelManager)
        super().__init__(*args, **kwargs)
        TrustedKernelManager(config=self.config).start_zygote()

    def preprocess(self, nb, resources=None, km=None):
        """Grade ``nb`` in the kernels of its ``NotebookKernels`` (``km`` is not used: they come from there)."""
        self.notebook_name = resources["nbgrader"]["notebook"]
        self.timeout = int(self.cell_timeouts.get(self.notebook_name, self.timeout))
        self._budget = self.notebook_budgets.get(self.notebook_name, self.default_budget)
        self._deadline = time.monotonic() + float(self._budget)
        self.reset_output_cap()
        folder = Path(resources.get("metadata", {}).get("path") or os.getcwd())
        self._kernels = self._tests = None
        # the hidden inputs are drawn for this very submission: a changed one (a table of inputs it read) gets new ones
        self._student, trusted_student = kernel_environments(self.config, CourseDirectory(config=self.config).root,
                                                             resources["nbgrader"].get("student"),
                                                             submission_digest(nb, folder))
        try:
            self._kernels = NotebookKernels(self.config, self.notebook_name, folder, self._grading_manager,
                                            self._kernel_arguments(), self.spare_kernels)
            self._tests = TrustedTestRunner(self.config, self._kernels, self.notebook_name, self.timeout,
                                            self.startup_timeout, self.log, student=trusted_student,
                                            output_caps=self._output_caps())
            return self._preprocess_in_a_kernel_that_starts(nb, resources)
        except GradingFailed as failure:
            note(Incident.FAILED, self.notebook_name, str(failure))
            raise
        finally:
            try:
                if self._tests is not None:
                    self._tests.stop()
                if self.kc is not None:  # nbclient leaves the client of a kernel it was handed open
                    self.kc.stop_channels()
            finally:
                if self._kernels is not None:
                    self._kernels.stop()

    def _preprocess_in_a_kernel_that_starts(self, nb, resources):
        """nbclient's run of the notebook in the grading kernel. One that died before it answered kernel_info
        (no cell of the submission has run yet: a start-up crash, e.g. on a machine short of memory) is
        started again once, and a second death makes the notebook FAILED with that reason."""
        try:
            return super().preprocess(nb, resources, km=self._kernels.grading.manager)
        except RuntimeError as error:
            if DIED_AT_START_UP not in str(error):
                raise
        self.log.warning("the grading kernel of %s died at start-up; starting it again", self.notebook_name)
        km = self._kernels.start_again(GRADING).manager
        try:
            return super().preprocess(nb, resources, km=km)
        except RuntimeError as error:
            if DIED_AT_START_UP not in str(error):
                raise
            said = km.error_output() if hasattr(km, "error_output") else ""
            raise GradingFailed("kernel died", "the grading kernel died twice at start-up, before any cell "
                                f"ran ({error})" + (f"; it said: {said}" if said else "")) from None

    def _grading_manager(self):
        return self.kernel_manager_class(config=self.config)

    def _output_caps(self) -> dict:
        """What the trusted runner's own Execute may keep of a cell's output: the grading kernel's caps."""
        return {"max_output_bytes": self.max_output_bytes, "max_notebook_output_bytes": self.max_notebook_output_bytes}

    def _kernel_arguments(self) -> list[str]:
        """The arguments nbclient gives a kernel it starts (it adds the history file to ``extra_arguments``
        the first time, so they are read from here, not from ``extra_arguments`` itself)."""
        arguments = list(self.extra_arguments)
        if not any(argument.startswith("--HistoryManager.hist_file") for argument in arguments):
            arguments.append(f"--HistoryManager.hist_file={self.ipython_hist_file}")
        return arguments

    def start_first_spares(self) -> None:
        """Start the kernels of this process's first notebook now, at the worker's start-up, as each notebook
        starts the next one's: the first notebook then waits for no kernel to import torch either."""
        if not self.spare_kernels:
            return
        with setenv(NBGRADER_EXECUTION="autograde"):  # as nbgrader's Autograde runs every notebook's kernels
            self._start_spares(lambda: start_spares(self.config, self._grading_manager, self._kernel_arguments()),
                               "the worker's start-up")

    def _start_spares(self, start, after: str) -> None:
        """Start the kernels of the next notebook. A spare only saves the next notebook time: one that
        cannot start costs it that time, never this notebook."""
        try:
            start()
        except Exception as error:
            self.log.warning("the kernels of the notebook after %s could not be started ahead (%s: %s); "
                             "it starts its own", after, type(error).__name__, error)

    async def async_start_new_kernel_client(self):
        """The grading kernel's client. A spare kernel first takes its notebook folder's files; the kernel
        then learns whose notebook it runs (``students``), and the next notebook's spares start."""
        arguments = await self._kernels.move_in()
        kc = await super().async_start_new_kernel_client()
        if arguments is not None:
            await self._move_in(kc, "take_files", "take the notebook folder's files", **arguments)
        if self._student:
            await self._move_in(kc, "become_student", "take its student's variables", environment=self._student)
        self._start_spares(self._kernels.start_next, self.notebook_name)
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # nbclient's sync setup_kernel calls this

    async def _move_in(self, kc, operation: str, what: str, **arguments) -> None:
        """The kernel takes what its notebook needs (``kernels.moving_in``) before any cell of the notebook runs."""
        try:
            await remote_call.call(kc, MOVING_IN, operation, self.startup_timeout, **arguments)
        except remote_call.RemoteCallFailed as error:
            raise GradingFailed("kernel", f"the grading kernel could not {what} ({error})") from None

    def preprocess_cell(self, cell, resources, index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        if cell.cell_type == "code" and time.monotonic() > self._deadline:
            raise GradingFailed("timeout", f"the notebook ran past its {self._budget} s budget (at {grade_id})")
        if is_test(cell):
            self._tests.connect(self.nb)
            cell = self._tests.run_test(cell, index, grade_id)
            if not self._kernels.grading.alive():
                raise GradingFailed("kernel died", f"the kernel died while {grade_id} called into it "
                                    f"({WHY_A_KERNEL_DIES})")
            return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            raise GradingFailed("kernel died", f"the kernel died while running {grade_id} "
                                f"({WHY_A_KERNEL_DIES})") from None
        except CellTimeoutError:  # nbclient gave up waiting for the cell's output after an interrupt
            raise GradingFailed("timeout", f"{grade_id} ran past {self.timeout} s and did not stop when interrupted") from None
        if any(out.get("ename") == "CellTimeoutError" for out in cell.get("outputs", []) if out.output_type == "error"):
            note(Incident.CELL_TIMEOUT, self.notebook_name, f"{grade_id} ran past {self.timeout} s and was interrupted", grade_id)
            self._probe(grade_id)
        if is_locked_setup(cell):
            self._tests.connect(self.nb)
            self._tests.run_setup(cell, index, grade_id)
        return cell, resources

    def _probe(self, grade_id: str) -> None:
        """After a timeout interrupt: does the kernel answer again? If not, stop grading it."""
        msg_id = self.kc.execute("", silent=True, store_history=False)
        saved, self.timeout = self.timeout, self.probe_timeout
        try:
            reply = self.wait_for_reply(msg_id)
        except DeadKernelError:
            raise GradingFailed("kernel died", f"the kernel died ({WHY_A_KERNEL_DIES})") from None
        finally:
            self.timeout = saved
        if reply is None:
            raise GradingFailed("timeout", f"{grade_id} ran past {self.timeout} s and did not stop when interrupted")
