"""nbgrader preprocessors that close the holes of stock nbgrader 0.9.6 (see docs/instructors.md).

- ``DeduplicateGradeIds`` (sanitizing): a duplicated cell no longer fails the whole notebook.
- ``RestoreDeletedCells`` (sanitizing): puts back every cell a student deleted except answer cells
  (locked and grade cells from the gradebook, with their hidden tests; plain set-up and example
  code cells from the release, by cell id), at its place in the release (stock nbgrader restores
  grade cells only: not a deleted locked import cell, nor an unlocked one).
- ``GradingExecute`` (autograding): stock ``Execute`` plus a per-notebook cell timeout and time
  budget, a cap on output, the tamper guard before each test cell, and a clear reason when the
  kernel dies or stops responding.
- ``HideHiddenTests`` (feedback): removes hidden tests from test cells and the hidden assertion
  lines from their tracebacks, keeping the failure message.

What went wrong while grading is appended to ``INCIDENTS`` for the grader's report.
"""
from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import nbformat
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from traitlets import Dict, Int, Unicode

from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import ClearHiddenTests, DeduplicateIds, Execute, NbGraderPreprocessor

from lmpolicy_grader.kernel import GradingKernelManager

INCIDENTS: list[dict] = []  # this process's record of what happened, read and cleared by the grader


class GradingFailed(Exception):
    """The notebook cannot be graded; the message is the reason shown to the instructor."""

    def __init__(self, kind: str, reason: str):
        super().__init__(f"{kind}: {reason}")
        self.kind, self.reason = kind, reason


def exercise_of(grade_id: str) -> str:
    """``ex11_1a__tests`` -> ``ex11_1a`` (the part before ``__``)."""
    return grade_id.split("__", 1)[0]


def _note(kind: str, notebook: str, message: str, cell: str | None = None) -> None:
    INCIDENTS.append({"kind": kind, "notebook": notebook, "cell": cell, "message": message})


def is_autograded_test(cell) -> bool:
    return cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


def _release_cells(root: str, assignment: str, notebook: str) -> list:
    for folder in ("release", "source"):
        path = Path(root) / folder / assignment / f"{notebook}.ipynb"
        if path.exists():
            return nbformat.read(path, as_version=4).cells
    return []


def _key(cell):
    """A cell's identity across release and submission: its grade id, else its nbformat cell id."""
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
    return grade_id if grade_id else ("id", cell.get("id"))


class RestoreDeletedCells(NbGraderPreprocessor):
    """Re-add every cell of the release a student deleted, except answer cells, where the release had it.

    Locked and grade cells come from the gradebook (test cells with their hidden tests). Plain code
    cells of the release (set-up, worked examples) are found by their nbformat cell id, when the
    submission carries the release's ids; a deleted import cell then no longer fails a correct answer.
    """

    course_root = Unicode("", help="course folder holding release/<assignment>/ (cell order)").tag(config=True)
    notice = Unicode("This cell was missing from your submission; the grader put it back.").tag(config=True)

    def preprocess(self, nb, resources):
        notebook, assignment = resources["nbgrader"]["notebook"], resources["nbgrader"]["assignment"]
        release = _release_cells(self.course_root, assignment, notebook)
        with Gradebook(resources["nbgrader"]["db_url"]) as gradebook:
            source_notebook = gradebook.find_notebook(notebook, assignment)
            max_scores = {cell.name: cell.max_score for cell in source_notebook.grade_cells}
            solutions = {cell.name for cell in source_notebook.solution_cells}
            wanted = {cell.name: self._graded_cell(cell, max_scores.get(cell.name), cell.name in solutions)
                      for cell in source_notebook.source_cells if cell.locked or cell.name in max_scores}
        present = [_key(c) for c in nb.cells]
        if {c.get("id") for c in nb.cells} & {c.get("id") for c in release} - {None}:  # ids of the release
            wanted.update({_key(c): self._plain_cell(c) for c in release
                           if c.cell_type == "code" and isinstance(_key(c), tuple) and c.get("id")})
        order = [_key(c) for c in release] or list(wanted)
        for position, key in enumerate(order):
            if key not in wanted or key in present:
                continue
            previous = [k for k in order[:position] if k in present]
            at = present.index(previous[-1]) + 1 if previous else 0
            nb.cells.insert(at, wanted[key])
            present.insert(at, key)
            name = key if isinstance(key, str) else f"cell {key[1]}"
            self.log.warning("Restored deleted %s", name)
            _note("restored", notebook, f"deleted {name} put back", key if isinstance(key, str) else None)
        return nb, resources

    def _plain_cell(self, release_cell):
        cell = nbformat.v4.new_code_cell(f"{release_cell.source}\n# {self.notice}")
        cell["id"] = release_cell["id"]
        return cell

    def _graded_cell(self, source_cell, max_score, is_solution):
        metadata = {"grade": max_score is not None, "grade_id": source_cell.name, "locked": source_cell.locked,
                    "solution": is_solution, "schema_version": 3, "task": False}
        if max_score is not None:
            metadata["points"] = max_score
        if source_cell.cell_type == "code":
            # the notice goes last: a cell magic must stay on the first line
            cell = nbformat.v4.new_code_cell(f"{source_cell.source}\n# {self.notice}")
        else:
            cell = nbformat.v4.new_markdown_cell(f"*{self.notice}*\n\n{source_cell.source}")
            if is_solution:  # a deleted answer comes back as the blank stub: it scores "no response"
                cell.source = source_cell.source
        cell.metadata["nbgrader"] = metadata
        if not is_solution:
            cell.metadata.update(editable=False, deletable=False)
        metadata["checksum"] = utils.compute_checksum(cell) if is_solution else source_cell.checksum
        return cell


