"""``nbgrader export`` that never shows a failed submission as a silent zero.

Stock nbgrader writes one row per student and assignment with the gradebook's score; a notebook that
could not be graded (invalid JSON, a kernel that died, a timeout) simply adds 0 to it. This exporter
writes the same columns and two more:

* ``status``: what is still open, worst first (``lmpolicy_grader.class_grading.report.student_summaries``):
  ``FAILED``, ``notebooks missing``, ``pending manual grading``, ``complete``; ``missing`` when nothing
  was submitted. Only ``complete`` rows are final grades.
* ``open``: in words, what keeps the row from being complete (which notebooks failed or are missing,
  how many answers wait for a grader);
* ``problems``: for a FAILED row, which notebooks failed, why, and what to do about it.

A notebook is FAILED when the last grading (``grading_status.json``, written by ``python -m lmpolicy_grader
grade``) failed it, or when it exists in ``submitted/`` but the gradebook has no submission for it (stock
``nbgrader autograde`` gave up). A FAILED row's score is the score of its other notebooks so far: the
failed one adds nothing, and no 0 stands in for it; empty when no notebook was graded. Such students get a row even when the gradebook has
never heard of them, which stock nbgrader leaves out. nbgrader_config.py makes it the default
exporter; it writes ``nbgrader_export.csv`` unless ``--to`` says otherwise (``grades.csv`` is the
per-exercise table of ``python -m lmpolicy_grader``).
"""
from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import CsvExportPlugin

from lmpolicy_grader.class_grading.course import Outcome, load_outcomes
from lmpolicy_grader.class_grading.report import exercise_rows, failed_advice, student_summaries
from lmpolicy_grader.class_grading.status import Status

DEFAULT_DESTINATION = "nbgrader_export.csv"


def student_outcomes(gradebook, course_root: Path, assignment: str, student: str, graded: dict) -> list[Outcome]:
    """The last grading's outcomes of ``student``; a notebook it never graded (stock ``nbgrader autograde``,
    or not at all) as the gradebook and ``submitted/`` show it."""
    notebooks = [n.name for n in gradebook.find_assignment(assignment).notebooks]
    in_gradebook = _in_gradebook(gradebook, assignment, student)
    outcomes = []
    for notebook in notebooks:
        if (student, notebook) in graded:
            outcomes.append(graded[(student, notebook)])
        elif not (course_root / "submitted" / student / assignment / f"{notebook}.ipynb").exists():
            outcomes.append(Outcome(student, notebook, Status.MISSING, "not submitted"))
        elif in_gradebook:
            outcomes.append(Outcome(student, notebook, Status.GRADED))
        else:
            outcomes.append(Outcome(student, notebook, Status.FAILED,
                                    "submitted, but not in the gradebook: autograding failed (see its log)"))
    return outcomes


def _in_gradebook(gradebook, assignment: str, student: str) -> bool:
    try:
        gradebook.find_submission(assignment, student)
    except MissingEntry:
        return False
    return True


class StatusCsvExportPlugin(CsvExportPlugin):
    """nbgrader's CSV export plus ``status``, ``open`` and ``problems`` columns (see the module docstring)."""

    def export(self, gradebook) -> None:
        self.to = self.to or DEFAULT_DESTINATION
        super().export(gradebook)
        course_root = Path(self.parent.coursedir.root) if self.parent is not None else Path.cwd()
        graded = {(o.student, o.notebook): o for o in load_outcomes(course_root)}
        with open(self.to, newline="") as handle:
            reader = csv.DictReader(handle)
            rows, fieldnames = list(reader), list(reader.fieldnames or []) + ["status", "open", "problems"]
        # nbgrader lists only the gradebook's students: one whose every notebook failed is not there at all
        listed = {(row["assignment"], row["student_id"]) for row in rows}
        for assignment in self.assignment or [a.name for a in gradebook.assignments]:
            students = {p.parent.name for p in (course_root / "submitted").glob(f"*/{assignment}")}
            students |= {s for s, _ in graded}
            for student in sorted(students - {s for a, s in listed if a == assignment}):
                if not self.student or student in self.student:
                    rows.append({"assignment": assignment, "student_id": student})
        for row in rows:
            student, assignment = row["student_id"], row["assignment"]
            outcomes = student_outcomes(gradebook, course_root, assignment, student, graded)
            summary = student_summaries(exercise_rows(course_root, outcomes, assignment, gradebook))[student]
            row["status"], row["open"] = summary.status, summary.open(reasons=False)
            row["problems"] = "; ".join(f"{notebook}: {reason} (what to do: {failed_advice(reason, student)})"
                                        for notebook, reason in summary.failed.items())
            row.setdefault("max_score", f"{summary.max_score:g}")
            if summary.failed:  # the other notebooks' score so far (the failed one adds nothing, not a 0); none if
                row["raw_score"] = row["score"] = f"{summary.score:g}" if summary.graded else ""  # none was graded
                self.log.warning("%s / %s FAILED: %s", student, assignment, row["problems"])
            elif summary.status != Status.COMPLETE:
                self.log.warning("%s / %s is not final: %s", student, assignment, row["open"] or summary.status)
        with open(self.to, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fieldnames, restval="")
            writer.writeheader()
            writer.writerows(rows)
