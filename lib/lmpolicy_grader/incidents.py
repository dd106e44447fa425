"""What went wrong while grading one notebook, as the preprocessors saw it.

The preprocessors append to ``INCIDENTS`` (one list per grading process, cleared by the grader before
each notebook); the grader copies them into the notebook's outcome, and the report groups them by
exercise through the ``cell`` (grade id) they name.
"""
from __future__ import annotations

from enum import StrEnum

INCIDENTS: list[dict] = []


class Incident(StrEnum):
    FAILED = "failed"              # the notebook could not be graded (the GradingFailed reason)
    RESTORED = "restored"          # a deleted cell was put back
    DUPLICATE = "duplicate"        # a duplicated cell lost its grade id
    CELL_TIMEOUT = "cell timeout"  # a cell ran past its timeout and was interrupted
    OUTPUT_CUT = "output cut"      # a cell printed past the output cap


class GradingFailed(Exception):
    """The notebook cannot be graded; the message is the reason shown to the instructor."""

    def __init__(self, kind: str, reason: str):
        super().__init__(f"{kind}: {reason}")
        self.kind, self.reason = kind, reason


def note(kind: Incident, notebook: str, message: str, cell: str | None = None) -> None:
    INCIDENTS.append({"kind": kind, "notebook": notebook, "cell": cell, "message": message})


# What a grading kernel dies of, as a reason says it: each limit of its sandbox by name
WHY_A_KERNEL_DIES = "os._exit, a crash, or a limit of its sandbox: memory, CPU time or file size"
