"""The instructor's commands: ``python -m lmpolicy_grader [--course DIR] <command>`` (default: the course here).

  release         generate release/ch11 from source/ch11 (nbgrader generate_assignment --force)
  examples        grade the example submissions (reference, blank, mistakes) in their own course, examples-course/
  grade           release + grade the class in submitted/ in parallel + feedback + grades.csv + report
                  (a class with no student yet: the examples instead, in examples-course/); on a local
                  Dask cluster, or on an existing one with --scheduler tcp://host:8786
  report          print the report and rewrite grades.csv from the gradebook and the last grading
  export          write the gradebook import file of Canvas or Moodle (--lms), with a student mapping file
  install-kernel  write the grading kernelspec (prlimit-wrapped) for formgrader or `jupyter kernelspec`

Each command is a settings dataclass below, made into a command line by tyro (as CleanRL does):
booleans are ``--flag`` / ``--no-flag`` and take no value, so ``--no-release False`` is an error.
"""
from __future__ import annotations

import sys

if __name__ == "__main__":  # the command line: the local cluster's forkserver starts before the heavy imports below
    from lmpolicy_grader.class_grading.cluster import start_forkserver
    start_forkserver(sys.argv[1:])

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Union

import tyro

from lmpolicy_grader.class_grading.cluster import ClusterUnavailable
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.lms_export import Columns, Lms, Missing, MoodleIdentifier
from lmpolicy_grader.class_grading.course import ASSIGNMENT, load_config, load_outcomes, submitted_students
from lmpolicy_grader.class_grading.release import release
from lmpolicy_grader.isolation.sandbox import SandboxUnavailable
from lmpolicy_grader.class_grading.status import Status

_SANDBOX = {"course": None, "on": True, "off": False}


def report(course_root: Path, assignment: str = ASSIGNMENT) -> str:
    from lmpolicy_grader.class_grading.examples_course import examples_in_class
    from lmpolicy_grader.class_grading.report import exercise_rows, format_report, write_csv

    from lmpolicy_grader.class_grading.pitfalls import common_pitfalls
    from lmpolicy_grader.class_grading.reward_kl_plane import draw

    rows = exercise_rows(course_root, load_outcomes(course_root), assignment)
    write_csv(rows, course_root / "grades.csv")
    plane = draw(course_root, rows, assignment)  # next to grades.csv, and into each measured student's feedback
    lingering = examples_in_class(course_root)
    note = (f"\n\nNote: submitted/ holds students named as the examples are ({', '.join(lingering)}); if an older "
            "version of this grader put them there, remove them (submissions, grades) with "
            "`python -m lmpolicy_grader examples --remove-from-class`") if lingering else ""
    return format_report(rows, common_pitfalls(course_root, rows, assignment), plane.lines) + note


def grade_examples(course_root: Path, workers: int | None = None, feedback: bool = True,
                   sandbox: bool | None = None, scheduler: str | None = None) -> None:
    """Make examples-course/ afresh (the example submissions' own course), grade it and print its report."""
    from lmpolicy_grader.class_grading.examples_course import EXAMPLES_COURSE, make_examples_course
    started = time.monotonic()
    print(f"the example submissions, in their own course {course_root / EXAMPLES_COURSE} ...")
    _grade_and_report(make_examples_course(course_root), None, workers, feedback, sandbox, started, scheduler)


