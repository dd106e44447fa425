"""A hidden test that calls a student's function draws part of its inputs from the hidden seed
(``lmpolicy.per_student.hidden_inputs``), so a table of answers read from one feedback is of no use to the next submission.

Exercise 11.10's hidden tests were fixed panels: a ``disagreeing_temperatures`` that looked the panels up
in a table kept full marks at every re-grade. They now also grade a panel drawn from the hidden seed. The
test cell is trusted code that needs no kernel: it runs here in-process, as the grader's trusted kernel
would, with ``NBGRADER_EXECUTION`` and ``LMPOLICY_HIDDEN_INPUTS`` set.

The other exercises whose hidden parts hold no drawn input (02 11.2(b); 05 11.5(b), 11.7(b), 11.8(b), 11.9(a-c);
06 11.4(c-d), 11.9(d)) are answered by values, not functions: the hidden test has nothing to call with a drawn
input, and the per-student ones already differ per student (lmpolicy.per_student.variants).
"""
from __future__ import annotations

import copy
import math

import pytest

from lmpolicy.notebook import checks
from lmpolicy.per_student.hidden_inputs import HIDDEN_INPUTS_VARIABLE

from .notebook_tools import SOURCE_DIR, grade_id, read

NOTEBOOK = SOURCE_DIR / "08_tinylm_reinforce.ipynb"


def _cell(name: str) -> str:
    (source,) = [cell.source for cell in read(NOTEBOOK).cells if grade_id(cell) == name]
    return source


def _reference():
    """The reference ``disagreeing_temperatures`` of the source notebook's answer cell (``math`` from its set-up)."""
    namespace: dict = {"math": math}
    exec(compile(_cell("ex11_10__disagreeing_temperatures"), "answer", "exec"), namespace)
    return namespace["disagreeing_temperatures"]


def _grade(answer, monkeypatch, submission_value: str) -> None:
    """Run 11.10's whole test cell (visible checks and hidden tests) on ``answer`` for one submission's value."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv(HIDDEN_INPUTS_VARIABLE, submission_value)
    exec(compile(_cell("ex11_10__tests"), "ex11_10__tests", "exec"),
         {"__name__": "__main__", "disagreeing_temperatures": answer})


def _calls_with(monkeypatch, submission_value: str) -> list:
    """The (panel, n_sigma) the test cell calls the reference with, in order, for one submission's value."""
    reference, calls = _reference(), []

    def recording(panel, n_sigma=2.0):
        calls.append((copy.deepcopy(panel), n_sigma))
        return reference(panel, n_sigma=n_sigma)

    _grade(recording, monkeypatch, submission_value)
    return calls


def test_two_submissions_get_different_hidden_panels_and_one_submission_the_same(monkeypatch):
    first = _calls_with(monkeypatch, "student-a:digest-1")
    assert first == _calls_with(monkeypatch, "student-a:digest-1"), "a re-grade of the same submission changed inputs"
    changed = _calls_with(monkeypatch, "student-a:digest-2")
    assert len(first) == len(changed)
    assert first != changed, "11.10's hidden tests call disagreeing_temperatures on the same panels for any submission"
    drawn = [call for call in first if call not in changed]
    assert drawn and all(len(panel) >= 3 for panel, _ in drawn)


def test_a_lookup_table_of_one_feedback_fails_the_next_submission(monkeypatch):
    # what a student could tabulate: every panel one grading calls with and the right answer for it
    leaked = {repr((panel, n_sigma)): _reference()(panel, n_sigma=n_sigma)
              for panel, n_sigma in _calls_with(monkeypatch, "student-a:digest-1")}

    def lookup_table(panel, n_sigma=2.0):
        return dict(leaked.get(repr((panel, n_sigma)), {}))

    _grade(lookup_table, monkeypatch, "student-a:digest-1")  # the table answers the grading it was read from
    with pytest.raises(checks.CheckFailed, match="disagreeing_temperatures"):
        _grade(lookup_table, monkeypatch, "student-a:digest-2")  # the table is a changed submission: new panels


@pytest.mark.parametrize("value", [f"student-{i}:digest" for i in range(40)])
def test_the_reference_passes_every_drawn_panel(monkeypatch, value):
    _grade(_reference(), monkeypatch, value)
