"""Autograding: stock ``Execute`` in the limited grading kernel, with the guards a class needs.

On top of nbgrader's ``Execute``: a per-notebook cell timeout and wall-clock budget, a cap on output
enforced while it streams, a clear reason when the kernel dies or stops responding, and, for a test
cell that fails, the line of the cell that raised (``failed_line``, read by ``HideHiddenTests`` to
tell a failing visible check from a hidden test).

The test cells of a notebook in ``trusted_notebooks`` never reach the grading kernel: they run in a
trusted kernel of their own (``kernel.TrustedKernelManager``), started beside the grading kernel,
which also runs the locked set-up cells and reaches the submission's functions and values only
through the channel (``trusted_tests.py``, answered by ``call_server.py`` in the grading kernel).
Nothing the submission does in its own kernel (input or AST transformers, tracers, rebinding
numpy, torch, builtins or the check helpers, fake output) is then in the tests' process. For the
other notebooks the tests run in the grading kernel as before, with the tamper guard asked before
each test cell.

The limits are the defaults of the traits below; nbgrader_config.py sets only what differs per notebook.
"""
from __future__ import annotations

import ast
import json
import os
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from traitlets import Bool, Dict, Enum, Int, Integer, List, Unicode

from nbgrader import utils
from nbgrader.preprocessors import Execute

from lmpolicy.progress import exercise_key
from lmpolicy_grader import kernel_pool
from lmpolicy_grader.kernel import GradingKernelManager, TrustedKernelManager
from lmpolicy_grader.preprocessors.incidents import GradingFailed, Incident, note

# Where a failed test cell's metadata records the line (1-based, in the cell) that raised.
FAILED_LINE = ("lmpolicy_grader", "failed_line")
# Evaluated in the kernel right after a cell raised: the cell's own frame is the second of the
# traceback IPython keeps (the first is IPython's run_code).
_FAILED_LINE_EXPRESSION = ("(lambda tb: tb.tb_next.tb_lineno if tb is not None and tb.tb_next is not None else None)"
                           "(getattr(__import__('sys'), 'last_traceback', None))")


# The notebooks whose tests run in the trusted process (the others: in the grading kernel, guarded).
# 07 waits for the corpus test that expects its rebinding of check_close to be caught as tampering:
# in the trusted process that rebinding changes nothing, and the wrong answer simply scores 0.
TRUSTED_NOTEBOOKS = ["01_policy_softmax", "02_temperature", "03_three_stages", "04_two_mdp_views",
                     "05_tilted_optimum", "06_kl_estimators", "07_logprob_plumbing", "08_tinylm_reinforce"]
# Seconds a trusted test cell may take beyond the cell timeout its calls share (an interrupt's grace).
TRUSTED_CELL_SLACK = 30


def _start_trusted_kernel(config) -> kernel_pool.Kernel:
    """A trusted kernel, starting, in an empty folder of its own (the notebook's folder holds the
    submission's files, and a torch.py there would be imported by `import torch`)."""
    km, folder = TrustedKernelManager(config=config), tempfile.TemporaryDirectory(prefix="lmpolicy-trusted-tests-")
    kernel = kernel_pool.Kernel(km, km.recipe(), folder)
    with kernel.stopped_if_it_fails():
        run_sync(km.start_kernel)(cwd=folder.name)
    return kernel


def is_autograded_test(cell) -> bool:
    return cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


def is_locked_setup(cell) -> bool:
    """A locked code cell that is neither an answer nor a test: imports and data the tests may use."""
    nbgrader = cell.metadata.get("nbgrader", {})
    return (cell.cell_type == "code" and nbgrader.get("locked", False) and not utils.is_grade(cell)
            and not utils.is_solution(cell))


def failed_line(cell) -> int | None:
    """The line of an autograded test cell that raised, as GradingExecute recorded it (None if unknown)."""
    return cell.metadata.get(FAILED_LINE[0], {}).get(FAILED_LINE[1])


