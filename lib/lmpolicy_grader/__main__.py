"""The instructor's commands: ``python -m lmpolicy_grader <command>`` (run in the course folder).

  release         generate release/ch11 from source/ch11 (nbgrader generate_assignment --force)
  examples        put the example submissions (reference, blank, mistakes) into submitted/
  grade           release + examples + grade everyone in parallel + feedback + grades.csv + table
  report          print the table and rewrite grades.csv from the gradebook and the last grading
  install-kernel  write the grading kernelspec (prlimit-wrapped) for formgrader or `jupyter kernelspec`
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from lmpolicy_grader.grading import ASSIGNMENT, grade_class, load_config, load_outcomes


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmpolicy_grader", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course folder (default: here)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("release", help="generate the release")
    commands.add_parser("examples", help="place the example submissions")
    grade = commands.add_parser("grade", help="grade the class")
    grade.add_argument("--workers", type=int, default=None, help="worker processes (default: number of cores)")
    grade.add_argument("--student", action="append", help="grade only this student (repeatable)")
    grade.add_argument("--no-release", action="store_true", help="keep the existing release/")
    grade.add_argument("--no-examples", action="store_true", help="grade submitted/ as it is")
    grade.add_argument("--no-feedback", action="store_true", help="skip the feedback HTML")
    commands.add_parser("report", help="print the table, rewrite grades.csv")
    kernel = commands.add_parser("install-kernel", help="write the grading kernelspec")
    kernel.add_argument("--prefix", type=Path, default=None,
                        help="kernels folder (default: <JUPYTER_DATA_DIR>/kernels)")
    args = parser.parse_args(argv)
    course_root = args.course.resolve()
    if not (course_root / "nbgrader_config.py").exists():
        parser.error(f"{course_root} has no nbgrader_config.py: run this in the course folder or pass --course")
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

    if args.command == "release":
        release(course_root)
    elif args.command == "examples":
        from lmpolicy_grader.examples import place_examples
        print("submitted:", ", ".join(place_examples(course_root)))
    elif args.command == "grade":
        started = time.monotonic()
        if not args.no_release:
            print("generating the release ...")
            release(course_root)
        if not args.no_examples:
            from lmpolicy_grader.examples import place_examples
            print("example submissions:", ", ".join(place_examples(course_root)))
        outcomes = grade_class(course_root, students=args.student, workers=args.workers,
                               feedback=not args.no_feedback)
        print(f"graded {len(outcomes)} notebooks in {time.monotonic() - started:.0f} s\n")
        print(report(course_root))
        print(f"\nwrote {course_root / 'grades.csv'}; feedback in {course_root / 'feedback'}")
    elif args.command == "report":
        print(report(course_root))
    elif args.command == "install-kernel":
        from jupyter_core.paths import jupyter_data_dir
        from lmpolicy_grader.kernel import DEFAULT_CPU_SECONDS, DEFAULT_MEMORY_BYTES, install_grading_kernel
        prefix = args.prefix or Path(jupyter_data_dir()) / "kernels"
        limits = load_config(course_root).GradingKernelManager
        kernel_dir = install_grading_kernel(prefix, memory_bytes=limits.get("memory_bytes", DEFAULT_MEMORY_BYTES),
                                            cpu_seconds=limits.get("cpu_seconds", DEFAULT_CPU_SECONDS))
        print("wrote", kernel_dir / "kernel.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
