"""Grades into the LMS: the gradebook import file of Canvas or Moodle, from the report's own summaries.

``python -m lmpolicy_grader export --lms canvas|moodle --mapping students.csv`` writes one file, a row per
student of the class, one column per notebook (``--columns notebook``) or per exercise (``--columns exercise``),
from the same rows as the report and ``grades.csv`` (``report.exercise_rows`` of the outcomes
``export.student_outcomes`` reads: the last grading, and what the gradebook and ``submitted/`` show).

What each file follows, and where that is written:

* **Canvas**, the Gradebook import CSV (Canvas Instructor Guide, "How do I import grades in the Gradebook?",
  https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807; the
  required columns as Ohio State's guide lists them, https://teaching.resources.osu.edu/toolsets/carmencanvas/
  guides/calculating-final-grades/import-csv-file-carmen-grades: the student's name, or Canvas ID, or SIS User
  ID; SIS Login ID; Section; then the assignments). The header is ``Student, ID, SIS User ID, SIS Login ID,
  Section`` and one column per graded item; the second row is Canvas's own ``Points Possible`` row with each
  item's points. A column whose name matches no Canvas assignment
  becomes a new assignment on import (Ohio State's guide); name them in Canvas as they are here, or rename.
  Cells: a score; **empty** where there is no final grade yet (pending hand grading, FAILED): an empty cell
  changes nothing in Canvas's gradebook; ``EX`` excuses (only with ``--missing excused``).
* **Moodle**, the CSV grade import (MoodleDocs, "Grade import", https://docs.moodle.org/311/en/Grade_import;
  Moodle's code for it, grade/import/csv/classes/load_data.php). One identifier column (email address,
  username or ID number: ``--moodle-identifier``; on import "Map from" that column "Map to" useremail,
  username or useridnumber, MoodleDocs' tip) and one column per grade item, mapped to the grade item on the
  import's preview. No points row: a grade item's maximum lives in Moodle, and every row must name a user
  (load_data.php aborts the whole import on a row whose user it cannot find). Cells: a score; ``-`` where
  there is no final grade (load_data.php reads ``''`` or ``-`` as "no grade").

Statuses, the same words as the report (``status.Status``):

=====================  =================  ==========================
the item is            Canvas             Moodle
=====================  =================  ==========================
graded (final)         its score          its score
pending hand grading   empty              ``-``
FAILED                 empty, never 0     ``-``, never 0
not submitted          ``--missing``: ``zero`` (default, the report's rule: a missing notebook scores 0),
                       ``no-grade`` (empty / ``-``) or ``excused`` (Canvas ``EX``; Moodle has no excused
                       cell in its CSV import, so it is refused there)
=====================  =================  ==========================

A notebook with any exercise FAILED or pending has no final grade, so its per-notebook cell has none either
(the score so far is in the report). Every such cell is counted in what the command prints.

The students' LMS identifiers come from a mapping file the instructor writes (CSV, UTF-8, a header row):
``student_id`` (the course's id, the folder name in ``submitted/``) and the LMS's columns, from the allowlist
``MAPPING_COLUMNS``: ``name``, ``canvas_id``, ``sis_user_id``, ``sis_login_id``, ``section`` (Canvas: at least
one of the three ids on each row) and ``email``, ``username``, ``idnumber`` (Moodle: the one
``--moodle-identifier`` names, on each row). A column not in the allowlist, a row without a student, a student
twice, or an LMS identifier given to two students is an error naming the file and the rows
(``MappingError``). The mapping is the roster: a student in it who submitted nothing gets a row (not
submitted). A student graded but not in it is left out of the file (an LMS refuses a row it cannot match:
Moodle aborts the whole import) and listed in a warning: never silently dropped.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from lmpolicy_grader.class_grading.course import ASSIGNMENT, load_config, load_outcomes, submitted_students
from lmpolicy_grader.class_grading.status import Status

Lms = Literal["canvas", "moodle"]
Columns = Literal["notebook", "exercise"]
Missing = Literal["zero", "no-grade", "excused"]
MoodleIdentifier = Literal["email", "username", "idnumber"]

STUDENT_COLUMN = "student_id"
CANVAS_IDS = ("canvas_id", "sis_user_id", "sis_login_id")
MOODLE_IDS = ("email", "username", "idnumber")
# every column a mapping file may have; anything else is a typo or a column this export would silently ignore
MAPPING_COLUMNS = (STUDENT_COLUMN, "name", *CANVAS_IDS, "section", *MOODLE_IDS)

CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_POINTS_ROW = "    Points Possible"  # indented as Canvas's own gradebook export writes it (from memory of
# that export: the stored sources held no copy of it), so the import reads it as that row, never as a student
CANVAS_EXCUSED = "EX"
MOODLE_NO_GRADE = "-"
MOODLE_HEADER = {"email": "Email address", "username": "Username", "idnumber": "ID number"}  # Moodle's field labels


class MappingError(ValueError):
    """The mapping file cannot be used; the message names the file and the rows."""


@dataclass(frozen=True)
class Column:
    """One graded item of the LMS file: a notebook, or one exercise of a notebook."""
    title: str
    notebook: str
    exercise: str | None  # None: the whole notebook
    points: float


@dataclass
class LmsExport:
    """What was written, and what the instructor must know before importing it."""
    path: Path
    students: list[str]                                  # the rows written, in order
    unmapped: list[str] = field(default_factory=list)    # graded students the mapping does not name (not written)
    no_grade: dict[str, list[str]] = field(default_factory=dict)  # student -> items without a final grade, and why

    def summary(self) -> str:
        lines = [f"wrote {self.path} ({len(self.students)} students)"]
        if self.no_grade:
            lines.append(f"{len(self.no_grade)} students have items without a final grade (left without one in "
                         "the file, never 0):" + "".join(f"\n  - {s}: {', '.join(items)}"
                                                        for s, items in sorted(self.no_grade.items())))
        if self.unmapped:
            lines.append(warning_unmapped(self.unmapped))
        return "\n".join(lines)


def warning_unmapped(students: list[str]) -> str:
    return (f"WARNING: {len(students)} graded students are not in the mapping file and are NOT in the LMS file "
            f"(add a row for each): {', '.join(students)}")


# --- the mapping file ------------------------------------------------------------------------------

def read_mapping(path: Path, lms: Lms, moodle_identifier: MoodleIdentifier = "email") -> dict[str, dict[str, str]]:
    """{course student id: {mapping column: value}} of ``path``; MappingError (file, row) for what cannot be used.
    Rows are numbered as a spreadsheet shows them: the header is row 1."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:  # a spreadsheet's byte-order mark is fine
            reader = csv.DictReader(handle)
            header = [name.strip() for name in reader.fieldnames or []]
            records = [(number, row) for number, row in enumerate(reader, start=2)]
    except FileNotFoundError:
        raise MappingError(f"{path}: no such mapping file (a CSV with a {STUDENT_COLUMN!r} column and the LMS's "
                           f"identifiers: {', '.join(MAPPING_COLUMNS[1:])})") from None
    except (UnicodeDecodeError, csv.Error) as error:
        raise MappingError(f"{path}: not a UTF-8 CSV file ({error})") from None
    if STUDENT_COLUMN not in header:
        raise MappingError(f"{path}, row 1: no {STUDENT_COLUMN!r} column "
                           f"(the header is {', '.join(header) or 'empty'})")
    unknown = [name for name in header if name not in MAPPING_COLUMNS]
    if unknown:
        raise MappingError(f"{path}, row 1: unknown column(s) {', '.join(unknown)}; a mapping has "
                           f"{', '.join(MAPPING_COLUMNS)}")
    needed = CANVAS_IDS if lms == "canvas" else (moodle_identifier,)
    if not set(needed) & set(header):
        raise MappingError(f"{path}, row 1: no column for {lms} to identify a student by: add "
                           + (" or ".join(needed)))
    mapping, first_row, lms_ids = {}, {}, {}
    for number, raw in records:
        row = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if k is not None}
        if None in raw:
            raise MappingError(f"{path}, row {number}: more cells than the header has columns")
        if not any(row.values()):
            continue  # a blank line
        student = row.get(STUDENT_COLUMN, "")
        if not student:
            raise MappingError(f"{path}, row {number}: no {STUDENT_COLUMN}")
        if student in mapping:
            raise MappingError(f"{path}, rows {first_row[student]} and {number}: student {student!r} twice")
        ids = [(column, row.get(column, "")) for column in needed if row.get(column, "")]
        if not ids:
            raise MappingError(f"{path}, row {number}: student {student!r} has no " + " or ".join(needed)
                               + f" for {lms} to identify them by")
        for column, value in ids:
            if (column, value) in lms_ids:
                raise MappingError(f"{path}, rows {lms_ids[(column, value)]} and {number}: {column} {value!r} "
                                   "given to two students")
            lms_ids[(column, value)] = number
        mapping[student], first_row[student] = row, number
    return mapping


