"""Honest grade reports: one row per student and exercise, read from nbgrader's gradebook.

A notebook that could not be graded is FAILED with its reason and has no score (never 0); an answer
waiting for the instructor is "pending manual". ``grades.csv`` carries the same rows with a status column.

A manual grade that a re-grade put back up for review is "pending manual" too, counted as ``recheck``: when
nbgrader autogrades a notebook again (``SaveAutoGrades``), every cell that already has a manual score gets
``needs_manual_grade`` set, since the gradebook keeps no copy of the answer that score was given for and so
cannot tell whether it changed. The score stays (it counts in the score so far), formgrader highlights it with
a "Resolve" button, and the report says "re-check in formgrader" for exactly those cells, so the report and
formgrader never disagree about what is left to do.

Per student, ``student_summaries`` says what is still open (the words of ``Status``: complete, pending
manual grading, notebooks missing, FAILED); the printed report is a class summary (one line per
student), per-exercise statistics (which exercises the class found hard) and, for every FAILED
notebook, what to do about it. ``nbgrader export`` (``lmpolicy_grader.nbgrader_plugins.export``) uses the same summaries.
"""
from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from lmpolicy.notebook.catalogue import exercise_key, label
from lmpolicy_grader.class_grading.course import ASSIGNMENT, Outcome, load_config
from lmpolicy_grader.class_grading.status import Status


@dataclass
class ExerciseRow:
    student: str
    notebook: str
    exercise: str
    score: float | None   # None when there is nothing to report (FAILED, or only a pending manual part)
    max_score: float
    status: Status
    reason: str = ""
    waiting: int = 0      # answers of this exercise that wait for a grader (formgrader)
    recheck: int = 0      # manual grades of this exercise that a re-grade flagged for review (formgrader's Resolve)


def exercise_rows(course_root: Path, outcomes: list[Outcome], assignment: str = ASSIGNMENT,
                  gradebook=None) -> list[ExerciseRow]:
    """The rows of ``outcomes``, read from the course's gradebook (or the open ``gradebook`` given)."""
    from nbgrader.api import Gradebook

    if gradebook is not None:
        return _rows_from(gradebook, outcomes, assignment)
    config = load_config(Path(course_root))
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        return _rows_from(gradebook, outcomes, assignment)


def exercise_maxima(notebook) -> dict[str, float]:
    """{exercise: its points} of a gradebook notebook (the sum of its grade cells' max scores), in cell order."""
    maxima = defaultdict(float)
    for cell in notebook.grade_cells:
        maxima[exercise_key(cell.name)] += cell.max_score
    return dict(maxima)


def _rows_from(gradebook, outcomes: list[Outcome], assignment: str) -> list[ExerciseRow]:
    from nbgrader.api import MissingEntry

    rows = []
    for outcome in outcomes:
        maxima = exercise_maxima(gradebook.find_notebook(outcome.notebook, assignment))
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


RECHECK_REASON = ("re-check in formgrader: {n} manual grade(s) kept from before the re-grade "
                  "(Resolve keeps the score, or change it)")


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
        waiting = [g for g in exercise_grades if g.needs_manual_grade and g.manual_score is None]
        recheck = [g for g in exercise_grades if g.needs_manual_grade and g.manual_score is not None]
        reasons = [i["message"] for i in notes[exercise]]
        if recheck:
            reasons.append(RECHECK_REASON.format(n=len(recheck)))
        reason = "; ".join(reasons)
        if waiting or recheck:
            status = Status.PENDING
        else:
            status = Status.GRADED
        scored = [g.score for g in exercise_grades if g not in waiting]  # a manual score counts once given
        score = float(sum(x or 0.0 for x in scored)) if scored else None  # autograded parts, when pending
        rows.append(ExerciseRow(outcome.student, outcome.notebook, exercise, score, maximum, status, reason,
                                len(waiting), len(recheck)))
    return rows




# --- what to do about a FAILED notebook ------------------------------------------------------------

def failed_advice(reason: str, student: str) -> str:
    """What the instructor can do about a notebook that FAILED for ``reason`` (the words of the grader)."""
    rerun = f"`python -m lmpolicy_grader grade --no-release --student {student}`"
    if reason.startswith("invalid notebook"):
        return ("the file is not a readable notebook, so it never reached the gradebook and formgrader cannot open "
                "it: repair it in submitted/ (or ask for a resubmission), then re-run " + rerun)
    if "worker process died" in reason:
        return ("the submission killed the grader's own process (re-running does the same): grade it by hand, "
                "running it yourself in a throw-away copy")
    if "kernel died" in reason:
        return ("the kernel died (os._exit, a crash, the memory or CPU limit): run it yourself to see which; if a "
                "limit was too tight, raise it in nbgrader_config.py and re-run " + rerun + "; else grade it by hand")
    if "budget" in reason or "did not stop" in reason or "stopped answering" in reason:
        return ("a cell ran too long: if the code is legitimate, raise c.GradingExecute.cell_timeouts or "
                "notebook_budgets in nbgrader_config.py and re-run " + rerun + "; else grade it by hand")
    return f"nbgrader gave up on it: run `nbgrader autograde ch11 --student {student} --force` to read why, fix, and re-run " + rerun


