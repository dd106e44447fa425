"""Example submissions for `make grade`: the reference solution, the blank release, typical mistakes.

- ``reference``: the source notebooks (solutions in place): full marks on every autograded part.
- ``blank``: the release as a student receives it: zero on every autograded part.
- ``mistakes``, ``mistakes-2``, ...: the reference with the typical wrong answers of
  ``lmpolicy_grader.wrong_answers`` put into the answer cells, at most one per exercise and
  submission, so each exercise with a wrong answer loses its points and no other exercise does
  (``mistakes`` holds every notebook; ``mistakes-2`` ... only the notebooks their answers touch).
"""
from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import nbformat

from lmpolicy_grader.grading import ASSIGNMENT
from lmpolicy_grader.wrong_answers import WRONG_ANSWERS

def mistake_rounds(wrong_answers: list) -> list[list]:
    """Split wrong answers into rounds with at most one per (notebook, exercise) and answer cell."""
    rounds: list[list] = []
    for answer in wrong_answers:
        for round_ in rounds:
            if all((a.notebook, a.exercise) != (answer.notebook, answer.exercise)
                   and (a.notebook, a.cell) != (answer.notebook, answer.cell) for a in round_):
                round_.append(answer)
                break
        else:
            rounds.append([answer])
    return rounds


def with_answers(notebook: nbformat.NotebookNode, answers: list) -> nbformat.NotebookNode:
    """A copy of ``notebook`` whose answer cells named by ``answers`` hold the wrong sources."""
    notebook = nbformat.from_dict(notebook)
    by_cell = {a.cell: a.source for a in answers}
    found = set()
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in by_cell:
            cell.source = by_cell[grade_id]
            found.add(grade_id)
    if missing := set(by_cell) - found:
        raise ValueError(f"wrong answers name answer cells that do not exist: {sorted(missing)}")
    return notebook


def place_examples(course_root: Path, assignment: str = ASSIGNMENT) -> list[str]:
    """Write the example submissions into submitted/<student>/<assignment>/; returns the student ids."""
    course_root = Path(course_root)
    source, release = course_root / "source" / assignment, course_root / "release" / assignment
    notebooks = {p.stem: nbformat.read(p, as_version=4) for p in sorted(source.glob("*.ipynb"))}
    students = {"reference": {}, "blank": {}}
    for name, notebook in notebooks.items():
        students["reference"][name] = notebook
        students["blank"][name] = nbformat.read(release / f"{name}.ipynb", as_version=4)
    wrong_answers = [a for a in WRONG_ANSWERS if a.notebook in notebooks]
    for number, round_ in enumerate(mistake_rounds(wrong_answers), start=1):
        student = "mistakes" if number == 1 else f"mistakes-{number}"
        per_notebook = defaultdict(list)
        for answer in round_:
            per_notebook[answer.notebook].append(answer)
        names = notebooks if number == 1 else per_notebook  # later rounds: only the notebooks they touch
        students[student] = {name: with_answers(notebooks[name], per_notebook[name]) for name in names
                             if name in notebooks}
    for student, submission in students.items():
        folder = course_root / "submitted" / student / assignment
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, notebook in submission.items():
            nbformat.write(notebook, folder / f"{name}.ipynb")
    return list(students)
