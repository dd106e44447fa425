"""Grading speed, measured side by side (run from the repository root):

    .venv/bin/python bench/bench_grading.py [--part one|class|gradebook|engine] [--students 20] [--workers 2]
        [--notebooks 01_policy_softmax,07_logprob_plumbing] [--sandbox on|off] [--class-size 40]

1. A class of N students (copies of the reference, typical-mistakes and blank examples), graded
   (a) by stock `nbgrader autograde ch11 --force` in one process, and
   (b) by `python -m lmpolicy_grader grade --workers W` (W worker processes, nbgrader started once each),
   both with the course's nbgrader_config.py (same preprocessors and limited kernel), feedback off;
   (a) twice: as nbgrader starts kernels (each notebook's when it comes: ``spare_kernels=False``), and
   with the course's spare kernels, which that config also gives stock nbgrader; (a) and (b) again with
   the trusted test kernel started from its command line (``c.TrustedKernelManager.forked = False``);
   and (c) by nbgrader as it ships (its own preprocessors, no sandbox, the tests in the python3 kernel).
   Goal: (a) / (b) >= 2.5 on 2 cores. Also the cores each run keeps busy (the machine's, from /proc/stat)
   and the CPU seconds that makes, beside the most the goal allows on these cores. ``--rounds``: all of
   it again, every second round in the other order; medians, and the goal's ratio per round.
2. One submission (the reference): the bare execution of its notebooks with nbclient, one after the
   other, in the stock python3 kernel, vs. grading it with the course command (worker start-up,
   sanitizing, guard, gradebook, feedback included), with 1 worker and with W workers.
   Goal: grading / bare <= 1.2 with 1 worker (issue 20).
3. The gradebook under concurrent writers (``--part gradebook``, not part of ``all``): W processes
   each write S submissions the way Autograde does (one session creates the submission, the next
   stores its grades), with SQLite's own locking alone and with the grader's ``.gradebook.lock``;
   then one session that holds its write transaction for 6 s while another process writes.
   Reported: seconds, failed sessions, and the rows that arrived.
4. The grading engine (``--part engine``, not part of ``all``): a class of ``--class-size`` copies of the tiny
   test course's reference (tests/lmpolicy_grader/tiny_course.py: one short notebook, so the engine's own
   cost weighs the most), graded (a) by a plain pool of W forked processes calling ``grading.grade_unit``,
   the way the grader worked before Dask, and (b) by ``grading.grade_class`` on a Dask LocalCluster of W
   workers; both from start-up to the last notebook, feedback on, each in a fresh copy of the course.
   Reported: seconds, notebooks per second, and the Dask overhead (b) / (a) - 1. Goal: at most 10%.
   Also the CPU seconds of the engine's own processes (this one, with Dask's scheduler and nannies, and the
   workers it reaped; the kernels, the same under both, mostly escape the count, since a worker rarely
   waits for them), which a machine shared with other work disturbs far less than seconds.

``--sandbox off`` grades every part without the bubblewrap sandbox, to measure what it costs.

Everything runs in a temporary copy of the course; the repository is not touched.
"""
from __future__ import annotations

import multiprocessing
import os
import platform
import shutil
import statistics
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