# --- the class's cells -----------------------------------------------------------------------------

def columns_of(gradebook, assignment: str, per: Columns) -> list[Column]:
    """The LMS file's graded items: each notebook of ``assignment`` (by name), or each of its exercises."""
    from lmpolicy_grader.class_grading.report import _named, exercise_maxima

    columns = []
    for notebook in sorted(gradebook.find_assignment(assignment).notebooks, key=lambda n: n.name):
        maxima = exercise_maxima(notebook)
        if per == "notebook":
            columns.append(Column(f"{assignment} {notebook.name}", notebook.name, None, sum(maxima.values())))
        else:
            columns += [Column(f"{assignment} {notebook.name} {_named(notebook.name, exercise)}", notebook.name,
                               exercise, points) for exercise, points in maxima.items()]
    return columns


def item_state(rows) -> tuple[Status, float | None]:
    """The state of one LMS item from its exercise rows (one exercise, or a notebook's): FAILED if any part
    failed, MISSING if not submitted, PENDING if any part waits for a grader, else GRADED with the score."""
    statuses = {row.status for row in rows}
    for status in (Status.FAILED, Status.MISSING, Status.PENDING):
        if status in statuses:
            return status, None
    return Status.GRADED, sum(row.score or 0.0 for row in rows)


def cell(state: Status, score: float | None, lms: Lms, missing: Missing) -> str:
    """What the LMS file says for an item in ``state`` (the table in the module docstring)."""
    no_grade = "" if lms == "canvas" else MOODLE_NO_GRADE
    if state == Status.GRADED:
        return f"{score:g}"
    if state == Status.MISSING:
        return {"zero": "0", "no-grade": no_grade, "excused": CANVAS_EXCUSED}[missing]
    return no_grade  # pending or FAILED: no final grade, never a 0


