"""The words a grading outcome is reported in, shared by the grader's log, grades.csv and nbgrader export."""
from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """How one notebook (in the grader's outcomes) or one exercise (in the reports) came out."""

    GRADED = "graded"              # autograded, nothing waiting
    PENDING = "pending manual"     # an answer waits for the instructor in formgrader
    TAMPERING = "tampering"        # the tests met a notebook that rebound what they rely on: 0, with the reason
    FAILED = "FAILED"              # could not be graded: no score (never 0), and the reason
    MISSING = "missing"            # not submitted

    @classmethod
    def _missing_(cls, value):
        # grading_status.json files written before the statuses shared one spelling say "failed"
        if isinstance(value, str):
            for status in cls:
                if status.value.lower() == value.lower():
                    return status
        return None
