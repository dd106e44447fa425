"""Which cells of a notebook are what to the grader, and what it records on a test cell that raised."""
from __future__ import annotations

from nbgrader import utils

# Where a failed test cell's metadata records the line (1-based, in the cell) that raised.
FAILED_LINE = ("lmpolicy_grader", "failed_line")


def is_test(cell) -> bool:
    """An autograded test cell: graded code that is not an answer."""
    return cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


def is_locked_setup(cell) -> bool:
    """A locked code cell that is neither an answer nor a test: imports and data the tests may use."""
    nbgrader = cell.metadata.get("nbgrader", {})
    return (cell.cell_type == "code" and nbgrader.get("locked", False) and not utils.is_grade(cell)
            and not utils.is_solution(cell))


def failed_line(cell) -> int | None:
    """The line of a test cell that raised, as the trusted test runner recorded it (None if unknown)."""
    return cell.metadata.get(FAILED_LINE[0], {}).get(FAILED_LINE[1])


def set_failed_line(cell, line: int) -> None:
    cell.metadata.setdefault(FAILED_LINE[0], {})[FAILED_LINE[1]] = line
