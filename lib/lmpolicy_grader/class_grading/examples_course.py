"""Example submissions for `make grade`: the reference solution, the blank release, typical mistakes.

They live in a course of their own, ``examples-course/`` inside the course folder (made afresh by
``python -m lmpolicy_grader examples``; git ignores it): its own ``submitted/``, gradebook, feedback,
``grades.csv`` and export, with the course's configuration and source notebooks. So the real class in
``submitted/`` never holds them, and nothing uploaded from its gradebook or export carries a fake student.
Example students left in a real class by an older version are removed with ``remove_from_class``
(``python -m lmpolicy_grader examples --remove-from-class``), through nbgrader's ``db student remove``.

- ``reference``: the release with the source's solutions in the answer cells (as a student who solved
  everything hands it in: no solution markers, no hidden tests): full marks on every autograded part,
  and a good answer, in a student's words, in every written cell (``lmpolicy_grader.corpus.written_answers``).
- ``blank``: the release as a student receives it: zero on every autograded part.
- ``mistakes``, ``mistakes-2``, ...: the reference with the typical wrong answers of
  ``lmpolicy_grader.corpus.wrong_answers`` put into the answer cells, at most one per exercise and
  submission, so each exercise with a wrong answer loses its points and no other exercise does
  (``mistakes`` holds every notebook; ``mistakes-2`` ... only the notebooks their answers touch).
  Their written cells hold the partial answers (``mistakes``) or the wrong ones (``mistakes-2`` ...),
  so grading them by hand in formgrader means reading answers of three qualities.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import nbformat

from lmpolicy_grader.class_grading.course import ASSIGNMENT, STATUS_FILE, load_outcomes_raw, submitted_students
from lmpolicy_grader.corpus.written_answers import QUALITIES, WRITTEN_ANSWERS
from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS

EXAMPLES_COURSE = "examples-course"
_EXAMPLE_ID = re.compile(r"(reference|blank|mistakes(-\d+)?)")
# A written cell of a course other than ch11 (the tests' tiny course) has no example answers: it gets this
# text, never the mark scheme. tests/lmpolicy_grader/class_grading/test_examples_course.py checks that every ch11 cell has them.
NO_EXAMPLE_ANSWER = "(An example student's answer: lmpolicy_grader.corpus.written_answers has none for this question.)"
# nbgrader's default solution delimiters (ClearSolutions.begin_solution_delimeter, end_...), on a line of their own
_SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)

# The example course's nbgrader_config.py: the real course's settings, re-rooted in its own folder.
_EXAMPLES_CONFIG = """\
# The example submissions' own course (written by `python -m lmpolicy_grader examples`; do not edit):
# the settings of the course above, with this folder as root and its own gradebook.
load_subconfig({parent_config!r})
from pathlib import Path
root = Path(__file__).resolve().parent
c.CourseDirectory.root = str(root)
c.CourseDirectory.db_url = f"sqlite:///{{root / 'gradebook.db'}}"
c.RestoreDeletedCells.course_root = str(root)
c.Exchange.root = str(root / "exchange")
"""


def is_example(student: str) -> bool:
    """Whether ``student`` is one of the example submissions' ids (reference, blank, mistakes, mistakes-2 ...)."""
    return _EXAMPLE_ID.fullmatch(student) is not None

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


def as_handed_in(source: nbformat.NotebookNode, release: nbformat.NotebookNode,
                 written: dict[str, str]) -> nbformat.NotebookNode:
    """``source`` as a student who solved every exercise hands it in: solution code without nbgrader's
    markers, locked and test cells as the release has them (no hidden tests), and in each manually graded
    Markdown cell the text ``written`` gives for its grade id."""
    released = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells
                if "grade_id" in c.metadata.get("nbgrader", {})}
    notebook = nbformat.from_dict(source)
    for cell in notebook.cells:
        nbgrader = cell.metadata.get("nbgrader", {})
        grade_id = nbgrader.get("grade_id")
        if grade_id is None:
            continue
        if not nbgrader.get("solution"):
            if grade_id not in released:
                raise ValueError(f"cell {grade_id!r} of the source is missing from the release: run `make release`")
            cell.source = released[grade_id]
        elif cell.cell_type == "markdown":
            cell.source = written.get(grade_id, NO_EXAMPLE_ANSWER)
        else:
            cell.source = _SOLUTION_MARKER.sub("", cell.source)
    return notebook


def written_answers(notebook: str, quality: str) -> dict[str, str]:
    """The example written answers of ``quality`` ("good", "partial", "wrong") for ``notebook``, by grade id."""
    if quality not in QUALITIES:
        raise ValueError(f"quality must be one of {QUALITIES}, not {quality!r}")
    return {a.cell: getattr(a, quality) for a in WRITTEN_ANSWERS if a.notebook == notebook}


