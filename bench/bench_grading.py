"""Grading speed, measured side by side (run from the repository root):

    .venv/bin/python bench/bench_grading.py [--part one|class|gradebook] [--students 20] [--workers 2]
        [--notebooks 01_policy_softmax,07_logprob_plumbing]

1. A class of N students (copies of the reference, typical-mistakes and blank examples), graded
   (a) by stock `nbgrader autograde ch11 --force` in one process, and
   (b) by `python -m lmpolicy_grader grade --workers W` (W worker processes, nbgrader started once each),
   both with the course's nbgrader_config.py (same preprocessors and limited kernel), feedback off.
   Goal: (a) / (b) >= 1.7 on 2 cores.
2. One submission (the reference): the bare execution of its notebooks with nbclient, one after the
   other, in the stock python3 kernel, vs. grading it with the course command (worker start-up,
   sanitizing, guard, gradebook, feedback included), with 1 worker and with W workers.
   Goal: grading / bare <= 1.3.
3. The gradebook under concurrent writers (``--part gradebook``, not part of ``all``): W processes
   each write S submissions the way Autograde does (one session creates the submission, the next
   stores its grades), with SQLite's own locking alone and with the grader's ``.gradebook.lock``;
   then one session that holds its write transaction for 6 s while another process writes.
   Reported: seconds, failed sessions, and the rows that arrived.

Everything runs in a temporary copy of the course; the repository is not touched.
"""
from __future__ import annotations

import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

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
    # the example submissions into this course's own submitted/ (`lmpolicy_grader examples` grades them apart)
    _run([python, "-c", "from lmpolicy_grader.examples import place_examples; place_examples('.')"], root)
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


@dataclass
class Settings:
    students: int = 20
    """class size for part 'class'"""
    workers: int = os.cpu_count() or 2
    """worker processes of the course's grader (and writers of part 'gradebook')"""
    notebooks: str = ""
    """comma-separated subset of notebooks (empty: all)"""
    part: Literal["both", "one", "class", "gradebook"] = "both"
    """measure one submission, the class, both, or the gradebook under concurrent writers"""
    sessions: int = 100
    """submissions each writer of part 'gradebook' writes"""


def main(s: Settings) -> None:
    print(f"machine: {os.cpu_count()} cores, {_cpu_model()}; notebooks: {s.notebooks or 'all'}")
    if s.part == "gradebook":
        gradebook_contention(s.workers, s.sessions)
        return
    notebooks = [n for n in s.notebooks.split(",") if n]
    python, nbgrader = str(BIN / "python"), str(BIN / "nbgrader")
    course = [python, "-m", "lmpolicy_grader", "grade", "--no-release", "--no-examples"]
    root = make_course(notebooks)
    if s.part != "class":
        one_submission(root, course, s.workers)
    if s.part != "one":
        whole_class(root, course, nbgrader, s.students, s.workers)
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


# --- the gradebook under concurrent writers ------------------------------------------------------

def _new_gradebook(folder: Path) -> str:
    from nbgrader.api import Gradebook

    from lmpolicy_grader.grading import load_config
    load_config(REPO)  # the course's nbgrader_config.py puts nbgrader's `alembic` on PATH
    url = f"sqlite:///{folder / 'gradebook.db'}"
    with Gradebook(url, "lm-policy") as gradebook:
        gradebook.update_or_create_assignment("ch11")
        gradebook.add_notebook("01", "ch11")
        for number in range(6):
            gradebook.add_grade_cell(f"ex{number}__tests", "01", "ch11", max_score=1, cell_type="code")
            gradebook.add_solution_cell(f"ex{number}__answer", "01", "ch11")
    return url


def _writer(url: str, lock: str | None, name: str, sessions: int, hold_seconds: float, answers) -> None:
    import warnings

    from nbgrader.api import Gradebook
    from lmpolicy_grader.grading import serialise_gradebook_sessions
    warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warns on every submission
    if lock:
        serialise_gradebook_sessions(Path(lock))
    failures = []
    for number in range(sessions):
        student = f"{name}-{number}"
        try:
            with Gradebook(url, "lm-policy") as gradebook:
                gradebook.update_or_create_student(student)
                gradebook.update_or_create_submission("ch11", student)
            with Gradebook(url, "lm-policy") as gradebook:
                for grade in gradebook.find_submission_notebook("01", "ch11", student).grades:
                    grade.auto_score = 1.0
                gradebook.db.flush()  # the UPDATEs reach SQLite: this session now holds the write lock
                time.sleep(hold_seconds)  # ... for long: a slow disk, a descheduled worker
                gradebook.db.commit()
        except Exception as error:
            failures.append(f"{type(error).__name__}: {str(error).splitlines()[0][:60]}")
    answers.put(failures)


def _write_at_once(writers: list[tuple[str, int, float]], locked: bool) -> tuple[float, list[str], int]:
    """(seconds, failures, graded submissions) when ``writers`` (name, sessions, hold) write one gradebook."""
    from nbgrader.api import Gradebook
    folder = Path(tempfile.mkdtemp(prefix="bench-gradebook-"))
    url = _new_gradebook(folder)
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    lock = str(folder / ".gradebook.lock") if locked else None
    processes = [context.Process(target=_writer, args=(url, lock, name, sessions, hold, answers))
                 for name, sessions, hold in writers]
    started = time.perf_counter()
    for process in processes:
        process.start()
        time.sleep(0.5 if writers[0][2] else 0)  # the slow session starts first
    failures = sum((answers.get() for _ in processes), [])
    seconds = time.perf_counter() - started
    for process in processes:
        process.join()
    with Gradebook(url, "lm-policy") as gradebook:
        graded = sum(all(g.auto_score == 1.0 for g in s.notebooks[0].grades)
                     for s in gradebook.assignment_submissions("ch11"))
    shutil.rmtree(folder)
    return seconds, failures, graded


def gradebook_contention(workers: int, sessions: int) -> None:
    print(f"\nthe gradebook (SQLite) under {workers} concurrent writers, {sessions} submissions each")
    for locked in (False, True):
        seconds, failures, graded = _write_at_once([(f"w{n}", sessions, 0.0) for n in range(workers)], locked)
        print(f"  {'with .gradebook.lock' if locked else 'SQLite locking alone':22} {seconds:6.1f} s   "
              f"{len(failures)} failed sessions, {graded}/{workers * sessions} submissions graded   "
              f"{Counter(failures).most_common(2)}")
    print("one session holding its write for 6 s while another process writes one submission")
    for locked in (False, True):
        seconds, failures, graded = _write_at_once([("slow", 1, 6.0), ("other", 1, 0.0)], locked)
        print(f"  {'with .gradebook.lock' if locked else 'SQLite locking alone':22} {seconds:6.1f} s   "
              f"{len(failures)} failed sessions, {graded}/2 submissions graded   {Counter(failures).most_common(2)}")


if __name__ == "__main__":
    main(tyro.cli(Settings, description=__doc__.splitlines()[0]))
