"""Class grading with N worker processes through nbgrader's own Autograde and GenerateFeedback.

One unit of work is one student's notebook. The parent imports nbgrader once and forks the workers
(so start-up is paid once in all, not once per student or per worker); each worker grades unit
after unit (``Autograde`` with ``student_id`` and ``notebook_id`` set, ``force=True``, the course's
``nbgrader_config.py``), then writes that notebook's feedback. The gradebook is SQLite: every
nbgrader ``Gradebook`` session in a worker holds an exclusive file lock (``.gradebook.lock``, a
``filelock.FileLock``), so no two processes ever write it at once; sessions last milliseconds,
execution runs unlocked. SQLite's own locking alone lost no write in ``bench/bench_grading.py --part
gradebook``, but it gives up with "database is locked" after 5 s of waiting, which a loaded machine
can reach; with the lock a worker waits its turn instead.

The parent process hands out units, collects one ``Outcome`` per unit, and notices a worker that
dies: its unit is reported FAILED, a fresh worker takes over, and no other grade is lost.
Invalid notebooks are found before any worker starts and are reported FAILED, never 0.
"""
from __future__ import annotations

import json
import logging
import multiprocessing
import os
import queue
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from filelock import FileLock

from lmpolicy_grader.preprocessors.incidents import INCIDENTS, Incident
from lmpolicy_grader.kernel import GradingKernelManager
from lmpolicy_grader.sandbox import require_sandbox
from lmpolicy_grader.status import Status

ASSIGNMENT = "ch11"
STATUS_FILE = "grading_status.json"
LOCK_FILE = ".gradebook.lock"


@dataclass
class Outcome:
    """How grading one student's notebook went."""
    student: str
    notebook: str
    status: Status              # GRADED, FAILED or MISSING
    reason: str = ""            # why it failed, in words an instructor can act on
    incidents: list = field(default_factory=list)  # timeouts, tampering, restored cells, cut output
    seconds: float = 0.0

    def __post_init__(self):
        self.status = Status(self.status)  # read back from grading_status.json as a plain string


def load_config(course_root: Path):
    """The course's nbgrader configuration (``<course_root>/nbgrader_config.py``) as a traitlets Config."""
    from traitlets.config.loader import PyFileConfigLoader
    return PyFileConfigLoader("nbgrader_config.py", path=str(course_root)).load_config()


def assignment_notebooks(course_root: Path, assignment: str = ASSIGNMENT) -> list[str]:
    """Notebook names of the assignment, from its release (``make release`` writes it)."""
    release = Path(course_root) / "release" / assignment
    names = sorted(p.stem for p in release.glob("*.ipynb"))
    if not names:
        raise FileNotFoundError(f"no notebooks in {release}: run `python -m lmpolicy_grader release` first")
    return names


def submitted_students(course_root: Path, assignment: str = ASSIGNMENT) -> list[str]:
    submitted = Path(course_root) / "submitted"
    return sorted(p.parent.name for p in submitted.glob(f"*/{assignment}") if p.is_dir())


def invalid_notebook_reason(path: Path) -> str | None:
    """Why a submitted notebook cannot be graded (None if it can)."""
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # JSON or schema error: say which, briefly
        return f"invalid notebook: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return None


# --- the gradebook lock (installed in worker processes) -----------------------------------------

def serialise_gradebook_sessions(lock_path: Path):
    """Make every nbgrader Gradebook in this process hold ``lock_path`` from creation to close().

    Returns a function that undoes it."""
    from nbgrader.api import Gradebook
    lock = FileLock(lock_path)  # re-entrant: a session opened inside another one does not wait for itself
    original_init, original_close = Gradebook.__init__, Gradebook.close

    def locked_init(self, *args, **kwargs):
        lock.acquire()
        self._lmpolicy_locked = True
        try:
            original_init(self, *args, **kwargs)
        except BaseException:
            self._lmpolicy_locked = False
            lock.release()
            raise

    def locked_close(self):
        try:
            original_close(self)
        finally:
            if getattr(self, "_lmpolicy_locked", False):
                self._lmpolicy_locked = False
                lock.release()

    Gradebook.__init__, Gradebook.close = locked_init, locked_close

    def undo():
        Gradebook.__init__, Gradebook.close = original_init, original_close
    return undo


# --- one worker ---------------------------------------------------------------------------------

class _ErrorLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def grade_unit(course_root: Path, config, student: str, notebook: str,
               assignment: str = ASSIGNMENT, feedback: bool = True) -> Outcome:
    """Autograde (and write feedback for) one student's notebook with nbgrader, in this process."""
    from nbgrader.converters import Autograde, GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    started = time.monotonic()
    INCIDENTS.clear()
    coursedir = CourseDirectory(config=config, root=str(course_root))
    coursedir.assignment_id, coursedir.student_id, coursedir.notebook_id = assignment, student, notebook
    errors = _ErrorLog()
    status, reason = Status.GRADED, ""
    try:
        autograde = Autograde(coursedir=coursedir, config=config)
        autograde.force = True
        autograde.log.addHandler(errors)
        autograde.start()
    except Exception as error:
        status = Status.FAILED
        failures = [i for i in INCIDENTS if i["kind"] == Incident.FAILED]
        reason = failures[-1]["message"] if failures else _first_cause(errors.lines, error)
    if status == Status.GRADED and feedback:
        generate = GenerateFeedback(coursedir=coursedir, config=config)
        generate.force = True
        generate.start()
    incidents = [i for i in INCIDENTS if i["kind"] != Incident.FAILED]
    return Outcome(student, notebook, status, reason, incidents, round(time.monotonic() - started, 2))


