"""The instructor's commands: ``python -m lmpolicy_grader [--course DIR] <command>`` (default: the course here).

  release         generate release/ch11 from source/ch11 (nbgrader generate_assignment --force)
  examples        put the example submissions (reference, blank, mistakes) into submitted/
  grade           release + examples + grade everyone in parallel + feedback + grades.csv + table
  report          print the table and rewrite grades.csv from the gradebook and the last grading
  install-kernel  write the grading kernelspec (prlimit-wrapped) for formgrader or `jupyter kernelspec`

Each command is a settings dataclass below, made into a command line by tyro (as CleanRL does):
booleans are ``--flag`` / ``--no-flag`` and take no value, so ``--no-release False`` is an error.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Union

import tyro

from lmpolicy_grader.grading import ASSIGNMENT, grade_class, load_config, load_outcomes
from lmpolicy_grader.sandbox import SandboxUnavailable


def release(course_root: Path, assignment: str = ASSIGNMENT) -> None:
    """nbgrader generate_assignment <assignment> --force, through nbgrader's API."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    config = load_config(course_root)
    coursedir = CourseDirectory(config=config, root=str(course_root))
    coursedir.assignment_id = assignment
    generate = GenerateAssignment(coursedir=coursedir, config=config)
    generate.force = True
    generate.start()


def report(course_root: Path, assignment: str = ASSIGNMENT) -> str:
    from lmpolicy_grader.report import exercise_rows, format_table, write_csv

    rows = exercise_rows(course_root, load_outcomes(course_root), assignment)
    write_csv(rows, course_root / "grades.csv")
    return format_table(rows)


def _place_examples(course_root: Path) -> list[str]:
    from lmpolicy_grader.examples import place_examples
    return place_examples(course_root)


@dataclass
class Release:
    """Generate release/ch11 from source/ch11 (nbgrader generate_assignment --force)."""

    def run(self, course_root: Path) -> None:
        release(course_root)


@dataclass
class Examples:
    """Put the example submissions (reference, blank, mistakes) into submitted/."""

    def run(self, course_root: Path) -> None:
        print("submitted:", ", ".join(_place_examples(course_root)))


@dataclass
class Grade:
    """Release, place the examples, grade everyone in parallel, write feedback and grades.csv, print the table."""

    workers: int | None = None
    """worker processes (None: one per core)"""
    student: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """grade only this student: --student alice --student bob (none: everyone in submitted/)"""
    release: bool = True
    """regenerate release/ first (--no-release keeps the existing one)"""
    examples: bool = True
    """place the example submissions first (--no-examples grades submitted/ as it is)"""
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
        if self.examples:
            print("example submissions:", ", ".join(_place_examples(course_root)))
        try:
            outcomes = grade_class(course_root, students=list(self.student) or None, workers=self.workers,
                                   feedback=self.feedback,
                                   sandbox={"course": None, "on": True, "off": False}[self.sandbox])
        except SandboxUnavailable as error:
            sys.exit(str(error))
        print(f"graded {len(outcomes)} notebooks in {time.monotonic() - started:.0f} s\n")
        print(report(course_root))
        print(f"\nwrote {course_root / 'grades.csv'}; feedback in {course_root / 'feedback'}")


@dataclass
class Report:
    """Print the table and rewrite grades.csv from the gradebook and the last grading (no grading)."""

    def run(self, course_root: Path) -> None:
        print(report(course_root))


@dataclass
class InstallKernel:
    """Write the grading kernelspec (prlimit-wrapped, the course's limits) for formgrader or `jupyter kernelspec`."""

    prefix: Path | None = None
    """kernels folder (default: <JUPYTER_DATA_DIR>/kernels)"""

    def run(self, course_root: Path) -> None:
        from jupyter_core.paths import jupyter_data_dir

        from lmpolicy_grader.kernel import GradingKernelManager, install_grading_kernel
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
    chosen.command.run(course_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
