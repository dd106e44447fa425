"""The seeds of the hidden tests' random inputs: the same at every grading of one submission, new for any other.

A hidden test draws its random inputs from ``hidden_seed(base)``, where ``base`` is the seed the test was
written with. Outside grading (a source notebook run by the instructor, the course's own tests) that is
``base`` itself. When the grader runs the hidden tests for a submission, it gives the trusted test kernel, and
only that kernel, the variable ``LMPOLICY_HIDDEN_INPUTS``: a value made from a course secret that no submission
sees, the student's id and the submission itself (``lmpolicy_grader.students.submission_digest``: its code cells
and files). The seed then depends on all three: a hidden input one student records is of no use to another, nor
to the same student's next submission (a table of the inputs they read is a changed submission, called with new
ones), while an unchanged submission graded again is called with the same inputs and keeps its grade.
"""
from __future__ import annotations

import hashlib
import os

HIDDEN_INPUTS_VARIABLE = "LMPOLICY_HIDDEN_INPUTS"


def hidden_seed(base: int) -> int:
    """The seed a hidden test uses in place of ``base``: ``base`` itself unless a grader set the submission's value."""
    if not isinstance(base, int) or isinstance(base, bool) or base < 0:
        raise ValueError(f"hidden_seed takes the test's own seed, a non-negative int, not {base!r}")
    submission_value = os.environ.get(HIDDEN_INPUTS_VARIABLE, "").strip()
    if not submission_value:
        return base
    digest = hashlib.sha256(f"{submission_value}:{base}".encode()).digest()
    return int.from_bytes(digest[:7], "big")  # 56 bits: any torch.Generator or numpy seed takes it