# --- one line per student -------------------------------------------------------------------------

@dataclass
class StudentSummary:
    """A student's assignment as a whole: the score so far and what is still open."""
    student: str
    score: float            # graded and marked parts only; a FAILED or pending part adds nothing (it is not a 0)
    max_score: float        # the whole assignment
    status: Status          # FAILED, NOTEBOOKS_MISSING, PENDING_GRADING, COMPLETE (worst first) or MISSING
    waiting: int            # answers that wait for a grader
    recheck: int            # manual grades a re-grade flagged for review in formgrader (their scores count)
    missing: list[str]      # notebooks not submitted
    failed: dict[str, str]  # notebook -> reason
    graded: list[str]       # notebooks graded (neither FAILED nor missing)

    def open(self, reasons: bool = True) -> str:
        """What is still open, in words (empty when complete); ``reasons=False``: failed notebooks by name only."""
        parts = [f"FAILED {notebook}" + (f": {reason}" if reasons else "") for notebook, reason in self.failed.items()]
        if self.missing and self.status != Status.MISSING:
            parts.append(f"{len(self.missing)} notebook(s) missing: {', '.join(self.missing)}")
        if self.waiting:
            parts.append(f"{self.waiting} answer(s) to grade by hand")
        if self.recheck:
            parts.append(f"{self.recheck} manual grade(s) to re-check in formgrader")
        return "; ".join(parts)


def student_summaries(rows: list[ExerciseRow]) -> dict[str, StudentSummary]:
    by_student = defaultdict(list)
    for row in rows:
        by_student[row.student].append(row)
    summaries = {}
    for student, mine in sorted(by_student.items()):
        notebooks = defaultdict(set)
        for row in mine:
            notebooks[row.notebook].add(row.status)
        missing = [n for n, statuses in notebooks.items() if statuses == {Status.MISSING}]
        failed = {r.notebook: r.reason for r in mine if r.status == Status.FAILED}
        graded = [n for n in notebooks if n not in failed and n not in missing]
        waiting, recheck = sum(r.waiting for r in mine), sum(r.recheck for r in mine)
        if len(missing) == len(notebooks):
            status = Status.MISSING
        elif failed:
            status = Status.FAILED
        elif missing:
            status = Status.NOTEBOOKS_MISSING
        elif waiting or recheck:
            status = Status.PENDING_GRADING
        else:
            status = Status.COMPLETE
        summaries[student] = StudentSummary(student, sum(r.score for r in mine if r.score is not None),
                                            sum(r.max_score for r in mine), status, waiting, recheck, missing,
                                            failed, graded)
    return summaries


# --- grades.csv -----------------------------------------------------------------------------------