def _names_in(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return sorted({node.id for node in ast.walk(tree) if isinstance(node, ast.Name)})


class GradingExecute(Execute):
    """Stock Execute in the limited grading kernel, with a guard before every test cell."""

    # Under NBGRADER_EXECUTION no ch11 cell needs more than 30 s and no notebook more than 60 s (08:
    # 120 s); the defaults leave 2x headroom for a slow machine, nbgrader_config.py raises them for 08.
    timeout = Integer(60, allow_none=True, help="seconds a cell may run before it is interrupted").tag(config=True)
    interrupt_on_timeout = Bool(True, help="interrupt a cell past its timeout (and go on)").tag(config=True)
    cell_timeouts = Dict({}, help="per-notebook cell timeout in seconds, e.g. {'08_tinylm_reinforce': 120}").tag(config=True)
    default_budget = Int(180, help="wall-clock budget (s) of a notebook not in notebook_budgets; past it the "
                                   "notebook is FAILED (timeout)").tag(config=True)
    notebook_budgets = Dict({}, help="per-notebook wall-clock budget in seconds").tag(config=True)
    max_output_bytes = Int(100_000, help="output kept per cell; the rest is dropped while it streams").tag(config=True)
    probe_timeout = Int(10, help="seconds a kernel may take to answer after a timeout interrupt").tag(config=True)
    tests_in_trusted_process = Bool(True, help="run the test cells of trusted_notebooks in a trusted kernel of "
                                               "their own, which reaches the submission only through the "
                                               "channel").tag(config=True)
    trusted_notebooks = List(Unicode(), TRUSTED_NOTEBOOKS,
                             help="notebooks whose test cells run in the trusted process (the others run them "
                                  "in the grading kernel, with the tamper guard)").tag(config=True)
    spare_kernels = Bool(True, help="while a notebook is graded, start the kernels of the next one (kernel_pool), "
                                    "each used for one notebook only").tag(config=True)
    # A grading kernel is thrown away after its notebook: killing it beats asking it to shut down.
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", GradingKernelManager)
        super().__init__(*args, **kwargs)
        if self.tests_in_trusted_process:
            TrustedKernelManager(config=self.config).start_zygote()

    def preprocess(self, nb, resources=None, km=None):
        self._notebook = resources["nbgrader"]["notebook"]
        self.timeout = int(self.cell_timeouts.get(self._notebook, self.timeout))
        self._budget = self.notebook_budgets.get(self._notebook, self.default_budget)
        self._deadline = time.monotonic() + float(self._budget)
        self._tampered: dict[str, str] = {}
        self._output_bytes: dict[int, int] = {}
        self._trusted = self.tests_in_trusted_process and self._notebook in self.trusted_notebooks
        self._trusted_kernel: kernel_pool.Kernel | None = None
        self._trusted_kc = None
        self._channel_problem: str | None = None
        self._folder = Path(resources.get("metadata", {}).get("path") or os.getcwd())
        self._spare = self._moving_in = self._grading_recipe = None
        try:
            if self._trusted:
                recipe = TrustedKernelManager(config=self.config).recipe()
                trusted = kernel_pool.take("trusted", recipe) if self.spare_kernels else None
                self._trusted_kernel = trusted or _start_trusted_kernel(self.config)
            self._grading_recipe = self._recipe(self._new_grading_kernel_manager())
            if self._grading_recipe is not None:
                self._spare = kernel_pool.take("grading", self._grading_recipe)
            if self._spare is not None and not self._spare.manager.can_take(self._folder):
                self._spare.stop()
                self._spare = None
            return super().preprocess(nb, resources, km)
        except GradingFailed as failure:
            note(Incident.FAILED, self._notebook, str(failure))
            raise
        finally:
            self._stop_trusted_kernel()
            if self._spare is not None:  # taken but never used (grading stopped before the kernel started)
                self._spare.stop()

    # --- the grading kernel: started for this notebook, or a spare started while the last one was graded

    def _new_grading_kernel_manager(self):
        km = self.kernel_manager_class(config=self.config)
        if isinstance(km, GradingKernelManager):
            km.tamper_guard = not self._trusted
        return km

    def _recipe(self, km) -> tuple | None:
        """What a spare grading kernel must have been started from to serve this notebook (None: no spares)."""
        if not self.spare_kernels or not hasattr(km, "recipe"):
            return None
        return (*km.recipe(), *self._kernel_arguments())

    def _kernel_arguments(self) -> list[str]:
        """The arguments nbclient gives a kernel it starts (it adds the history file to ``extra_arguments``
        the first time, so they are read from here, not from ``extra_arguments`` itself)."""
        arguments = list(self.extra_arguments)
        if not any(argument.startswith("--HistoryManager.hist_file") for argument in arguments):
            arguments.append(f"--HistoryManager.hist_file={self.ipython_hist_file}")
        return arguments

    def _start_spares(self) -> None:
        """Start the kernels of the next notebook (now that this one's grading kernel is ready). A spare
        only saves the next notebook time: one that cannot start costs it that time, never this notebook."""
        if self._grading_recipe is None:
            return

        def start_grading_kernel() -> kernel_pool.Kernel:
            km = self._new_grading_kernel_manager()
            kernel = kernel_pool.Kernel(km, self._recipe(km))
            with kernel.stopped_if_it_fails():
                run_sync(km.start_for_a_later_notebook)(extra_arguments=self._kernel_arguments())
            return kernel
        try:
            if self._trusted:
                kernel_pool.start_spare("trusted", lambda: _start_trusted_kernel(self.config))
            kernel_pool.start_spare("grading", start_grading_kernel)
        except Exception as error:
            self.log.warning("the kernels of the notebook after %s could not be started ahead (%s: %s); "
                             "it starts its own", self._notebook, type(error).__name__, error)

    def create_kernel_manager(self):
        spare, self._spare = self._spare, None
        if spare is None:
            self.km = self._new_grading_kernel_manager()
        else:  # started already: nbclient sees it has a kernel, only connects to it, and stops it after
            self.km, self._moving_in = spare.manager, spare.manager.move_in
        return self.km

    async def async_start_new_kernel_client(self):
        """The grading kernel's client. A spare kernel first takes its notebook folder's files. A kernel
        that died before it answered kernel_info (no cell of the submission has run yet: a start-up
        crash, e.g. on a machine short of memory) is started again once, and a second death makes the
        notebook FAILED with that reason. Then the next notebook's spares start."""
        move_in, self._moving_in = self._moving_in, None
        code = await move_in(self._folder) if move_in is not None else None
        try:
            kc = await super().async_start_new_kernel_client()
        except RuntimeError as error:
            if "before replying to kernel_info" not in str(error):
                raise
            self.log.warning("the grading kernel of %s died at start-up; starting it again", self._notebook)
            self.km, code = self.create_kernel_manager(), None
            await self.async_start_new_kernel()
            try:
                kc = await super().async_start_new_kernel_client()
            except RuntimeError as error:
                raise GradingFailed("kernel died", "the grading kernel died twice at start-up, before any cell "
                                    f"ran ({error})") from None
        if code is not None:
            await self._move_in(kc, code)
        self._start_spares()
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # nbclient's sync setup_kernel calls this

    async def _move_in(self, kc, code: str) -> None:
        """Run ``code`` (the kernel taking its notebook folder's files) before any cell of the notebook."""
        reply = await kc.execute_interactive(code, silent=True, store_history=False, timeout=self.startup_timeout)
        if reply["content"].get("status") != "ok":
            raise GradingFailed("kernel", "the grading kernel could not take the notebook folder's files "
                                f"({reply['content'].get('ename')}: {reply['content'].get('evalue')})")

    def preprocess_cell(self, cell, resources, index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        if cell.cell_type == "code" and time.monotonic() > self._deadline:
            raise GradingFailed("timeout", f"the notebook ran past its {self._budget} s budget (at {grade_id})")
        if self._trusted and is_autograded_test(cell):
            return self._run_trusted_test(cell, resources, index, grade_id)
        if not self._trusted and is_autograded_test(cell):
            reason = self._tamper_reason(cell, grade_id)
            if reason:
                cell.outputs = [nbformat.v4.new_output("error", ename="TamperingDetected", evalue=reason,
                                                       traceback=[f"TamperingDetected: {reason}"])]
                return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            raise GradingFailed("kernel died", f"the kernel died while running {grade_id} "
                                "(os._exit, a crash, or the memory/CPU limit)") from None
        except CellTimeoutError:  # nbclient gave up waiting for the cell's output after an interrupt
            raise GradingFailed("timeout", f"{grade_id} ran past {self.timeout} s and did not stop when interrupted") from None
        errors = [out for out in cell.get("outputs", []) if out.output_type == "error"]
        if any(out.get("ename") == "CellTimeoutError" for out in errors):
            note(Incident.CELL_TIMEOUT, self._notebook, f"{grade_id} ran past {self.timeout} s and was interrupted", grade_id)
            self._probe(grade_id)
        elif errors and is_autograded_test(cell):
            self._record_failed_line(cell, grade_id)
        if self._trusted and is_locked_setup(cell):
            self._run_in_trusted_kernel(cell.source, grade_id)
        return cell, resources

    # --- the trusted test kernel -------------------------------------------------------------------

    @property
    def _trusted_km(self):
        return self._trusted_kernel.manager if self._trusted_kernel is not None else None

    def _trusted_client(self):
        """The trusted kernel's client, connected to it and (through it) to the grading kernel."""
        if self._trusted_kc is None:
            self._trusted_kc = self._ready_trusted_client()
            info = self.km.get_connection_info(session=False)
            info = {key: (value.decode() if isinstance(value, bytes) else value) for key, value in info.items()}
            sources = [(i, c.source) for i, c in enumerate(self.nb.cells)
                       if c.cell_type == "code" and not is_autograded_test(c)]
            self._channel_problem = self._trusted_value(
                f"__import__('lmpolicy_grader.trusted_tests', fromlist=['connect']).connect("
                f"{info!r}, {sources!r}, {float(self.timeout)!r})", "the channel")
        return self._trusted_kc

    def _ready_trusted_client(self):
        """A client of the trusted kernel once it answers. A trusted kernel that died before it answered
        (a start-up crash: it has run nothing yet) is started again once; a second death makes the
        notebook FAILED with that reason."""
        for attempt in (1, 2):
            kc = self._trusted_km.client()
            kc.start_channels()
            try:
                run_sync(kc.wait_for_ready)(timeout=self.startup_timeout)
                return kc
            except RuntimeError as error:
                kc.stop_channels()
                if "before replying to kernel_info" not in str(error):
                    raise
                if attempt == 2:
                    raise GradingFailed("trusted tests", f"the trusted test kernel died twice at start-up ({error})") from None
                self.log.warning("the trusted test kernel of %s died at start-up; starting it again", self._notebook)
                self._trusted_kernel.stop()
                self._trusted_kernel = _start_trusted_kernel(self.config)

    def _trusted_value(self, expression: str, what: str):
        """``expression`` evaluated in the trusted kernel (a Python literal); GradingFailed if it raises."""
        kc = self._trusted_kc
        msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"value": expression})
        reply = self._trusted_reply(msg_id, self.timeout + TRUSTED_CELL_SLACK)
        value = reply["content"].get("user_expressions", {}).get("value", {}) if reply else {}
        if value.get("status") != "ok":
            raise GradingFailed("trusted tests", f"the trusted test kernel could not set up {what} "
                                f"({value.get('ename')}: {value.get('evalue')})")
        return ast.literal_eval(value["data"]["text/plain"])

    def _trusted_reply(self, msg_id: str, seconds: float):
        saved = self.kc, self.km
        self.kc, self.km = self._trusted_kc, self._trusted_km
        try:
            return self._reply(msg_id, int(seconds))
        finally:
            self.kc, self.km = saved

    def _run_in_trusted_kernel(self, source: str, grade_id: str) -> None:
        """A locked set-up cell, run in the trusted kernel too, so that the tests use trusted objects."""
        kc = self._trusted_client()
        reply = self._trusted_reply(kc.execute(source, silent=True, store_history=False), self.timeout)
        if reply is None or reply["content"].get("status") != "ok":
            error = reply["content"].get("evalue") if reply else "no reply"
            raise GradingFailed("trusted tests", f"the set-up cell {grade_id} failed in the trusted test kernel ({error})")

    def _run_trusted_test(self, cell, resources, index: int, grade_id: str):
        """A test cell in the trusted kernel, with the submission's current names bound through the channel."""
        self._trusted_client()
        problem = self._channel_problem or self._trusted_value(
            f"__import__('lmpolicy_grader.trusted_tests', fromlist=['bind']).bind(get_ipython().user_ns, {cell.source!r}, {index})",
            "the submission's names")
        if problem:
            cell.outputs = [nbformat.v4.new_output("error", ename="SubmissionUnreachable", evalue=problem,
                                                   traceback=[f"SubmissionUnreachable: {problem}"])]
            return cell, resources
        saved = self.kc, self.km, self.timeout
        self.kc, self.km, self.timeout = self._trusted_kc, self._trusted_km, self.timeout + TRUSTED_CELL_SLACK
        try:
            cell, resources = Execute.preprocess_cell(self, cell, resources, index)
            if any(out.output_type == "error" for out in cell.get("outputs", [])):
                self._record_failed_line(cell, grade_id)
        except (DeadKernelError, CellTimeoutError) as error:
            raise GradingFailed("trusted tests", f"the trusted test kernel failed at {grade_id} ({error})") from None
        finally:
            self.kc, self.km, self.timeout = saved
        if not run_sync(self.km.is_alive)():
            raise GradingFailed("kernel died", f"the kernel died while {grade_id} called into it "
                                "(os._exit, a crash, or the memory/CPU limit)")
        return cell, resources

    def _stop_trusted_kernel(self) -> None:
        if self._trusted_kc is not None:
            self._trusted_kc.stop_channels()
        try:
            if self._trusted_kernel is not None:
                self._trusted_kernel.stop()
        finally:
            self._trusted_kernel = self._trusted_kc = None

    def _record_failed_line(self, cell, grade_id: str) -> None:
        line, _ = self._kernel_value(_FAILED_LINE_EXPRESSION, grade_id)
        if isinstance(line, int):
            cell.metadata.setdefault(FAILED_LINE[0], {})[FAILED_LINE[1]] = line

    def _tamper_reason(self, cell, grade_id: str) -> str | None:
        exercise = exercise_key(grade_id)
        if exercise in self._tampered:
            return self._tampered[exercise]
        verdict, error = self._kernel_value(
            f"__import__('lmpolicy_grader.guard', fromlist=['verdict']).verdict({_names_in(cell.source)!r})", grade_id)
        found = json.loads(verdict) if error is None else [f"the tamper guard could not run ({error})"]
        if not found:
            return None
        reason = (f"the notebook changed what the tests rely on ({'; '.join(found)}), so the tests of {exercise} "
                  "cannot be trusted: it scores 0. The originals were put back for the exercises after it.")
        self._tampered[exercise] = reason
        note(Incident.TAMPERING, self._notebook, reason, grade_id)
        return reason

    def _reply(self, msg_id: str, seconds: int):
        """The kernel's reply to ``msg_id`` within ``seconds`` (None if it does not answer)."""
        saved, self.timeout = self.timeout, seconds
        try:
            return self.wait_for_reply(msg_id)
        except DeadKernelError:
            raise GradingFailed("kernel died", "the kernel died (os._exit, a crash, or the memory/CPU limit)") from None
        finally:
            self.timeout = saved

    def _kernel_value(self, expression: str, grade_id: str) -> tuple[object, str | None]:
        """``expression`` evaluated in the kernel: (its value, a Python literal; None) or (None, the error)."""
        msg_id = self.kc.execute("", silent=True, store_history=False, user_expressions={"value": expression})
        reply = self._reply(msg_id, self.timeout)
        if reply is None:
            raise GradingFailed("timeout", f"the kernel stopped answering before {grade_id}")
        value = reply["content"].get("user_expressions", {}).get("value", {})
        if value.get("status") != "ok":
            return None, f"{value.get('ename')}: {value.get('evalue')}"
        return ast.literal_eval(value["data"]["text/plain"]), None

    def _probe(self, grade_id: str) -> None:
        """After a timeout interrupt: does the kernel answer again? If not, stop grading it."""
        if self._reply(self.kc.execute("", silent=True, store_history=False), self.probe_timeout) is None:
            raise GradingFailed("timeout", f"{grade_id} ran past {self.timeout} s and did not stop when interrupted")

    def output(self, outs, msg, display_id, cell_index):
        size = len(json.dumps(msg.get("content", {})))
        used = self._output_bytes.get(cell_index, 0)
        self._output_bytes[cell_index] = used + size
        if used + size > self.max_output_bytes:
            if used <= self.max_output_bytes:
                outs.append(nbformat.v4.new_output("stream", name="stdout",
                                                   text=f"\n... output cut at {self.max_output_bytes} bytes by the grader ...\n"))
                note(Incident.OUTPUT_CUT, self._notebook, f"cell {cell_index} printed more than {self.max_output_bytes} bytes")
            return None
        return super().output(outs, msg, display_id, cell_index)
