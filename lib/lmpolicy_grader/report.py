"""Honest grade reports: one row per student and exercise, read from nbgrader's gradebook.

A notebook that could not be graded is FAILED with its reason and has no score (never 0); an answer
waiting for the instructor is "pending manual"; an exercise whose tests met a tampered notebook is
"tampering" (score 0, reason given). ``grades.csv`` carries the same rows with a status column.
"""
from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from lmpolicy.progress import exercise_key
from lmpolicy_grader.grading import ASSIGNMENT, Outcome, load_config
from lmpolicy_grader.preprocessors.incidents import Incident
from lmpolicy_grader.status import Status


@dataclass
class ExerciseRow:
    student: str
    notebook: str
    exercise: str
    score: float | None   # None when there is nothing to report (FAILED, or only a pending manual part)
    max_score: float
    status: Status
    reason: str = ""


def exercise_rows(course_root: Path, outcomes: list[Outcome], assignment: str = ASSIGNMENT) -> list[ExerciseRow]:
    from nbgrader.api import Gradebook, MissingEntry

    config = load_config(Path(course_root))
    rows = []
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        for outcome in outcomes:
            cells = gradebook.find_notebook(outcome.notebook, assignment).grade_cells
            maxima = defaultdict(float)
            for cell in cells:
                maxima[exercise_key(cell.name)] += cell.max_score
            if outcome.status != Status.GRADED:  # MISSING scores 0; FAILED has no score
                rows += [ExerciseRow(outcome.student, outcome.notebook, exercise,
                                     0.0 if outcome.status == Status.MISSING else None,
                                     maximum, outcome.status, outcome.reason) for exercise, maximum in maxima.items()]
                continue
            try:
                grades = gradebook.find_submission_notebook(outcome.notebook, assignment, outcome.student).grades
            except MissingEntry:
                rows += [ExerciseRow(outcome.student, outcome.notebook, exercise, None, maximum, Status.FAILED,
                                     "graded, but the gradebook has no grades for it")
                         for exercise, maximum in maxima.items()]
                continue
            rows += _graded_rows(outcome, grades, maxima)
    return rows


def _graded_rows(outcome: Outcome, grades, maxima) -> list[ExerciseRow]:
    by_exercise = defaultdict(list)
    for grade in grades:
        by_exercise[exercise_key(grade.name)].append(grade)
    notes = defaultdict(list)
    for incident in outcome.incidents:
        if incident.get("cell"):
            notes[exercise_key(incident["cell"])].append(incident)
    rows = []
    for exercise, maximum in maxima.items():
        exercise_grades = by_exercise[exercise]
        tampered = [i["message"] for i in notes[exercise] if i["kind"] == Incident.TAMPERING]
        waiting = [g for g in exercise_grades if g.needs_manual_grade and g.manual_score is None]
        pending = bool(waiting)
        reason = "; ".join(i["message"] for i in notes[exercise])
        if tampered:
            status, reason = Status.TAMPERING, tampered[0]
        elif pending:
            status = Status.PENDING
        else:
            status = Status.GRADED
        scored = [g.score for g in exercise_grades if g not in waiting]  # a manual score counts once given
        score = float(sum(x or 0.0 for x in scored)) if scored else None  # autograded parts, when pending
        rows.append(ExerciseRow(outcome.student, outcome.notebook, exercise, score, maximum, status, reason))
    return rows


def write_csv(rows: list[ExerciseRow], path: Path) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[f.name for f in fields(ExerciseRow)])
        writer.writeheader()
        for row in rows:
            record = asdict(row)
            record["score"] = "" if row.score is None else f"{row.score:g}"
            writer.writerow(record)


def _cell(row: ExerciseRow) -> str:
    if row.status in (Status.FAILED, Status.MISSING):
        return row.status
    if row.status == Status.PENDING:
        return "pending" if row.score is None else f"{row.score:g}+?/{row.max_score:g}"
    mark = f"{row.score:g}/{row.max_score:g}"
    return mark + (" tamper" if row.status == Status.TAMPERING else "")


def format_table(rows: list[ExerciseRow]) -> str:
    """Exercises down, students across; then each student's total and what needs attention."""
    students = sorted({r.student for r in rows})
    keys = list(dict.fromkeys((r.notebook, r.exercise) for r in rows))
    table = {(r.student, r.notebook, r.exercise): r for r in rows}
    width = max([10] + [len(s) + 2 for s in students])
    label = max([20] + [len(f"{n}/{e}") + 2 for n, e in keys])
    lines = ["exercise".ljust(label) + "".join(s.rjust(width) for s in students)]
    for notebook, exercise in keys:
        cells = [_cell(table[(s, notebook, exercise)]) if (s, notebook, exercise) in table else "-" for s in students]
        lines.append(f"{notebook}/{exercise}".ljust(label) + "".join(c.rjust(width) for c in cells))
    totals, attention = [], []
    for student in students:
        mine = [r for r in rows if r.student == student]
        scored = [r for r in mine if r.score is not None]
        totals.append(f"{sum(r.score for r in scored):g}/{sum(r.max_score for r in mine):g}")
        for status in (Status.FAILED, Status.PENDING, Status.TAMPERING):
            count = sum(r.status == status for r in mine)
            if count:
                attention.append(f"{student}: {count} exercise(s) {status}")
    lines.append("total (scored so far)".ljust(label) + "".join(t.rjust(width) for t in totals))
    failures = sorted({(r.student, r.notebook, r.reason) for r in rows if r.status == Status.FAILED})
    lines += [""] + attention + [f"FAILED {s}/{n}: {why}" for s, n, why in failures]
    return "\n".join(lines)