def write_csv(rows: list[ExerciseRow], path: Path) -> None:
    """One row per student and exercise (the per-exercise detail of the printed report)."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[f.name for f in fields(ExerciseRow)])
        writer.writeheader()
        for row in rows:
            record = asdict(row)
            record["score"] = "" if row.score is None else f"{row.score:g}"
            writer.writerow(record)


# --- the printed report ---------------------------------------------------------------------------

LEGEND = """\
How to read this report
  score so far   points of the parts graded and marked; a FAILED notebook or an answer still to be
                 graded by hand adds nothing (it is not a 0); "of" is the assignment's total
  status         complete: everything graded | pending manual grading: answers wait for you in
                 formgrader | notebooks missing: some were not submitted (they score 0) | FAILED: a
                 notebook could not be graded (see the advice below) | missing: nothing submitted
  open           what keeps a student from complete; "to re-check in formgrader": manual grades you gave
                 before this grading, kept and counted, which nbgrader flags for review after every
                 re-grade (open the answer in formgrader, then Resolve, or change the score)
  per exercise   graded: students whose exercise is fully scored (autograded, and marked where it has
                 written parts); mean and full marks over those; pending / FAILED / not submitted: how
                 many students are in each state; "-" where no student is graded yet
  got wrong      per exercise, the reasons its failed checks gave most often across the class, "n of m":
                 n students hit it, of the m whose exercise was autograded; each student's own numbers
                 are shown as #, so one pitfall with different numbers counts once (read from autograded/)
  grades.csv     one row per student and exercise: score (empty when there is none), status, reason,
                 waiting (answers to grade by hand), recheck (manual grades to re-check)"""


def _table(header: list[str], lines: list[list], numbers: range) -> list[str]:
    """Columns as wide as their widest entry; the columns in ``numbers`` right-aligned, the others left."""
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    return ["  ".join(str(x).rjust(w) if i in numbers else str(x).ljust(w) for i, (x, w) in enumerate(zip(line, widths)))
            .rstrip() for line in [header, *lines]]


def class_summary(rows: list[ExerciseRow]) -> list[str]:
    summaries = student_summaries(rows)
    lines = [[s.student, f"{s.score:g}", f"{s.max_score:g}", s.status, s.open(reasons=False)]
             for s in summaries.values()]
    counts = defaultdict(int)
    for summary in summaries.values():
        counts[summary.status] += 1
    total = ", ".join(f"{n} {status}" for status, n in counts.items())
    return [f"Class summary ({len(summaries)} students: {total})"] + _table(
        ["student", "score so far", "of", "status", "open"], lines, numbers=range(1, 3))


def _named(notebook: str, exercise: str) -> str:
    """An exercise as students read it ("Exercise 11.1(a)"), or by notebook and key where its key has no known form."""
    try:
        return label(exercise)
    except ValueError:
        return f"{notebook}/{exercise}"


def exercise_statistics(rows: list[ExerciseRow]) -> list[str]:
    by_exercise = defaultdict(list)
    for row in rows:
        by_exercise[(row.notebook, row.exercise)].append(row)
    lines = []
    for (notebook, exercise), mine in by_exercise.items():
        scored = [r for r in mine if r.status == Status.GRADED]
        mean = f"{sum(r.score for r in scored) / len(scored):.2f}" if scored else "-"
        full = f"{100 * sum(r.score >= r.max_score for r in scored) / len(scored):.0f}%" if scored else "-"
        lines.append([_named(notebook, exercise), f"{mine[0].max_score:g}", len(scored), mean, full,
                      sum(r.status == Status.PENDING for r in mine), sum(r.status == Status.FAILED for r in mine),
                      sum(r.status == Status.MISSING for r in mine)])
    return ["Per exercise"] + _table(["exercise", "points", "graded", "mean", "full marks", "pending", "FAILED",
                                      "not submitted"], lines, numbers=range(1, 8))


def class_pitfalls(pitfalls: dict) -> list[str]:
    """The most common failing reasons per exercise (``pitfalls.common_pitfalls``), in the per-exercise table's
    order: "2 of 5: <what the check said>", numbers shown as #."""
    lines = []
    for (notebook, exercise), found in pitfalls.items():
        lines.append(f"  {_named(notebook, exercise)}")
        for pitfall in found:
            lines.append(f"    {pitfall.students} of {pitfall.of}: {pitfall.reason.problem}")
            if pitfall.reason.hint:
                lines.append(f"    {'':{len(f'{pitfall.students} of {pitfall.of}: ')}}hint: {pitfall.reason.hint}")
    return ["What the class got wrong (the checks' most common failing reasons per exercise, top 3; "
            "numbers shown as #)"] + lines if lines else []


def failed_notebooks(rows: list[ExerciseRow]) -> list[str]:
    failures = sorted({(r.student, r.notebook, r.reason) for r in rows if r.status == Status.FAILED})
    lines = [f"FAILED {s}/{n}: {why}\n  what to do: {failed_advice(why, s)}" for s, n, why in failures]
    return ["FAILED notebooks (no score, never 0)"] + lines if lines else []


def format_report(rows: list[ExerciseRow], pitfalls: dict | None = None, plane: list[str] | None = None) -> str:
    """The class summary, the per-exercise statistics and what the class got wrong (``pitfalls``, from
    ``pitfalls.common_pitfalls``), the class on the reward-KL plane (``plane``: ``reward_kl_plane.draw``'s
    lines), what to do about each FAILED notebook, the legend."""
    if not rows:
        return "No submissions graded yet (submitted/<student>/ch11/ is empty)."
    order = list(dict.fromkeys((r.notebook, r.exercise) for r in rows))  # the per-exercise table's order
    ordered = {key: (pitfalls or {})[key] for key in order if key in (pitfalls or {})}
    parts = [class_summary(rows), exercise_statistics(rows) + ([""] + class_pitfalls(ordered) if ordered else []),
             plane or [], failed_notebooks(rows), LEGEND.splitlines()]
    return "\n\n".join("\n".join(part) for part in parts if part)