def _busy_cpu_seconds() -> float:
    """CPU seconds this machine has spent busy since boot (all cores; /proc/stat, in clock ticks)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _run_with_cores(args: list[str], cwd: Path) -> tuple[float, float]:
    """_run's seconds, and the cores the machine kept busy on average meanwhile: the command and every
    process it started (kernels too, which a killed bwrap leaves for init to reap, out of rusage's count),
    plus whatever else runs here (so an upper bound on a shared machine)."""
    before = _busy_cpu_seconds()
    seconds = _run(args, cwd)
    return seconds, (_busy_cpu_seconds() - before) / seconds


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
    _run([python, "-c", "from lmpolicy_grader.class_grading.examples_course import place_examples; place_examples('.')"], root)
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
    part: Literal["both", "one", "class", "gradebook", "engine"] = "both"
    """measure one submission, the class, both, the gradebook under concurrent writers, or the grading engine"""
    sessions: int = 100
    """submissions each writer of part 'gradebook' writes"""
    sandbox: Literal["on", "off"] = "on"
    """grade in the bubblewrap sandbox or without it (parts one, class and engine)"""
    runs: tuple[str, ...] = ()
    """runs of part 'class', each one argument (none: all): stock, "stock, trusted kernel not forked", "stock with
    spares", "grader, student by student", grader, "grader, trusted kernel not forked", "grader, grading kernel
    not forked", "nbgrader as shipped";
    grader is always run"""
    class_size: int = 40
    """notebooks graded by part 'engine'"""
    rounds: int = 1
    """rounds of parts 'class' and 'engine', each grading every way; every second round runs them in the other
    order (A B, B A, ...), so that a change of the machine's load weighs on all alike"""


def main(s: Settings) -> None:
    print(f"machine: {os.cpu_count()} cores, {_cpu_model()}; notebooks: {s.notebooks or 'all'}; "
          f"sandbox {s.sandbox}; {_load()}")
    if s.part == "gradebook":
        gradebook_contention(s.workers, s.sessions)
        return
    if s.part == "engine":
        grading_engine(s.class_size, s.workers, s.sandbox == "on", s.rounds)
        return
    notebooks = [n for n in s.notebooks.split(",") if n]
    python, nbgrader = str(BIN / "python"), str(BIN / "nbgrader")
    course = [python, "-m", "lmpolicy_grader", "grade", "--no-release", "--no-examples", "--sandbox", s.sandbox]
    # stock nbgrader reads the course config, whose kernel manager is the grader's: tell it the same
    stock_sandbox = [] if s.sandbox == "on" else ["--GradingKernelManager.sandbox=False"]
    root = make_course(notebooks)
    if s.part != "class":
        one_submission(root, course, s.workers)
    if s.part != "one":
        whole_class(root, course, [nbgrader, *stock_sandbox], s.students, s.workers, s.rounds,
                    [name.strip() for name in s.runs if name.strip()])
    print(f"\n{_load()}")
    shutil.rmtree(root)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min)"


def one_submission(root: Path, course: list[str], workers: int) -> None:
    bare = bare_execution(root)
    grade_one_1 = _run(course + ["--student", "reference", "--workers", "1"], root)
    grade_one_w = _run(course + ["--student", "reference", "--workers", str(workers)], root)
    print(f"\none submission (reference, {len(list((root / 'source' / 'ch11').glob('*.ipynb')))} notebooks)")
    print(f"  bare execution (nbclient, stock kernel, serial) {bare:7.1f} s")
    print(f"  lmpolicy_grader grade, 1 worker                {grade_one_1:7.1f} s   ratio {grade_one_1 / bare:.2f} (goal <= 1.2)")
    print(f"  lmpolicy_grader grade, {workers} workers               {grade_one_w:7.1f} s   ratio {grade_one_w / bare:.2f}")


