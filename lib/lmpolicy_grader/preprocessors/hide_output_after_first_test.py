"""Feedback: nothing the submission's process printed after its first test ran.

The tests call the submission's functions with their inputs, hidden ones included, so a submission can
record them and print them in a later cell. Its feedback shows no output of a code cell after the first
test cell (a short note instead); the instructor still sees every output in the autograded notebook and
in formgrader. One output is kept: a demo's refusal to hand out numbers (lmpolicy.demos.base), the one
reason an answer cell fails only under the grader; there is one such refusal per demo and member, so it
carries nothing the submission recorded. A course that wants the student to see them sets ``c.HideOutputAfterFirstTest.enabled = False``.
"""
from __future__ import annotations

import nbformat
from traitlets import Bool, Unicode

from nbgrader.preprocessors import NbGraderPreprocessor

from lmpolicy_grader.cells import is_test


class HideOutputAfterFirstTest(NbGraderPreprocessor):
    """Feedback: a note in place of the output of every non-test code cell after the first test cell."""

    enabled = Bool(True, help="hide, in the feedback, the output of the code cells after the first test cell").tag(config=True)
    note = Unicode("(the output of cells after the first test is not part of the feedback)",
                   help="shown in place of a hidden output").tag(config=True)

    def preprocess(self, nb, resources):
        if not self.enabled:
            return nb, resources
        tested = False
        for cell in nb.cells:
            if is_test(cell):
                tested = True
            elif tested and cell.cell_type == "code" and cell.get("outputs"):
                kept = [output for output in cell.outputs if _is_demo_refusal(output)]
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=self.note + "\n"), *kept]
        return nb, resources


def _is_demo_refusal(output) -> bool:
    """An error output that is, line for line, a demo's refusal of one of its members."""
    if output.get("output_type") != "error" or output.get("ename") != "DemoNotAvailableWhileGrading":
        return False
    from lmpolicy.demos.base import every_member_refusal  # ipywidgets and matplotlib: only when needed

    return tuple(output.get("traceback", ())) in every_member_refusal()
