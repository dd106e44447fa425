"""What the class got wrong: the failing reasons the checks named, counted across the class per exercise.

Where they come from: the autograded notebooks (``autograded/<student>/<assignment>/<notebook>.ipynb``), which
keep every test cell as the grader ran it. A test cell that failed holds one ``error`` output whose value is the
check's message (``lmpolicy.notebook.checks.CheckFailed``: its first line says what is wrong, "Hint: ..." follows; a hidden
check's own assert message; the grader's own words for a shortcut or a submission out of reach). Its first line and
its hint are the reason (the hint is how the check's author names the pitfall); the gradebook keeps only the score,
so nothing else holds it.

The same pitfall reads differently per student: every student has their own hidden inputs and numbers
(``lmpolicy.per_student.variants``), so a message may quote values ("returned 0.731 where 0.269 was expected"). The reason
is normalised before counting: every number (with its sign, decimals and exponent) becomes ``#`` and a
bracketed run of them ``[#, ...]``, so two students with the same pitfall and different numbers count as one
reason, and no student's number reaches the table. A student counts once per reason and exercise, however many
of the exercise's test cells said it.

These are the instructor's: a hidden check's message may name its hint (the report is not for students; the
feedback keeps hiding them, ``preprocessors.hide_hidden_tests``).
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import nbformat

from lmpolicy.notebook.catalogue import exercise_key
from lmpolicy.notebook.verdict_lines import strip_ansi
from lmpolicy_grader.cells import is_test
from lmpolicy_grader.class_grading.course import ASSIGNMENT
from lmpolicy_grader.class_grading.status import Status

TOP = 3  # reasons shown per exercise
HINT = "Hint:"  # how lmpolicy.notebook.checks.CheckFailed starts its hint line
# a number as Python, numpy and torch print one (3, -0.25, 2., 1e-08, 2.5E+03), not a digit inside a name (x1)
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
# a bracketed run of numbers, however long: "[#, #, #]" and "(#, #)" read as one value whatever the student's length
_RUN = re.compile(r"([\[(])\s*#(?:\s*,\s*#)+\s*,?\s*([\])])")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Reason:
    """What one failed test cell said: the check's first line and its hint, both ``normalised``."""
    problem: str
    hint: str = ""  # the check's "Hint: ..." line, without the word (what the check's author calls the pitfall)


@dataclass(frozen=True)
class Pitfall:
    reason: Reason
    students: int  # how many students' tests said it
    of: int        # how many students had this exercise autograded


def normalised(reason: str) -> str:
    """A failing check's first line with no student-specific number left: every number ``#``, a bracketed run of
    them ``[#, ...]``, whitespace single."""
    text = _NUMBER.sub("#", strip_ansi(reason))
    text = _RUN.sub(lambda m: f"{m.group(1)}#, ...{m.group(2)}", text)
    return _SPACES.sub(" ", text).strip()


def reason_of(error) -> Reason:
    """The reason an ``error`` output of a test cell gives: its value's first line (its exception's name when it
    has none) and its "Hint: ..." line, as ``lmpolicy.notebook.checks.CheckFailed`` writes them."""
    lines = [line.strip() for line in strip_ansi(str(error.get("evalue") or "")).strip().splitlines()]
    hints = [line[len(HINT):].strip() for line in lines if line.startswith(HINT)]
    problem = lines[0] if lines and not lines[0].startswith(HINT) else str(error.get("ename") or "an error")
    return Reason(normalised(problem), normalised(hints[0]) if hints else "")


def failing_reasons(notebook_path: Path) -> dict[str, set[Reason]]:
    """{exercise: the reasons its failed test cells recorded} of one autograded notebook."""
    nb = nbformat.read(notebook_path, as_version=4)
    reasons = defaultdict(set)
    for cell in nb.cells:
        if is_test(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    reasons[exercise_key(cell.metadata.nbgrader.grade_id)].add(reason_of(output))
    return reasons


def common_pitfalls(course_root: Path, rows, assignment: str = ASSIGNMENT, top: int = TOP
                    ) -> dict[tuple[str, str], list[Pitfall]]:
    """{(notebook, exercise): its ``top`` most common failing reasons across the class}, from the autograded
    notebooks of the students whose exercise was autograded (``rows``: ``report.exercise_rows``); exercises
    nobody failed are absent. Most students first, then alphabetically."""
    autograded = defaultdict(set)  # (notebook, exercise) -> students whose tests ran on it
    for row in rows:
        if row.status in (Status.GRADED, Status.PENDING):
            autograded[(row.notebook, row.exercise)].add(row.student)
    counts = defaultdict(Counter)
    for student, notebook in sorted({(s, n) for (n, _), students in autograded.items() for s in students}):
        path = Path(course_root) / "autograded" / student / assignment / f"{notebook}.ipynb"
        if not path.exists():
            continue
        for exercise, reasons in failing_reasons(path).items():
            if student in autograded.get((notebook, exercise), ()):
                counts[(notebook, exercise)].update(reasons)
    return {key: [Pitfall(reason, n, len(autograded[key])) for reason, n in
                  sorted(counter.items(), key=lambda item: (-item[1], item[0].problem, item[0].hint))[:top]]
            for key, counter in counts.items()}
