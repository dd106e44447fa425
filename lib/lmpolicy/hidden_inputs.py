"""The seeds of the hidden tests' random inputs: the same at every grading of one student, different between students.

A hidden test draws its random inputs from ``hidden_seed(base)``, where ``base`` is the seed the test was
written with. Outside grading (a source notebook run by the instructor, the course's own tests) that is
``base`` itself. When the grader runs the hidden tests for a student, it gives the trusted test kernel, and
only that kernel, the variable ``LMPOLICY_HIDDEN_INPUTS``: a value made from the student's id and a course
secret that no submission sees (``lmpolicy_grader.students``). The seed then depends on both, so a hidden
input one student records in their own kernel is of no use to another.
"""
from __future__ import annotations

import hashlib
import os

HIDDEN_INPUTS_VARIABLE = "LMPOLICY_HIDDEN_INPUTS"


def hidden_seed(base: int) -> int:
    """The seed a hidden test uses in place of ``base``: ``base`` itself unless a grader set the student's value."""
    if not isinstance(base, int) or isinstance(base, bool) or base < 0:
        raise ValueError(f"hidden_seed takes the test's own seed, a non-negative int, not {base!r}")
    student_value = os.environ.get(HIDDEN_INPUTS_VARIABLE, "").strip()
    if not student_value:
        return base
    digest = hashlib.sha256(f"{student_value}:{base}".encode()).digest()
    return int.from_bytes(digest[:7], "big")  # 56 bits: any torch.Generator or numpy seed takes it
