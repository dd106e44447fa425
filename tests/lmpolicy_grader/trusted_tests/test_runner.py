"""trusted_tests.runner: a notebook's test and set-up cells in the trusted kernel, driven by GradingExecute."""
from __future__ import annotations

import nbformat
import pytest
from traitlets.config import Config

from lmpolicy_grader.cells import failed_line
from lmpolicy_grader.incidents import GradingFailed
from lmpolicy_grader.nbgrader_plugins.grading_execute import GradingExecute
from lmpolicy_grader.trusted_tests.runner import visible_part

pytestmark = pytest.mark.slow


def _cell(source: str, grade_id: str, *, test=False, locked=False):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": test, "solution": False, "locked": locked or test, "grade_id": grade_id,
                                 "schema_version": 3, **({"points": 1} if test else {})}
    return cell


def _answer(source: str, grade_id: str):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False, "grade_id": grade_id,
                                 "schema_version": 3}
    return cell


def _grade(tmp_path, cells):
    nb = nbformat.v4.new_notebook(cells=cells)
    execute = GradingExecute(config=Config({"GradingKernelManager": {"sandbox": False}}), spare_kernels=False)
    resources = {"nbgrader": {"notebook": "01_policy_softmax"}, "metadata": {"path": str(tmp_path)}}
    return execute.preprocess(nb, resources)[0]


def test_a_test_runs_in_the_trusted_kernel_against_the_submissions_function_and_records_the_failing_line(tmp_path):
    nb = _grade(tmp_path, [
        _cell("BASE = 10", "setup", locked=True),
        # t1's answer cell, in plain Python (the code rule refuses import os, which once showed the process here)
        _answer("def triple(x):\n    return 3 * x\nCALLS = []", "t1__answer"),
        _cell("CALLS.append(1)\nassert triple(2) == 6\nassert triple(BASE) == 31, 'off'", "t1", test=True),
    ])
    test = nb.cells[-1]
    errors = [o for o in test.outputs if o.output_type == "error"]
    assert [(e.ename, e.evalue) for e in errors] == [("AssertionError", "off")]
    assert failed_line(test) == 3


def test_a_set_up_cell_that_fails_in_the_trusted_kernel_fails_the_notebook_with_its_grade_id(tmp_path):
    with pytest.raises(GradingFailed) as failed:
        _grade(tmp_path, [_cell("import os\nassert os.environ.get('NBGRADER_EXECUTION') != 'autograde'", "setup",
                                locked=True)])
    assert "the set-up cell setup failed in the trusted test kernel" in failed.value.reason


def test_only_a_tests_visible_part_is_what_the_submission_may_hear_of():
    source = "check(f(1))\n### BEGIN HIDDEN TESTS\nassert f(SECRET_INPUT) == 4  # the hidden hint\n### END HIDDEN TESTS"
    assert visible_part(source) == "check(f(1))\n"
