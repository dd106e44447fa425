"""Shared helpers of the notebook tests: where the notebooks are, what their cells are, how to run them.

Conventions checked here (docs/architecture.md, "Notebooks"):

- every nbgrader cell's ``grade_id`` is ``<exercise key>__<name>``, with the key listed in
  ``lmpolicy.notebook.progress.EXERCISES`` for this notebook;
- an autograded test cell (grade, not solution, code) is a heading and one call of its exercise's declaration
  (``lmpolicy.exercises``), then ``### BEGIN HIDDEN TESTS``, one call of its hidden test, ``### END HIDDEN TESTS``
  (``lmpolicy_grader.completeness`` says so);
- a manually graded cell (markdown, grade + solution) holds its mark scheme inside
  ``### BEGIN SOLUTION`` ... ``### END SOLUTION``;
- the first cell states the notebook's total, the first "N points" in it (e.g. "**7 points**").
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from lmpolicy.notebook import progress
from lmpolicy.notebook.catalogue import is_check_cell as is_autograded_test  # noqa: F401 (the tests import it from here)
from lmpolicy_grader.nbgrader_plugins import GradingExecute

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIR = ROOT / "source" / "ch11"
RELEASE_DIR = ROOT / "release" / "ch11"
SOURCE_NOTEBOOKS = sorted(SOURCE_DIR.glob("*.ipynb"))
NOTEBOOK_NAMES = [path.stem for path in SOURCE_NOTEBOOKS]

# The errors a failing check raises (lmpolicy.notebook.checks); anything else in a test cell is a bug in the test.
CHECK_ERRORS = {"CheckFailed", "StudentCodeRaised", "LibraryShortcutUsed", "AssertionError"}
# The most a cell may take here under NBGRADER_EXECUTION: half the grader's cell timeout, so that a
# slower machine than this one still grades it.
GRADER_CELL_TIMEOUT = GradingExecute.timeout.default_value // 2
# As a student runs them, cells may train for minutes (notebook 08 compares training runs).
STUDENT_CELL_TIMEOUT = 600


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def grade_id(cell) -> str | None:
    return nbgrader_meta(cell).get("grade_id")


def exercise_key(cell) -> str | None:
    """The exercise of an nbgrader cell (``lmpolicy.notebook.progress.exercise_key``); None for a cell with no grade id
    or one that names no exercise (no ``__`` in it)."""
    gid = grade_id(cell)
    return progress.exercise_key(gid) if gid and progress.GRADE_ID_SEPARATOR in gid else None


def is_manual_answer(cell) -> bool:
    meta = nbgrader_meta(cell)
    return cell.cell_type == "markdown" and bool(meta.get("grade")) and bool(meta.get("solution"))


def is_code_answer(cell) -> bool:
    meta = nbgrader_meta(cell)
    return cell.cell_type == "code" and bool(meta.get("solution")) and not meta.get("grade")


def points(cell) -> float:
    return float(nbgrader_meta(cell).get("points") or 0) if nbgrader_meta(cell).get("grade") else 0.0


def read(path: Path):
    return nbformat.read(path, as_version=4)


@dataclass(frozen=True)
class Region:
    begin: str
    end: str


SOLUTION = Region("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_TESTS = Region("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def region_lines(source: str, region: Region) -> list[str]:
    """The lines strictly between ``region.begin`` and ``region.end`` (all such regions)."""
    inside, lines = False, []
    for line in source.splitlines():
        if region.begin in line:
            inside = True
        elif region.end in line:
            inside = False
        elif inside:
            lines.append(line)
    return lines


def stated_total(nb) -> float | None:
    match = re.search(r"(\d+(?:\.\d+)?) points", nb.cells[0].source)
    return float(match.group(1)) if match else None


def kernel_env(*, grader: bool, progress_file: Path) -> dict:
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    if grader:
        env["NBGRADER_EXECUTION"] = "autograde"
    env["LMPOLICY_PROGRESS_FILE"] = str(progress_file)
    return env


def client(nb, *, timeout: int = 120) -> NotebookClient:
    return NotebookClient(nb, kernel_name="python3", timeout=timeout,
                          resources={"metadata": {"path": str(SOURCE_DIR)}})


def execute(nb, *, grader: bool, progress_file: Path, timeout: int = 120):
    """Run ``nb`` top to bottom in a fresh kernel; CellExecutionError on the first error."""
    client(nb, timeout=timeout).execute(env=kernel_env(grader=grader, progress_file=progress_file))
    return nb


def run_cell(notebook_client: NotebookClient, cell, index: int) -> str | None:
    """Execute one cell in the client's running kernel; the error name, or None if it ran cleanly."""
    try:
        notebook_client.execute_cell(cell, index)
    except CellExecutionError as error:
        return error.ename
    return None


__all__ = ["CellExecutionError", "progress"]


def visible_only(cell):
    """A test cell as the student has it: the hidden tests removed, as the release does."""
    cell = nbformat.from_dict(cell)  # a copy
    kept, hidden = [], False
    for line in cell.source.splitlines():
        if HIDDEN_TESTS.begin in line:
            hidden = True
        elif HIDDEN_TESTS.end in line:
            hidden = False
        elif not hidden:
            kept.append(line)
    cell.source = "\n".join(kept)
    return cell