def _first_cause(lines: list[str], error: Exception) -> str:
    tracebacks = [line.strip() for line in lines if line.lstrip().startswith("Traceback")]
    text = tracebacks[-1].splitlines()[-1] if tracebacks else str(error)
    return f"nbgrader could not grade it: {text[:300]}"


def _worker(course_root: str, assignment: str, feedback: bool, tasks, results, sandbox: bool) -> None:
    serialise_gradebook_sessions(Path(course_root) / LOCK_FILE)
    config = load_config(Path(course_root))
    config.GradingKernelManager.sandbox = sandbox
    quiet = logging.getLogger("traitlets")  # nbgrader's converters log here; the report says what matters
    quiet.handlers, quiet.propagate = [logging.NullHandler()], False
    quiet.setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    while True:
        unit = tasks.get()
        if unit is None:
            return
        outcome = grade_unit(Path(course_root), config, unit[0], unit[1], assignment, feedback)
        results.put(asdict(outcome))


# --- the class ----------------------------------------------------------------------------------

def grade_class(course_root: Path, students: list[str] | None = None, workers: int | None = None,
                assignment: str = ASSIGNMENT, feedback: bool = True, log=print,
                sandbox: bool | None = None) -> list[Outcome]:
    """Grade every submitted notebook of ``students`` (default: all in submitted/) with ``workers`` processes.

    The kernels run in the sandbox if ``sandbox`` says so (None: as ``c.GradingKernelManager.sandbox``
    in the course config says); a sandbox that cannot be made here raises SandboxUnavailable, with
    why, before anything is graded.
    Returns one Outcome per (student, notebook), sorted, and writes them to ``grading_status.json``.
    """
    course_root = Path(course_root).resolve()
    if sandbox is None:
        sandbox = load_config(course_root).GradingKernelManager.get("sandbox", GradingKernelManager.sandbox.default_value)
    if sandbox:
        require_sandbox()
    notebooks = assignment_notebooks(course_root, assignment)
    students = sorted(students) if students is not None else submitted_students(course_root, assignment)
    outcomes, units = [], []
    for student in students:
        for notebook in notebooks:
            path = course_root / "submitted" / student / assignment / f"{notebook}.ipynb"
            if not path.exists():
                outcomes.append(Outcome(student, notebook, Status.MISSING, "not submitted"))
            elif (reason := invalid_notebook_reason(path)) is not None:
                outcomes.append(Outcome(student, notebook, Status.FAILED, reason))
            else:
                units.append((student, notebook))
    workers = max(1, min(workers or os.cpu_count() or 1, len(units) or 1))
    outcomes += _run_workers(course_root, assignment, feedback, units, workers, log, sandbox)
    outcomes.sort(key=lambda o: (o.student, o.notebook))
    save_outcomes(course_root, outcomes)
    return outcomes


def _run_workers(course_root: Path, assignment: str, feedback: bool, units: list, workers: int, log,
                 sandbox: bool) -> list[Outcome]:
    # Import nbgrader once here, then fork: every worker starts with it loaded (no second ~5 s start-up).
    import nbgrader.converters  # noqa: F401

    import lmpolicy_grader.preprocessors  # noqa: F401  (the course's preprocessors, loaded once too)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    pending = list(reversed(units))
    running: dict[int, tuple] = {}   # worker slot -> (process, task queue, unit or None)
    outcomes: list[Outcome] = []

    def start(slot):
        tasks = context.Queue()
        process = context.Process(target=_worker, args=(str(course_root), assignment, feedback, tasks, results, sandbox),
                                  daemon=True)
        process.start()
        running[slot] = (process, tasks, None)

    def give(slot):
        process, tasks, _ = running[slot]
        unit = pending.pop() if pending else None
        tasks.put(unit)
        running[slot] = (process, tasks, unit)

    for slot in range(workers):
        start(slot)
        give(slot)
    while any(unit is not None for _, _, unit in running.values()):
        try:
            outcome = Outcome(**results.get(timeout=1))
        except queue.Empty:
            for slot, (process, tasks, unit) in list(running.items()):
                if unit is not None and not process.is_alive() and results.empty():
                    outcomes.append(Outcome(unit[0], unit[1], Status.FAILED,
                                            f"the grader's worker process died (exit code {process.exitcode}) "
                                            "while grading it"))
                    log(f"  FAILED {unit[0]}/{unit[1]}: worker died")
                    start(slot)
                    give(slot)
            continue
        outcomes.append(outcome)
        log(f"  {outcome.status:7} {outcome.student}/{outcome.notebook} ({outcome.seconds:.1f} s)"
            + (f": {outcome.reason}" if outcome.reason else ""))
        slot = next(s for s, (_, _, unit) in running.items() if unit == (outcome.student, outcome.notebook))
        give(slot)
    for process, _, _ in running.values():
        process.join(timeout=10)
    return outcomes


def save_outcomes(course_root: Path, outcomes: list[Outcome]) -> None:
    """Merge ``outcomes`` into ``grading_status.json`` (the latest outcome per student and notebook wins)."""
    path = Path(course_root) / STATUS_FILE
    known = {(o["student"], o["notebook"]): o for o in load_outcomes_raw(path)}
    known.update({(o.student, o.notebook): asdict(o) for o in outcomes})
    path.write_text(json.dumps(sorted(known.values(), key=lambda o: (o["student"], o["notebook"])), indent=1) + "\n")


def load_outcomes_raw(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text()) if Path(path).exists() else []


def load_outcomes(course_root: Path) -> list[Outcome]:
    return [Outcome(**raw) for raw in load_outcomes_raw(Path(course_root) / STATUS_FILE)]
