"""After a check cell in the student's own kernel: one ✗ line when a cell this kernel ran holds a construct outside
the grader's code rule (``%matplotlib inline``, ``import os``, a syntax error...), which at grading costs every
exercise checked below it. ``lmpolicy.notebook.code_rule`` judges; nothing here is blocked."""
from __future__ import annotations

from lmpolicy.notebook.failures import verdict_line
from lmpolicy.notebook.verdict_lines import wrapped

HEADING = "When graded"


def say_outside_the_code_rule(history: list[tuple[int, str]]) -> None:
    """Print the line for the first of ``history``'s cells (execution count, source as typed) outside the rule,
    with how many more are; nothing when every cell is inside it."""
    try:
        from lmpolicy.notebook import code_rule  # here, not at the top: the grading kernel never needs it

        found = code_rule.first_outside_in_history(history)
        if found is None:
            return
        outside, others = found
        text = outside.student_line(f"In [{outside.cell.index}]")
    except Exception:  # noqa: BLE001 - a judgement that fails says nothing; the grader judges for itself
        return
    more = f"{others} more cell{'s' if others > 1 else ''} too; " if others else ""
    print("\n".join(wrapped([verdict_line(HEADING, f"{text} ({more}Validate lists what the saved notebook holds)")])))