def place_examples(course_root: Path, assignment: str = ASSIGNMENT, rounds: int | None = None) -> list[str]:
    """Write the example submissions into submitted/<student>/<assignment>/; returns the student ids.
    ``rounds``: at most this many rounds of mistakes (``mistakes`` is the first: one typical wrong answer
    for every exercise that has one); None, every round."""
    course_root = Path(course_root)
    source, release = course_root / "source" / assignment, course_root / "release" / assignment
    sources = {p.stem: nbformat.read(p, as_version=4) for p in sorted(source.glob("*.ipynb"))}
    releases = {name: nbformat.read(release / f"{name}.ipynb", as_version=4) for name in sources}
    handed_in = {quality: {name: as_handed_in(sources[name], releases[name], written_answers(name, quality))
                           for name in sources} for quality in QUALITIES}
    notebooks = handed_in["good"]
    students = {"reference": notebooks, "blank": releases}
    wrong_answers = [a for a in WRONG_ANSWERS if a.notebook in notebooks]
    for number, round_ in enumerate(mistake_rounds(wrong_answers)[:rounds], start=1):
        student = "mistakes" if number == 1 else f"mistakes-{number}"
        per_notebook = defaultdict(list)
        for answer in round_:
            per_notebook[answer.notebook].append(answer)
        names = notebooks if number == 1 else per_notebook  # later rounds: only the notebooks they touch
        written = handed_in["partial" if number == 1 else "wrong"]
        students[student] = {name: with_answers(written[name], per_notebook[name]) for name in names
                             if name in notebooks}
    for student, submission in students.items():
        folder = course_root / "submitted" / student / assignment
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, notebook in submission.items():
            nbformat.write(notebook, folder / f"{name}.ipynb")
    return list(students)


def make_examples_course(course_root: Path, assignment: str = ASSIGNMENT) -> Path:
    """A fresh ``examples-course/`` in ``course_root``: the course's config and source, released, with the
    example submissions in its ``submitted/``. Returns its folder (grade it as a course of its own)."""
    from lmpolicy_grader.class_grading.release import release

    course_root = Path(course_root).resolve()
    examples_root = course_root / EXAMPLES_COURSE
    shutil.rmtree(examples_root, ignore_errors=True)  # made afresh: no grade of an earlier run lingers
    (examples_root / "source").mkdir(parents=True)
    (examples_root / ".gitignore").write_text("# made by `python -m lmpolicy_grader examples`\n*\n")
    (examples_root / "nbgrader_config.py").write_text(
        _EXAMPLES_CONFIG.format(parent_config=str(course_root / "nbgrader_config.py")))
    shutil.copytree(course_root / "source" / assignment, examples_root / "source" / assignment)
    release(examples_root, assignment)
    place_examples(examples_root, assignment)
    return examples_root


def examples_in_class(course_root: Path, assignment: str = ASSIGNMENT) -> list[str]:
    """Students in a real class's submitted/ named as the examples are (an older version of the grader put the
    examples there); none in examples-course/ itself, where they belong."""
    if Path(course_root).name == EXAMPLES_COURSE:
        return []
    return [s for s in submitted_students(course_root, assignment) if is_example(s)]


def remove_from_class(course_root: Path, students: list[str], assignment: str = ASSIGNMENT, log=print) -> None:
    """Remove example ``students`` from a real class: nbgrader's ``db student remove --force`` (their grades
    go with them), then their submitted/, autograded/ and feedback/ folders and their grading outcomes."""
    course_root = Path(course_root).resolve()
    unknown = [s for s in students if not is_example(s)]
    if unknown:
        raise ValueError(f"not example students, refusing to remove them: {unknown}")
    for student in students:
        done = subprocess.run([sys.executable, "-m", "nbgrader", "db", "student", "remove", student, "--force"],
                              cwd=course_root, capture_output=True, text=True)
        if done.returncode != 0 and "No such student" not in done.stderr + done.stdout:
            raise RuntimeError(f"nbgrader db student remove {student} failed:\n{done.stderr.strip()}")
        for folder in ("submitted", "autograded", "feedback"):
            shutil.rmtree(course_root / folder / student, ignore_errors=True)
        log(f"removed {student}")
    status_file = course_root / STATUS_FILE
    if status_file.exists():
        kept = [o for o in load_outcomes_raw(status_file) if o["student"] not in students]
        status_file.write_text(json.dumps(kept, indent=1) + "\n")
