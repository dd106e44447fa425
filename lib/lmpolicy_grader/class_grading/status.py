"""The words a grading outcome is reported in, shared by the grader's log, grades.csv and nbgrader export."""
from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """How one notebook (in the grader's outcomes), one exercise, or one student (in the reports) came out.

    Notebooks and exercises: GRADED, PENDING, FAILED, MISSING. A student's whole assignment
    (class summary, ``grades.csv`` totals, ``nbgrader export``) says what is still open, worst first:
    FAILED, NOTEBOOKS_MISSING, PENDING_GRADING, else COMPLETE; MISSING when nothing was submitted.
    """

    GRADED = "graded"              # autograded, nothing waiting
    PENDING = "pending manual"     # an answer waits for the instructor in formgrader
    FAILED = "FAILED"              # could not be graded: no score (never 0), and the reason
    MISSING = "missing"            # not submitted
    # a student's assignment as a whole
    COMPLETE = "complete"                        # every notebook submitted and graded, every answer marked
    PENDING_GRADING = "pending manual grading"   # written answers wait for a grader (how many: the `open` column)
    NOTEBOOKS_MISSING = "notebooks missing"      # some notebooks were not submitted (which: the `open` column)

    @classmethod
    def _missing_(cls, value):
        # grading_status.json files written before the statuses shared one spelling say "failed"
        if isinstance(value, str):
            for status in cls:
                if status.value.lower() == value.lower():
                    return status
        return None