def _grade_and_report(course_root: Path, students: list[str] | None, workers: int | None, feedback: bool,
                      sandbox: bool | None, started: float, scheduler: str | None = None) -> None:
    from lmpolicy_grader.class_grading.gradebook import GradebookUnavailable
    try:
        outcomes = grade_class(course_root, students=students, workers=workers, feedback=feedback, sandbox=sandbox,
                               scheduler=scheduler)
    except (SandboxUnavailable, GradebookUnavailable, ClusterUnavailable) as error:
        sys.exit(str(error))
    counts = {status: sum(o.status == status for o in outcomes) for status in (Status.GRADED, Status.FAILED, Status.MISSING)}
    print(f"graded {counts[Status.GRADED]} notebooks, {counts[Status.FAILED]} FAILED, {counts[Status.MISSING]} not "
          f"submitted ({len({o.student for o in outcomes})} students) in {time.monotonic() - started:.0f} s\n")
    warned = list(dict.fromkeys(warning for outcome in outcomes for warning in outcome.warnings))
    if warned:
        print("the grader warned while it graded:" + "".join(f"\n  - {warning}" for warning in warned) + "\n")
    print(report(course_root))
    print(f"\nwrote {course_root / 'grades.csv'}; feedback in {course_root / 'feedback'}")


@dataclass
class Release:
    """Generate release/ch11 from source/ch11 (nbgrader generate_assignment --force)."""

    def run(self, course_root: Path) -> None:
        release(course_root)


@dataclass
class Examples:
    """Grade the example submissions (reference, blank, mistakes) in their own course, examples-course/."""

    workers: int | None = None
    """worker processes (None: one per core)"""
    remove_from_class: bool = False
    """instead: remove example students left in this course's own class (submitted/, autograded/, feedback/,
    grading_status.json, and the gradebook through `nbgrader db student remove --force`)"""

    def run(self, course_root: Path) -> None:
        from lmpolicy_grader.class_grading.examples_course import examples_in_class, remove_from_class
        if self.remove_from_class:
            found = examples_in_class(course_root)
            remove_from_class(course_root, found)
            print(f"removed {len(found)} example students from {course_root}" if found else "no example students here")
            return
        grade_examples(course_root, self.workers)


@dataclass
class Grade:
    """Release, grade the class in submitted/ in parallel, write feedback and grades.csv, print the report."""

    workers: int | None = None
    """worker processes of the grader's own local Dask cluster (None: one per core); not with --scheduler"""
    scheduler: str | None = None
    """grade on the Dask cluster of this scheduler (tcp://host:8786), started by `dask scheduler` and
    `dask worker --nthreads 1 --memory-limit 0`, or a Dask deployer; its workers must see this course
    folder at the same path (None: a local cluster of --workers processes, closed after)"""
    student: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """grade only this student: --student alice --student bob (none: everyone in submitted/)"""
    release: bool = True
    """regenerate release/ first (--no-release keeps the existing one)"""
    examples: bool = True
    """when submitted/ holds no student yet, grade the example submissions in their own course,
    examples-course/, instead (--no-examples: never); a class with students is graded without them"""
    feedback: bool = True
    """write the feedback HTML (--no-feedback skips it)"""
    sandbox: Literal["course", "on", "off"] = "course"
    """run the kernels in the bubblewrap sandbox: 'on', 'off' (only for trusted submissions: they can
    then read the whole course), or as the course config says (c.GradingKernelManager.sandbox)"""

    def run(self, course_root: Path) -> None:
        started = time.monotonic()
        if self.release:
            print("generating the release ...")
            release(course_root)
        students = list(self.student) or submitted_students(course_root)
        if self.examples and not students:
            print("no student in submitted/ yet: grading the example submissions instead")
            grade_examples(course_root, self.workers, self.feedback, _SANDBOX[self.sandbox], self.scheduler)
            return
        _grade_and_report(course_root, students, self.workers, self.feedback, _SANDBOX[self.sandbox], started,
                          self.scheduler)


@dataclass
class Report:
    """Print the report and rewrite grades.csv from the gradebook and the last grading (no grading)."""

    def run(self, course_root: Path) -> None:
        print(report(course_root))


