"""Grading speed, measured side by side (run from the repository root):

    .venv/bin/python bench/bench_grading.py [--students 20] [--workers 2] [--notebooks 01_policy_softmax,07_logprob_plumbing]

1. A class of N students (copies of the reference, typical-mistakes and blank examples), graded
   (a) by stock `nbgrader autograde ch11 --force` in one process, and
   (b) by `python -m lmpolicy_grader grade --workers W` (W worker processes, nbgrader started once each),
   both with the course's nbgrader_config.py (same preprocessors and limited kernel), feedback off.
   Goal: (a) / (b) >= 1.7 on 2 cores.
2. One submission (the reference): the bare execution of its notebooks with nbclient, one after the
   other, in the stock python3 kernel, vs. grading it with the course command (worker start-up,
   sanitizing, guard, gradebook, feedback included), with 1 worker and with W workers.
   Goal: grading / bare <= 1.3.

Everything runs in a temporary copy of the course; the repository is not touched.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _run(args: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return seconds


def make_course(notebooks: list[str] | None) -> Path:
    root = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    shutil.copytree(REPO / "source", root / "source")
    if notebooks:
        for path in (root / "source" / "ch11").glob("*.ipynb"):
            if path.stem not in notebooks:
                path.unlink()
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    python = str(BIN / "python")
    _run([python, "-m", "lmpolicy_grader", "release"], root)
    _run([python, "-m", "lmpolicy_grader", "examples"], root)
    return root


def make_class(root: Path, size: int) -> list[str]:
    submitted = root / "submitted"
    examples = ["reference", "mistakes", "blank"]
    students = [f"student{n:02d}" for n in range(1, size + 1)]
    for n, student in enumerate(students):
        shutil.copytree(submitted / examples[n % len(examples)], submitted / student)
    for example in os.listdir(submitted):
        if example not in students:
            shutil.rmtree(submitted / example)
    return students


def bare_execution(root: Path) -> float:
    """Execute the reference's notebooks one after the other, as the grader would, without nbgrader."""
    import nbformat
    from nbclient import NotebookClient

    os.environ["NBGRADER_EXECUTION"] = "autograde"
    started = time.perf_counter()
    for path in sorted((root / "source" / "ch11").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    del os.environ["NBGRADER_EXECUTION"]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--notebooks", default="", help="comma-separated subset of notebooks (default: all)")
    parser.add_argument("--part", choices=("both", "one", "class"), default="both",
                        help="measure one submission, the class, or both")
    args = parser.parse_args()
    os.environ["PATH"] = str(BIN) + os.pathsep + os.environ["PATH"]
    notebooks = [n for n in args.notebooks.split(",") if n]
    python, nbgrader = str(BIN / "python"), str(BIN / "nbgrader")
    course = [python, "-m", "lmpolicy_grader", "grade", "--no-release", "--no-examples"]
    print(f"machine: {os.cpu_count()} cores, {_cpu_model()}; notebooks: {', '.join(notebooks) or 'all'}")

    root = make_course(notebooks)
    if args.part != "class":
        one_submission(root, course, args.workers)
    if args.part != "one":
        whole_class(root, course, nbgrader, args.students, args.workers)
    shutil.rmtree(root)


def one_submission(root: Path, course: list[str], workers: int) -> None:
    bare = bare_execution(root)
    grade_one_1 = _run(course + ["--student", "reference", "--workers", "1"], root)
    grade_one_w = _run(course + ["--student", "reference", "--workers", str(workers)], root)
    print(f"\none submission (reference, {len(list((root / 'source' / 'ch11').glob('*.ipynb')))} notebooks)")
    print(f"  bare execution (nbclient, stock kernel, serial) {bare:7.1f} s")
    print(f"  lmpolicy_grader grade, 1 worker                {grade_one_1:7.1f} s   ratio {grade_one_1 / bare:.2f} (goal <= 1.3)")
    print(f"  lmpolicy_grader grade, {workers} workers               {grade_one_w:7.1f} s   ratio {grade_one_w / bare:.2f}")


def whole_class(root: Path, course: list[str], nbgrader: str, size: int, workers: int) -> None:
    students = make_class(root, size)
    stock = _run([nbgrader, "autograde", "ch11", "--force", "--log-level=ERROR"], root)
    parallel = _run(course + ["--workers", str(workers), "--no-feedback"], root)
    print(f"\na class of {len(students)} (reference / mistakes / blank copies)")
    print(f"  stock nbgrader autograde, one process          {stock:7.1f} s")
    print(f"  lmpolicy_grader grade, {workers} workers               {parallel:7.1f} s   speed-up {stock / parallel:.2f}x (goal >= 1.7x)")


if __name__ == "__main__":
    main()