def whole_class(root: Path, course: list[str], nbgrader: list[str], size: int, workers: int, rounds: int,
                only: list[str]) -> None:
    from lmpolicy_grader.class_grading.course import STATUS_FILE

    students = make_class(root, size)
    # stock nbgrader reads the course config, so its Execute is the course's GradingExecute, spare kernels
    # included; nbgrader's own way, each notebook's kernels started when it comes, is spare_kernels=False
    autograde = [*nbgrader, "autograde", "ch11", "--force", "--log-level=ERROR"]
    grade = course + ["--workers", str(workers), "--no-feedback"]
    course_config = (root / "nbgrader_config.py").read_text()
    unforked = course_config + "\nc.TrustedKernelManager.forked = False\n"
    own_way = course_config + "\nc.GradingExecute.spare_kernels = False\n"
    same_unforked = "  the same, the trusted test kernel started from its command line"
    runs = {  # name: (what the table calls it, command, the course's nbgrader_config.py for it)
        "stock": ("stock nbgrader autograde, one process, kernels started as each notebook comes", autograde, own_way),
        "stock, trusted kernel not forked": (same_unforked, autograde, own_way + "c.TrustedKernelManager.forked = False\n"),
        "stock with spares": ("stock nbgrader autograde, one process, the course's spare kernels", autograde, course_config),
        # the same grading as a course's first, with no times to order by: student by student
        "grader, student by student": (f"  the same, student by student (no {STATUS_FILE} from a last grading)",
                                       ["sh", "-c", f'rm -f {STATUS_FILE} && exec "$@"', "sh", *grade], course_config),
        "grader": (f"lmpolicy_grader grade, {workers} workers, longest first as the last grading timed them", grade,
                   course_config),
        "grader, trusted kernel not forked": (same_unforked, grade, unforked),
        "grader, grading kernel not forked": ("  the same, the grading kernel started from its command line in its sandbox",
                                              grade, course_config + "\nc.GradingKernelManager.forked = False\n"),
        "nbgrader as shipped": ("nbgrader as shipped: its own preprocessors, no sandbox, tests in the python3 kernel",
                                autograde, _shipped_config(root)),
    }
    if only:
        if unknown := set(only) - set(runs):
            raise SystemExit(f"--runs: no run named {'; '.join(sorted(unknown))}; the runs are: {'; '.join(runs)}")
        runs = {name: run for name, run in runs.items() if name in only or name == "grader"}
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for round_ in range(rounds):  # every second round in the other order, so that a change of load weighs on all
        for name in (list(runs) if round_ % 2 == 0 else list(reversed(runs))):
            _, command, config = runs[name]
            (root / "nbgrader_config.py").write_text(config)
            measured[name].append(_run_with_cores(command, root))
    (root / "nbgrader_config.py").write_text(course_config)
    print(f"\na class of {len(students)} (reference / mistakes / blank copies), {rounds} round(s), median")
    seconds = {name: statistics.median(s for s, _ in values) for name, values in measured.items()}
    cores_busy = {name: statistics.median(c for _, c in values) for name, values in measured.items()}
    for name, (label, _, _) in runs.items():
        print(f"  {label:84} {seconds[name]:7.1f} s   {cores_busy[name]:.2f} cores busy")
    for baseline in [name for name in ("stock", "stock with spares", "nbgrader as shipped") if name in runs]:
        per_round = ", ".join(f"{b[0] / g[0]:.2f}x" for b, g in zip(measured[baseline], measured["grader"]))
        goal = {"stock": "   (goal >= 2.5x)", "nbgrader as shipped": "   (goal >= 2.2x, issue 20)"}.get(baseline, "")
        print(f"  lmpolicy_grader over {baseline}: {per_round}{goal}")
    if "grader, student by student" in runs:
        per_round = ", ".join(f"{g[0] / b[0]:.2f}" for b, g in zip(measured["grader, student by student"],
                                                                      measured["grader"]))
        print(f"  longest first: {per_round} of the time student by student")
    if "grader, grading kernel not forked" in runs:
        per_round = ", ".join(f"{g[0] / b[0]:.2f}" for b, g in zip(measured["grader, grading kernel not forked"],
                                                                      measured["grader"]))
        print(f"  forking the grading kernel into its sandbox: {per_round} of the time started from its command line")
    if not {"stock", "stock, trusted kernel not forked", "grader, trusted kernel not forked"} <= set(runs):
        return  # the lines below compare runs that were left out
    print(f"  forking the trusted kernel: stock {seconds['stock'] / seconds['stock, trusted kernel not forked']:.2f}, "
          f"lmpolicy_grader {seconds['grader'] / seconds['grader, trusted kernel not forked']:.2f} of the time unforked")
    # on a machine this small, a grader can only be faster than stock by the cores stock leaves idle and by
    # doing less work per notebook; the goal's share of stock's CPU seconds says how much less it would take
    cores, goal = os.cpu_count() or 1, 2.5
    cpu = {name: seconds[name] * cores_busy[name] for name in runs}
    most = seconds["stock"] / goal * cores
    print(f"  CPU seconds: stock {cpu['stock']:.0f} (with spares {cpu['stock with spares']:.0f}), lmpolicy_grader "
          f"{cpu['grader']:.0f} ({cpu['grader'] / cpu['stock']:.2f} of stock's); {goal}x faster than stock on {cores} "
          f"cores, every core busy, leaves at most {most:.0f} ({most / cpu['stock']:.2f} of stock's)")


def _shipped_config(root: Path) -> str:
    """An nbgrader_config.py for the course at ``root`` as nbgrader ships: its own preprocessors and kernel,
    only the course's name, folder and gradebook set (and nbgrader's ``alembic`` on PATH)."""
    gradebook = f"sqlite:///{root / 'gradebook.db'}"
    return ("import os, sys\nos.environ['PATH'] = os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH']\n"
            f"c = get_config()\nc.CourseDirectory.course_id = 'lm-policy'\nc.CourseDirectory.root = {str(root)!r}\n"
            f"c.CourseDirectory.db_url = {gradebook!r}\n")


# --- the gradebook under concurrent writers ------------------------------------------------------

def _new_gradebook(folder: Path) -> str:
    from nbgrader.api import Gradebook

    from lmpolicy_grader.class_grading.course import load_config
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
    from lmpolicy_grader.class_grading.gradebook import serialise_gradebook_sessions
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



# --- the grading engine: a fork pool against Dask -------------------------------------------------

