"""Feedback: an answer no one has graded yet reads "not graded yet", never "Score: 0.0 / 2.0".

nbgrader's ``GetGrades`` copies each cell's score from the gradebook into the notebook, and a written
answer that waits for a grader has score 0 there; feedback released before manual grading would tell
the student they got nothing. ``ShowPendingGrades`` runs after ``GetGrades``: each grade cell that still
needs a manual grade gets the score ``PendingScore("not graded yet")``, and the notebook's total says how
many points are still to be graded.

nbgrader's feedback template writes every score through Jinja's ``float`` and ``round`` filters, which
would turn any text into 0.0; ``PENDING_AWARE_FILTERS`` are the same filters except that they pass a
``PendingScore`` through unchanged (``c.HTMLExporter.filters`` in nbgrader_config.py installs them).
Every other value renders exactly as before.
"""
from __future__ import annotations

from jinja2.filters import do_float, do_round
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor


class PendingScore(str):
    """A score that is not a number yet: shown as its text."""


def pending_float(value, default=0.0):
    return value if isinstance(value, PendingScore) else do_float(value, default)


def pending_round(value, precision=0, method="common"):
    return value if isinstance(value, PendingScore) else do_round(value, precision, method)


# by import name, so the configuration stays plain text (formgrader shows it)
PENDING_AWARE_FILTERS = {name: f"{__name__}.{function.__name__}" for name, function in
                         [("float", pending_float), ("round", pending_round)]}


def is_pending(grade) -> bool:
    """An answer that waits for a grader (the report's "pending manual" uses the same rule)."""
    return bool(grade.needs_manual_grade) and grade.manual_score is None


class ShowPendingGrades(NbGraderPreprocessor):
    """After GetGrades: "not graded yet" for every answer that waits for a grader, and in the notebook's total."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        pending_points = 0.0
        with Gradebook(info["db_url"]) as gradebook:
            for cell in nb.cells:
                if not (utils.is_grade(cell) or utils.is_task(cell)):
                    continue
                grade = gradebook.find_grade(cell.metadata.nbgrader["grade_id"], info["notebook"],
                                             info["assignment"], info["student"])
                if is_pending(grade):
                    cell.metadata.nbgrader["score"] = PendingScore("not graded yet")
                    pending_points += grade.max_score
        if pending_points:
            info["score"] = PendingScore(f"{float(info['score']):g} so far, {pending_points:g} points not graded yet")
        return nb, resources
