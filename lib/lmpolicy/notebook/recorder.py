"""The student's kernel records what its check cells found: IPython hooks around every cell.

After each check cell the outcome goes to ``lmpolicy.notebook.progress``: passed (with
the answer cells it passed on), or failing with the check's own first line ("Check failed: ...", "Your code raised
an error: ...", "Not defined yet: ..."). A check that could not reach the answer (a name it calls is not defined
in this kernel: after a restart, or run before its answer cell) judged nothing, so it never takes away a pass.
After an answer cell runs with other code, the checks that passed on it read "changed". After a check cell, one ✗
line says when a cell this kernel ran is outside the grader's code rule. ``answer_runs`` watches every cell's run
(which run left each name: from the kernel's start in the student's JupyterLab, else from here on), so that a check
refuses an answer whose cell raised the last time it ran; that refusal judged nothing, so a pass stays, as after a
NameError. Nothing is hooked under the grader.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from lmpolicy.notebook import answer_runs, catalogue, kernel, name_advice, progress
from lmpolicy.notebook.answer_runs import LeftOver
from lmpolicy.notebook.code_rule_notice import say_outside_the_code_rule
from lmpolicy.notebook.failures import CheckFailed

DONE_CALL = re.compile(r"""\bdone\(\s*["']([A-Za-z0-9_]+)["']\s*\)""")  # what makes a cell a check cell


def saving(action) -> None:
    """Run a progress update; a file that cannot be written never fails a check."""
    try:
        action()
    except OSError as error:
        print(f"(your progress could not be saved to {progress.progress_file()}: {error})")


def checks_words(error: BaseException, namespace: dict | None = None) -> str:
    """A check cell's error in one line, in the words the cell showed: a failed check's heading and message, a
    NameError's advice, else the exception's type and first line."""
    if isinstance(error, CheckFailed):
        return error.first_line()
    if isinstance(error, NameError) and getattr(error, "name", None):
        advice = name_advice.undefined_name_advice(error.name, namespace or {}, in_a_check=True)
        return f"{name_advice.HEADING}: {advice.in_short()}"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


@dataclass(frozen=True)
class NotebookCells:
    """What the recorder needs of the kernel's notebook, as last saved: its answer cells and its check cells
    (``{cell id: exercise key}``), and its check cells' code (``{fingerprint: exercise key}``: a front end that
    sends no cell id, such as nbclient, runs the locked check cells' code as the notebook holds it)."""
    answers: dict[str, str]
    checks: dict[str, str]
    check_code: dict[str, str]

    @classmethod
    def read(cls, path: Path | None) -> NotebookCells:
        cells = []
        if path is not None:
            with contextlib.suppress(Exception):  # an unreadable notebook loses only what its cells would tell
                cells = progress.notebook_cells(path)
        tests = [cell for cell in cells if catalogue.is_check_cell(cell) and catalogue.GRADE_ID_SEPARATOR in
                 cell.metadata["nbgrader"].get("grade_id", "")]
        return cls(progress.answer_cells_of(cells),
                   {cell.id: catalogue.exercise_key(cell.metadata["nbgrader"]["grade_id"])
                    for cell in tests if getattr(cell, "id", None)},
                   {progress.fingerprint(cell.source): catalogue.exercise_key(cell.metadata["nbgrader"]["grade_id"])
                    for cell in tests})


class CellRecorder:
    """IPython hooks: after each check cell, record passed or failing; after an answer cell runs, mark checks
    that passed on other code for it as changed.

    A check cell is one the kernel's notebook marks as an autograded test (by the cell id JupyterLab sends, or by
    its code), one whose code calls ``done("key")``, or one that began an exercise's checks (``checks.checking``,
    which ``Exercise.check`` calls first: what tells a check cell wherever the kernel does not know its notebook);
    its exercises: the one of its grade id, of that call, of each ``checks.checking`` and of each ``checks.done``
    it reached (``passed_in_cell``).
    """

    def __init__(self, shell):
        self.shell = shell
        self.passed_in_cell: set[str] = set()
        self.checking_in_cell: set[str] = set()  # the exercises a check module said this cell checks
        self.cell_source = ""  # the cell running now
        self.cell_id: str | None = None
        self.ran: dict[str, str] = {}  # cell id -> fingerprint of the code it last ran
        self.check_code: set[str] = set()  # fingerprints of the check cells this kernel ran
        self._notebook: tuple[tuple | None, NotebookCells] | None = None
        self.answer_runs = answer_runs.watch(shell)  # which run of which cell left each name

    def notebook(self) -> NotebookCells:
        """The cells of this kernel's notebook (JupyterLab names it in JPY_SESSION_NAME), read again once saved."""
        path = kernel.notebook_path()
        stamp = None
        if path is not None:
            with contextlib.suppress(OSError):
                stamp = (path, path.stat().st_mtime_ns)
        if self._notebook is None or self._notebook[0] != stamp:
            self._notebook = (stamp, NotebookCells.read(path))
        return self._notebook[1]

    def answer_cells(self) -> dict[str, str]:
        """``{cell id: exercise key}`` of the answer cells of this kernel's notebook."""
        return self.notebook().answers

    def checked_keys(self, source: str, cell_id: str | None) -> list[str]:
        """The exercises the cell checks (none: it is not a check cell), in order."""
        cells = self.notebook()
        keys = [cells.checks.get(cell_id or ""), cells.check_code.get(progress.fingerprint(source)),
                *DONE_CALL.findall(source), *sorted(self.checking_in_cell), *sorted(self.passed_in_cell)]
        return [key for key in dict.fromkeys(keys) if key in progress.EXERCISES_BY_KEY]

    def in_a_check_cell(self) -> bool:
        cells = self.notebook()
        return (bool(DONE_CALL.search(self.cell_source)) or bool(self.checking_in_cell)
                or (self.cell_id or "") in cells.checks
                or progress.fingerprint(self.cell_source) in cells.check_code)

    def pre_run_cell(self, info) -> None:
        self.passed_in_cell.clear()
        self.checking_in_cell.clear()
        self.cell_source = getattr(info, "raw_cell", "") or ""
        self.cell_id = getattr(info, "cell_id", None)

    def post_run_cell(self, result) -> None:
        """Record what the cell's checks found; a failure here prints one line, never a traceback."""
        info = getattr(result, "info", None)
        if kernel.running_under_grader() or info is None or isinstance(result.error_in_exec, KeyboardInterrupt):
            return  # an interrupted check neither passed nor failed
        source, cell_id = info.raw_cell or "", getattr(info, "cell_id", None)
        try:
            keys = self.checked_keys(source, cell_id)
            self._record(result, source, cell_id, keys)
        except Exception as error:  # noqa: BLE001 - the record must never break the student's notebook
            print(f"(lmpolicy could not record this cell's checks: {type(error).__name__}: {error})")
            return
        if keys:
            say_outside_the_code_rule(self._history_but_check_cells())

    def _history_but_check_cells(self) -> list[tuple[int, str]]:
        """The cells this kernel ran, as typed (IPython's ``In``), the check cells left out (the grader runs its own)."""
        history = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", None) or []
        checks = self.check_code | set(self.notebook().check_code)
        return [(count, source) for count, source in enumerate(history)
                if not DONE_CALL.search(source) and progress.fingerprint(source) not in checks]

    def _record(self, result, source: str, cell_id: str | None, keys: list[str]) -> None:
        error = result.error_in_exec or result.error_before_exec
        if keys:
            check = progress.fingerprint(source)
            self.check_code.add(check)
            for key in keys:
                if isinstance(error, (NameError, LeftOver)):  # the check never judged the answer: a pass stays
                    words = checks_words(error, self.shell.user_ns)
                    saving(lambda: progress.record_unjudged(key, words, check))
                elif error is not None:
                    saving(lambda: progress.record_failure(key, checks_words(error), check))
                elif key in self.passed_in_cell:
                    saving(lambda: progress.record(key, check, self.answer_of(key)))
        elif cell_id:
            key = self.answer_cells().get(cell_id)
            fingerprint = progress.fingerprint(source)
            self.ran[cell_id] = fingerprint
            if key:
                saving(lambda: progress.record_answer_run(key, cell_id, fingerprint))

    def answer_of(self, key: str) -> dict[str, str]:
        """Fingerprints of the answer cells of ``key`` as this kernel last ran them."""
        return {cell: self.ran[cell] for cell, owner in self.answer_cells().items() if owner == key and cell in self.ran}


_RECORDER: CellRecorder | None = None


def install() -> CellRecorder | None:
    """Register the hooks once per IPython shell; None outside IPython or under the grader."""
    global _RECORDER
    shell = kernel.shell()
    if shell is None or kernel.running_under_grader():
        return None
    if _RECORDER is None or getattr(shell, "_lmpolicy_recorder", None) is not _RECORDER:
        _RECORDER = CellRecorder(shell)
        # installed by the cell running now (its first import of the checks, after a restart): that cell's hooks
        # did not run before it, so take its code from the history IPython stored as it began
        history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or [""]
        _RECORDER.cell_source = history[-1]
        shell.events.register("pre_run_cell", _RECORDER.pre_run_cell)
        shell.events.register("post_run_cell", _RECORDER.post_run_cell)
        recorder = _RECORDER
        name_advice.explain_name_errors(shell, lambda name, namespace: name_advice.undefined_name_advice(
            name, namespace, in_a_check=recorder.in_a_check_cell()))
        shell._lmpolicy_recorder = _RECORDER
    return _RECORDER