class DeduplicateGradeIds(DeduplicateIds):
    """Stock DeduplicateIds (the last copy of a duplicated cell keeps its grade id), except that the
    earlier copies lose their nbgrader metadata entirely: stock leaves an empty ``nbgrader: {}``,
    which nbgrader 0.9.6 then rejects as "an old version of the metadata", failing the notebook."""

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.metadata.get("nbgrader") == {}:
            del cell.metadata["nbgrader"]
            _note("duplicate", resources["nbgrader"]["notebook"], "a duplicated cell lost its grade id (the last copy keeps it)")
        return cell, resources


def _names_in(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return sorted({node.id for node in ast.walk(tree) if isinstance(node, ast.Name)})


class GradingExecute(Execute):
    """Stock Execute in the limited grading kernel, with a guard before every test cell."""

    cell_timeouts = Dict({}, help="per-notebook cell timeout in seconds, e.g. {'08_tinylm_reinforce': 120}").tag(config=True)
    notebook_budgets = Dict({}, help="per-notebook wall-clock budget in seconds").tag(config=True)
    default_budget = Int(300, help="wall-clock budget of a notebook not in notebook_budgets").tag(config=True)
    max_output_bytes = Int(100_000, help="output kept per cell; the rest is dropped while it streams").tag(config=True)
    probe_timeout = Int(10, help="seconds a kernel may take to answer after a timeout interrupt").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", GradingKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):
        self._notebook = resources["nbgrader"]["notebook"]
        self.timeout = int(self.cell_timeouts.get(self._notebook, self.timeout))
        self._deadline = time.monotonic() + float(self.notebook_budgets.get(self._notebook, self.default_budget))
        self._tampered: dict[str, str] = {}
        self._output_bytes: dict[int, int] = {}
        try:
            return super().preprocess(nb, resources, km)
        except GradingFailed as failure:
            _note("failed", self._notebook, str(failure))
            raise

    def preprocess_cell(self, cell, resources, index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        if cell.cell_type == "code" and time.monotonic() > self._deadline:
            raise GradingFailed("timeout", f"the notebook ran past its {self.notebook_budgets.get(self._notebook, self.default_budget)} s budget (at {grade_id})")
        if is_autograded_test(cell):
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
        if any(out.output_type == "error" and out.get("ename") == "CellTimeoutError" for out in cell.get("outputs", [])):
            _note("cell timeout", self._notebook, f"{grade_id} ran past {self.timeout} s and was interrupted", grade_id)
            self._probe(grade_id)
        return cell, resources

    def _tamper_reason(self, cell, grade_id: str) -> str | None:
        exercise = exercise_of(grade_id)
        if exercise in self._tampered:
            return self._tampered[exercise]
        found = json.loads(self._kernel_expression(
            f"__import__('lmpolicy_grader.guard', fromlist=['verdict']).verdict({_names_in(cell.source)!r})", grade_id))
        if not found:
            return None
        reason = (f"the notebook changed what the tests rely on ({'; '.join(found)}), so the tests of {exercise} "
                  "cannot be trusted: it scores 0. The originals were put back for the exercises after it.")
        self._tampered[exercise] = reason
        _note("tampering", self._notebook, reason, grade_id)
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

    def _kernel_expression(self, expression: str, grade_id: str) -> str:
        msg_id = self.kc.execute("", silent=True, store_history=False, user_expressions={"value": expression})
        reply = self._reply(msg_id, self.timeout)
        if reply is None:
            raise GradingFailed("timeout", f"the kernel stopped answering before {grade_id}")
        value = reply["content"].get("user_expressions", {}).get("value", {})
        if value.get("status") != "ok":
            return json.dumps([f"the tamper guard could not run ({value.get('ename')}: {value.get('evalue')})"])
        return ast.literal_eval(value["data"]["text/plain"])

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
                _note("output cut", self._notebook, f"cell {cell_index} printed more than {self.max_output_bytes} bytes")
            return None
        return super().output(outs, msg, display_id, cell_index)


class HideHiddenTests(ClearHiddenTests):
    """Feedback: hidden tests removed from the cell, and from the traceback of its failure."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not utils.is_grade(cell) or cell.cell_type != "code":
            return cell, resources
        had_hidden = self._remove_hidden_test_region(cell)
        if had_hidden:
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}",
                                        "(the check that failed is one of the hidden tests; its message is above)"]
        return cell, resources