@dataclass
class Export:
    """Write the gradebook import file of Canvas or Moodle (one row per student of the mapping file) from the
    gradebook and the last grading, the same summaries as the report. What has no final grade is never a 0:
    a notebook or exercise pending hand grading or FAILED is an empty cell for Canvas (its import then changes
    nothing) and '-' for Moodle (its import reads it as no grade); see --missing for work not submitted. Graded
    students the mapping does not name are left out and listed in a warning."""

    lms: Lms
    """canvas: the Gradebook import CSV (Student, ID, SIS User ID, SIS Login ID, Section, a column per item,
    the Points Possible row); moodle: the CSV grade import (an identifier column, a column per grade item)"""
    mapping: Path
    """CSV with a header: student_id (the course's), then the LMS's: name, canvas_id, sis_user_id, sis_login_id,
    section (Canvas: one of the three ids per row), email, username, idnumber (Moodle: --moodle-identifier's)"""
    columns: Columns = "notebook"
    """one column per notebook, or per exercise"""
    missing: Missing = "zero"
    """a notebook not submitted: zero (0, as the report counts it), no-grade (Canvas empty, Moodle '-'), or
    excused (Canvas EX; refused for Moodle, whose CSV import has no excused cell)"""
    moodle_identifier: MoodleIdentifier = "email"
    """the mapping column Moodle identifies students by (on import: Map from it, to useremail/username/useridnumber)"""
    to: Path | None = None
    """the file to write (default: <course>/<lms>_grades.csv)"""

    def run(self, course_root: Path) -> None:
        from lmpolicy_grader.class_grading.lms_export import export_lms
        try:
            written = export_lms(course_root, self.lms, self.mapping, self.to, self.columns, self.missing,
                                 self.moodle_identifier)
        except ValueError as error:  # a MappingError (the file and the row), or Moodle asked to excuse
            sys.exit(str(error))
        print(written.summary())


@dataclass
class InstallKernel:
    """Write the grading kernelspec (prlimit-wrapped, the course's limits) for formgrader or `jupyter kernelspec`."""

    prefix: Path | None = None
    """kernels folder (default: <JUPYTER_DATA_DIR>/kernels)"""

    def run(self, course_root: Path) -> None:
        from jupyter_core.paths import jupyter_data_dir

        from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager, install_grading_kernel
        limits = GradingKernelManager(config=load_config(course_root))  # the defaults, or the course's
        kernel_dir = install_grading_kernel(self.prefix or Path(jupyter_data_dir()) / "kernels",
                                            memory_bytes=limits.memory_bytes, cpu_seconds=limits.cpu_seconds)
        print("wrote", kernel_dir / "kernel.json")


@dataclass
class Command:
    """The instructor's commands (run in the course folder, or pass --course)."""

    command: Union[Annotated[Release, tyro.conf.subcommand("release")],
                   Annotated[Examples, tyro.conf.subcommand("examples")],
                   Annotated[Grade, tyro.conf.subcommand("grade")],
                   Annotated[Report, tyro.conf.subcommand("report")],
                   Annotated[Export, tyro.conf.subcommand("export")],
                   Annotated[InstallKernel, tyro.conf.subcommand("install-kernel")]]
    course: Path = Path(".")
    """course folder, holding nbgrader_config.py"""


def parse(argv: list[str] | None = None) -> Command:
    """The command and its settings from the command line (``--course`` before or after the command)."""
    return tyro.cli(Command, args=argv, prog="python -m lmpolicy_grader", description=__doc__.splitlines()[0],
                    config=(tyro.conf.OmitArgPrefixes, tyro.conf.CascadeSubcommandArgs))


def main(argv: list[str] | None = None) -> int:
    chosen = parse(argv)
    course_root = chosen.course.resolve()
    if not (course_root / "nbgrader_config.py").exists():
        sys.exit(f"{course_root} has no nbgrader_config.py: run this in the course folder or pass --course")
    from lmpolicy_grader.class_grading.gradebook import GradebookUnavailable
    try:
        chosen.command.run(course_root)
    except GradebookUnavailable as error:
        sys.exit(str(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