def class_rows(course_root: Path, gradebook, assignment: str, students: list[str]) -> dict[str, list]:
    """{student: their exercise rows}, as the report and ``nbgrader export`` read them."""
    from lmpolicy_grader.nbgrader_plugins.export import student_outcomes
    from lmpolicy_grader.class_grading.report import exercise_rows

    graded = {(o.student, o.notebook): o for o in load_outcomes(course_root)}
    return {student: exercise_rows(course_root, student_outcomes(gradebook, course_root, assignment, student, graded),
                                   assignment, gradebook) for student in students}


# --- the file --------------------------------------------------------------------------------------

def export_lms(course_root: Path, lms: Lms, mapping_path: Path, destination: Path | None = None,
               per: Columns = "notebook", missing: Missing = "zero", moodle_identifier: MoodleIdentifier = "email",
               assignment: str = ASSIGNMENT) -> LmsExport:
    """Write the ``lms``'s gradebook import file for the class (see the module docstring); returns what it wrote."""
    from nbgrader.api import Gradebook

    if lms == "moodle" and missing == "excused":
        raise ValueError("Moodle's CSV grade import has no excused cell: use --missing zero or --missing no-grade")
    course_root = Path(course_root)
    mapping = read_mapping(mapping_path, lms, moodle_identifier)
    graded_students = set(submitted_students(course_root, assignment)) | {o.student for o in load_outcomes(course_root)}
    unmapped = sorted(graded_students - set(mapping))
    students = list(mapping)  # the roster, in the mapping file's order
    destination = Path(destination or course_root / f"{lms}_grades.csv")
    config = load_config(course_root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        columns = columns_of(gradebook, assignment, per)
        rows = class_rows(course_root, gradebook, assignment, students)
    result = LmsExport(destination, students, unmapped)
    table = []
    for student in students:
        cells = []
        for column in columns:
            mine = [r for r in rows[student] if r.notebook == column.notebook
                    and (column.exercise is None or r.exercise == column.exercise)]
            state, score = item_state(mine)
            cells.append(cell(state, score, lms, missing))
            if state in (Status.PENDING, Status.FAILED) or (state == Status.MISSING and missing == "no-grade"):
                result.no_grade.setdefault(student, []).append(f"{column.title} ({state})")
        table.append(_identity(lms, student, mapping[student], moodle_identifier) + cells)
    header = (CANVAS_HEADER if lms == "canvas" else [MOODLE_HEADER[moodle_identifier]]) + [c.title for c in columns]
    points = [[CANVAS_POINTS_ROW, "", "", "", ""] + [f"{c.points:g}" for c in columns]] if lms == "canvas" else []
    with open(destination, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *points, *table])
    return result


def _identity(lms: Lms, student: str, mapped: dict[str, str], moodle_identifier: MoodleIdentifier) -> list[str]:
    if lms == "moodle":
        return [mapped[moodle_identifier]]
    return [mapped.get("name") or student, mapped.get("canvas_id", ""), mapped.get("sis_user_id", ""),
            mapped.get("sis_login_id", ""), mapped.get("section", "")]
