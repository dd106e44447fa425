"""HideOutputAfterFirstTest: the feedback shows no output of a code cell after the first test cell."""
from __future__ import annotations

import nbformat
from traitlets.config import Config

from lmpolicy_grader.preprocessors.hide_output_after_first_test import HideOutputAfterFirstTest


def _notebook():
    def code(source, text, test=False):
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        if test:
            cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "t", "points": 1}
        return cell
    return nbformat.v4.new_notebook(cells=[code("print('before')", "before\n"), code("check()", "✓ passed\n", test=True),
                                           nbformat.v4.new_markdown_cell("text"), code("print(seen)", "hidden input 42\n")])


def _texts(nb):
    return [[o.get("text") for o in c.get("outputs", [])] for c in nb.cells]


def test_output_after_the_first_test_is_replaced_by_a_note_and_the_rest_kept():
    nb, _ = HideOutputAfterFirstTest().preprocess(_notebook(), {})
    note = HideOutputAfterFirstTest.note.default_value + "\n"
    assert _texts(nb) == [["before\n"], ["✓ passed\n"], [], [note]]


def test_a_course_may_show_it():
    nb, _ = HideOutputAfterFirstTest(config=Config({"HideOutputAfterFirstTest": {"enabled": False}})).preprocess(_notebook(), {})
    assert _texts(nb)[-1] == ["hidden input 42\n"]


def _error_cell(ename, traceback):
    cell = nbformat.v4.new_code_cell("answer = demo.readouts()")
    cell.outputs = [nbformat.v4.new_output("error", ename=ename, evalue="", traceback=list(traceback))]
    return cell


def test_a_demos_refusal_stays_and_nothing_dressed_as_one():
    from lmpolicy.demos.base import refusal

    real = refusal("TiltingDemo", "readouts()")._render_traceback_()
    carrying = refusal("TiltingDemo", "readouts() 0.3172 0.8841")._render_traceback_()  # a recorded input inside
    nb = _notebook()
    nb.cells += [_error_cell("DemoNotAvailableWhileGrading", real),
                 _error_cell("DemoNotAvailableWhileGrading", carrying),
                 _error_cell("ValueError", real)]
    nb, _ = HideOutputAfterFirstTest().preprocess(nb, {})
    kept = [[o.get("traceback") for o in c.outputs if o.output_type == "error"] for c in nb.cells[-3:]]
    assert kept == [[real], [], []]
    assert all(c.outputs[0].text == HideOutputAfterFirstTest.note.default_value + "\n" for c in nb.cells[-3:])