def _engine_course(size: int) -> tuple[Path, list[tuple[str, str]]]:
    """A fresh tiny course with ``size`` copies of its reference submitted, and the (student, notebook) units."""
    sys.path.insert(0, str(REPO))
    from tests.lmpolicy_grader import tiny_course

    from lmpolicy_grader.__main__ import release
    root = tiny_course.make_course(Path(tempfile.mkdtemp(prefix="bench-engine-")))
    release(root)
    students = [f"student{n:02d}" for n in range(1, size + 1)]
    for student in students:
        tiny_course.submit(root, student, tiny_course.source_notebook())
    return root, [(student, tiny_course.NOTEBOOK) for student in students]


_POOL_CONFIG = None


def _pool_start(course_root: str, sandbox: bool) -> None:
    global _POOL_CONFIG
    from lmpolicy_grader.class_grading.grading import worker_config
    _POOL_CONFIG = worker_config(course_root, sandbox)


def _pool_grade(job: tuple[str, str, str]):
    from lmpolicy_grader.class_grading.grading import grade_unit
    course_root, student, notebook = job
    return grade_unit(Path(course_root), _POOL_CONFIG, student, notebook)


def fork_pool(root: Path, units: list[tuple[str, str]], workers: int, sandbox: bool) -> list:
    """The grader before Dask, reduced to its core: nbgrader imported once, then W forked workers."""
    import nbgrader.converters  # noqa: F401

    import lmpolicy_grader.nbgrader_plugins  # noqa: F401
    with multiprocessing.get_context("fork").Pool(workers, initializer=_pool_start,
                                                  initargs=(str(root), sandbox)) as pool:
        return pool.map(_pool_grade, [(str(root), *unit) for unit in units], chunksize=1)


def grading_engine(size: int, workers: int, sandbox: bool, rounds: int) -> None:
    from lmpolicy_grader.class_grading.grading import grade_class
    print(f"\nthe grading engine: {size} copies of the tiny course's reference, {workers} workers, "
          f"sandbox {'on' if sandbox else 'off'}, {rounds} round(s)")
    engines = [("fork pool", lambda root, units: fork_pool(root, units, workers, sandbox)),
               ("Dask LocalCluster", lambda root, units: grade_class(root, workers=workers, log=lambda _: None,
                                                                    sandbox=sandbox))]
    totals, cpu = Counter(), Counter()
    for round_ in range(rounds):
        for name, grade in engines if round_ % 2 == 0 else engines[::-1]:
            root, units = _engine_course(size)
            started, cpu_started = time.perf_counter(), _cpu_seconds()
            outcomes = grade(root, units)
            seconds, cpu_seconds = time.perf_counter() - started, _cpu_seconds() - cpu_started
            totals[name] += seconds
            cpu[name] += cpu_seconds
            statuses = Counter(str(o.status) for o in outcomes)
            shutil.rmtree(root)
            print(f"  {name:18} {seconds:7.1f} s   {len(units) / seconds:5.2f} notebooks/s   CPU {cpu_seconds:6.1f} s   "
                  f"{dict(statuses)}   {_load()}")
    pool, dask = totals["fork pool"] / rounds, totals["Dask LocalCluster"] / rounds
    print(f"  mean of {rounds}: fork pool {pool:.1f} s ({size / pool:.2f} notebooks/s), Dask {dask:.1f} s "
          f"({size / dask:.2f} notebooks/s); Dask overhead {100 * (dask / pool - 1):+.1f}% (goal <= 10%); "
          f"CPU seconds: Dask / fork pool {cpu['Dask LocalCluster'] / cpu['fork pool']:.2f}")


def _cpu_seconds() -> float:
    """CPU time of this process and of the finished processes it waited for (with those they waited for),
    plus the forkserver's: the local Dask cluster's workers are its children, reaped by it, not by us."""
    import multiprocessing.forkserver
    import resource
    own = sum(usage.ru_utime + usage.ru_stime for usage in (resource.getrusage(resource.RUSAGE_SELF),
                                                            resource.getrusage(resource.RUSAGE_CHILDREN)))
    pid = getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None)  # private, but stable
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split() if pid else []
    except OSError:  # it has exited (and was reaped by us: RUSAGE_CHILDREN counts it)
        fields = []
    # after "pid (comm)": state is field 3, utime..cstime are fields 14-17
    forkserver = sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK") if fields else 0.0
    return own + forkserver


if __name__ == "__main__":
    main(tyro.cli(Settings, description=__doc__.splitlines()[0]))
