"""Feedback: the outputs a student handed in, never one their code made while it was graded.

While a notebook is graded, the tests call the submission's functions with their inputs, hidden ones included,
so anything the submission's process prints from then on can carry them: a print, an error message, a display
rewritten in place. So the feedback shows none of it. Each code cell but the tests shows the outputs it had in
the notebook the student handed in (``submitted/``, which no test ever touched: the student made them in their
own JupyterLab), when the cell's source there is the one graded; otherwise none. What the feedback adds is the
grader's own: the test cells' verdicts (made in the trusted kernel, see ``checks``), a demo's refusal (one of a
finite set, so it carries nothing recorded: ``lmpolicy.demos.refusals``), and, for a cell that raised while graded,
one line naming a builtin exception's type (``checks.shown_exception``). The instructor still sees every output
of the grading in the autograded notebook and in formgrader.
"""
from __future__ import annotations

import copy
import difflib
import json
from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Int, Unicode

from lmpolicy.notebook.checks import shown_exception
from lmpolicy_grader.cells import is_test

NOTE_ID = "lmpolicy-outputs-as-handed-in"


class OutputsAsHandedIn(NbGraderPreprocessor):
    """Feedback: each non-test code cell shows its outputs as handed in, plus the grader's own lines."""

    note = Unicode("The outputs in this feedback are those of your notebook as you handed it in; what your code printed "
                   "while it was graded is not part of the feedback. The checks' verdicts are the grader's.",
                   help="the note at the top of the feedback").tag(config=True)
    # a cell's figures as the student saw them (one of notebook 08's is about 100 kB of PNG), not a flood of print
    max_output_bytes = Int(1_000_000, help="handed-in output shown per cell; the rest is cut").tag(config=True)

    def preprocess(self, nb, resources):
        handed_in = _handed_in_outputs(nb, self._submitted(resources))
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or is_test(cell):
                continue
            graded = cell.get("outputs", [])
            refusals = [output for output in graded if _is_demo_refusal(output)]
            raised = [output.get("ename") for output in graded if output.get("output_type") == "error"]
            said = [] if refusals or not raised else [nbformat.v4.new_output(
                "stream", name="stderr", text=f"When graded, this cell raised {shown_exception(raised[0] or '')}.\n")]
            cell.outputs = [*self._capped(handed_in.get(index, [])), *refusals, *said]
        if not any(cell.get("id") == NOTE_ID for cell in nb.cells):
            note = nbformat.v4.new_markdown_cell(f"*{self.note}*")
            note["id"] = NOTE_ID
            nb.cells.insert(0, note)
        return nb, resources

    def _capped(self, outputs: list) -> list:
        """A handed-in cell's outputs up to ``max_output_bytes``: the student's own file could hold any amount."""
        kept, used = [], 0
        for output in outputs:
            used += len(json.dumps(output, default=str))
            if used > self.max_output_bytes:
                return [*kept, nbformat.v4.new_output("stream", name="stdout",
                                                      text=f"\n... output cut at {self.max_output_bytes} bytes ...\n")]
            kept.append(output)
        return kept

    def _submitted(self, resources) -> nbformat.NotebookNode | None:
        """The notebook as the student handed it in, or None (no such file: a course that removed ``submitted/``)."""
        names = resources.get("nbgrader") or {}
        if not all(names.get(key) for key in ("student", "assignment", "notebook")):
            return None
        course = CourseDirectory(config=self.config)
        path = Path(course.format_path(course.submitted_directory, names["student"], names["assignment"])) \
            / f"{names['notebook']}.ipynb"
        try:
            return nbformat.read(path, as_version=4)
        except (OSError, ValueError, nbformat.reader.NotJSONError):
            self.log.warning("the feedback of %s shows no outputs: %s cannot be read", names["notebook"], path)
            return None


def _handed_in_outputs(nb, handed_in) -> dict[int, list]:
    """Cell index in ``nb`` -> the outputs of the handed-in cell of the same kind and source, paired in order
    (cells the grader restored or rewrote have no partner, and show none)."""
    if handed_in is None:
        return {}
    graded = [(cell.cell_type, cell.source) for cell in nb.cells]
    submitted = [(cell.cell_type, cell.source) for cell in handed_in.cells]
    pairs = {}
    for block in difflib.SequenceMatcher(None, graded, submitted, autojunk=False).get_matching_blocks():
        for offset in range(block.size):
            cell = handed_in.cells[block.b + offset]
            if cell.cell_type == "code":
                pairs[block.a + offset] = copy.deepcopy(list(cell.get("outputs", [])))
    return pairs


def _is_demo_refusal(output) -> bool:
    """An error output that is, line for line, a demo's refusal of one of its members."""
    if output.get("output_type") != "error" or output.get("ename") != "DemoNotAvailableWhileGrading":
        return False
    from lmpolicy.demos.refusals import every_member_refusal  # ipywidgets and matplotlib: only when needed

    return tuple(output.get("traceback", ())) in every_member_refusal()
