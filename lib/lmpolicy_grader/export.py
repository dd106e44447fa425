"""``nbgrader export`` that never shows a failed submission as a silent zero.

Stock nbgrader writes one row per student and assignment with the gradebook's score; a notebook that
could not be graded (invalid JSON, a kernel that died, a timeout) simply adds 0 to it. This exporter
writes the same columns and two more:

* ``status``: ``graded``, ``missing`` (nothing submitted) or ``FAILED``;
* ``problems``: for a FAILED row, which notebooks failed and why (its scores are left empty).

A row is FAILED when the last grading (``grading_status.json``, written by ``python -m lmpolicy_grader
grade``) failed one of its notebooks, or when a submission exists in ``submitted/`` but the gradebook
has none (stock ``nbgrader autograde`` gave up on it). Such students get a row (scores left empty) even
when the gradebook has never heard of them, which stock nbgrader leaves out. nbgrader_config.py makes it the default
exporter; it writes ``nbgrader_export.csv`` unless ``--to`` says otherwise (``grades.csv`` is the
per-exercise table of ``python -m lmpolicy_grader``).
"""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import CsvExportPlugin

from lmpolicy_grader.grading import load_outcomes
from lmpolicy_grader.status import Status

DEFAULT_DESTINATION = "nbgrader_export.csv"


def _failures(course_root: Path) -> dict[str, list[str]]:
    """student -> ["notebook: reason", ...] for every notebook the last grading marked failed."""
    failed = defaultdict(list)
    for outcome in load_outcomes(course_root):
        if outcome.status == Status.FAILED:
            failed[outcome.student].append(f"{outcome.notebook}: {outcome.reason or 'failed'}")
    return failed


def _in_gradebook(gradebook, assignment: str, student: str) -> bool:
    try:
        gradebook.find_submission(assignment, student)
    except MissingEntry:
        return False
    return True


class StatusCsvExportPlugin(CsvExportPlugin):
    """nbgrader's CSV export plus a ``status`` and a ``problems`` column (see the module docstring)."""

    def export(self, gradebook) -> None:
        self.to = self.to or DEFAULT_DESTINATION
        super().export(gradebook)
        course_root = Path(self.parent.coursedir.root) if self.parent is not None else Path.cwd()
        failures = _failures(course_root)
        with open(self.to, newline="") as handle:
            reader = csv.DictReader(handle)
            rows, fieldnames = list(reader), list(reader.fieldnames or []) + ["status", "problems"]
        # nbgrader lists only the gradebook's students: one whose every notebook failed is not there at all
        listed = {(row["assignment"], row["student_id"]) for row in rows}
        for assignment in self.assignment or [a.name for a in gradebook.assignments]:
            students = {p.parent.name for p in (course_root / "submitted").glob(f"*/{assignment}")} | set(failures)
            for student in sorted(students - {s for a, s in listed if a == assignment}):
                if not self.student or student in self.student:
                    rows.append({"assignment": assignment, "student_id": student})
        for row in rows:
            submitted = (course_root / "submitted" / row["student_id"] / row["assignment"]).is_dir()
            graded = _in_gradebook(gradebook, row["assignment"], row["student_id"])
            problems = list(failures.get(row["student_id"], []))
            if submitted and not graded and not problems:
                problems.append("submitted, but not in the gradebook: autograding failed (see its log)")
            row["status"] = Status.FAILED if problems else (Status.GRADED if graded else Status.MISSING)
            row["problems"] = "; ".join(problems)
            if problems:  # as in grades.csv: no number for what was not graded, so no sum counts it as 0
                row["raw_score"] = row["score"] = ""
                self.log.warning("%s / %s FAILED: %s", row["student_id"], row["assignment"], row["problems"])
        with open(self.to, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fieldnames, restval="")
            writer.writeheader()
            writer.writerows(rows)
