"""A class that handed in one ch11 notebook, its written answers of several kinds, for the rubric's tests and bench.

Each student hands in the notebook as ``lmpolicy_grader.class_grading.examples_course`` makes the reference (every autograded
exercise solved) with, in each written cell, an answer of one kind from ``lmpolicy_grader.corpus.written_answers``:

- ``good``, ``partial``, ``wrong``: the corpus's answer of that quality;
- ``good_rewrapped``: the good answer with its lines wrapped otherwise and its first letter's case changed: the same
  answer once whitespace and case are set aside, so it joins the ``good`` group;
- ``own``: the partial answer with a sentence of the student's own: an answer nobody else gave;
- ``blank``: the release's text, as a student who wrote nothing hands it in.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

from lmpolicy_grader.class_grading.release import release
from lmpolicy_grader.class_grading.examples_course import as_handed_in, written_answers

REPO = Path(__file__).resolve().parents[3]
NOTEBOOK = "05_tilted_optimum"
KINDS = ("good", "good_rewrapped", "partial", "wrong", "own", "blank")


def _rewrapped(text: str) -> str:
    """``text`` with other line breaks (before every sixth word that starts with a letter, so that no line becomes a
    list item or a heading) and its first letter's case swapped."""
    words, lines, line = text.split(), [], []
    for word in words:
        if len(line) >= 6 and word[0].isalpha():
            lines.append(" ".join(line))
            line = []
        line.append(word)
    wrapped = "\n".join(lines + [" ".join(line)])
    return wrapped[0].swapcase() + wrapped[1:] if wrapped else wrapped


def answer(kind: str, cell: str, student: str, notebook: str = NOTEBOOK, released: str = "") -> str:
    """The written answer of ``kind`` to ``cell`` that ``student`` hands in."""
    if kind == "blank":
        return released
    if kind == "good_rewrapped":
        return _rewrapped(written_answers(notebook, "good")[cell])
    if kind == "own":
        return written_answers(notebook, "partial")[cell] + f"\n\nIn my own words ({student}): I am not sure of the rest."
    return written_answers(notebook, kind)[cell]


def make_class(root: Path, kinds: dict[str, str], notebook: str = NOTEBOOK) -> Path:
    """A course in ``root`` (made afresh) with ``notebook`` released and handed in by each student of ``kinds``
    (student -> kind of all their written answers); not graded yet."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "source" / "ch11").mkdir(parents=True)
    shutil.copy(REPO / "source" / "ch11" / f"{notebook}.ipynb", root / "source" / "ch11")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    release(root)
    source = nbformat.read(root / "source" / "ch11" / f"{notebook}.ipynb", as_version=4)
    handed_out = nbformat.read(root / "release" / "ch11" / f"{notebook}.ipynb", as_version=4)
    released = {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in handed_out.cells
                if "grade_id" in cell.metadata.get("nbgrader", {})}
    cells = list(written_answers(notebook, "good"))
    for student, kind in kinds.items():
        written = {cell: answer(kind, cell, student, notebook, released[cell]) for cell in cells}
        folder = root / "submitted" / student / "ch11"
        folder.mkdir(parents=True)
        nbformat.write(as_handed_in(source, handed_out, written), folder / f"{notebook}.ipynb")
    return root


def written_cells(notebook: str = NOTEBOOK) -> list[str]:
    """The notebook's written cells, in its order."""
    return list(written_answers(notebook, "good"))
