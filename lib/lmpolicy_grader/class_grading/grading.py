"""Class grading, one Dask task per student's notebook, through nbgrader's own Autograde and GenerateFeedback.

Why Dask. A class is graded notebook by notebook, and notebooks are independent: the work is a bag of
tasks. The course once ran its own pool of forked processes; Dask distributed does the same on one
machine (a ``LocalCluster`` the grader starts and closes) and on many (``--scheduler tcp://host:8786``:
a cluster started by ``dask scheduler`` / ``dask worker``, or by Dask's deployers for Kubernetes, HPC
queues and SSH hosts), so there is one way to grade in parallel, and the scheduling, the worker
restarts and the bookkeeping of who died holding what are an engine's, not ours. Every worker reaches
the course folder at the same path, through the file system a hub deployment already shares; a task
carries only that path and the (student, notebook) it grades, and returns an ``Outcome``.

Where start-up is paid. Importing nbgrader and the course's preprocessors, reading
``nbgrader_config.py``, preparing the gradebook (``gradebook.prepare_worker``: for SQLite, the file lock
every nbgrader session then holds) and starting the first notebook's two kernels (which import torch)
take seconds; a ``WorkerPlugin`` (``GraderStartup``) does it once per worker process, when it joins the
cluster or is restarted, and the tasks find it done (``worker_config``). It also checks, on the worker,
what the worker needs: one thread, the course folder in view, the sandbox if the kernels are to run in
one. The imports are paid once in all on the local cluster, whose workers are forked from a process that
has made them (``cluster``); there the plugin first gives the worker the grader's environment and working
directory at the time of grading. A worker started by Dask's tools is a fresh interpreter and pays them
itself. ``bench/bench_grading.py --part engine`` measures what the engine costs against a plain pool of
forked processes.

How a dead worker is handled. A submission can kill the process that grades it (outside the
sandbox), and a machine can be lost. The grader keeps no more notebooks in flight than the cluster
has threads, so a worker only ever holds the notebook it is grading, and its death implicates that
notebook alone: every other grade is already stored (each task writes the gradebook itself) or is
on another worker. Dask retries the notebook on another worker and, once it has seen
``cluster.ALLOWED_FAILURES + 1`` workers die under it, gives up with ``KilledWorker``, which the
grader reports as FAILED: "the grader's worker process died while grading it", with how many times.
A task that raises is FAILED with its error; nothing is ever scored 0 for the grader's sake.
A notebook is never graded twice at once: Dask may start a task again while a worker it gave up on
still runs it (a network split), so a task holds that notebook's lock file in the course folder
while it grades.

Around the tasks, in the grader's own process: the gradebook is checked before anything is graded
(``gradebook.check_gradebook``), invalid notebooks are reported FAILED before any task starts, one
log line is printed per notebook as it comes back, and the outcomes go to ``grading_status.json``.
"""
from __future__ import annotations

import copy
import logging
import os
import socket
import time
import uuid
import warnings
from pathlib import Path

from distributed import WorkerPlugin
from filelock import FileLock

from lmpolicy_grader.class_grading.course import (ASSIGNMENT, Outcome, assignment_notebooks, invalid_notebook_reason,
                                                   load_config, load_outcomes, save_outcomes, submitted_students)
from lmpolicy_grader.class_grading.cluster import (ClusterUnavailable, adopt_surroundings, describe, grading_client,
                                     local_surroundings)
from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager
from lmpolicy_grader.kernels.trusted_kernel import TrustedKernelManager
from lmpolicy_grader.kernels.spares import expect_next_notebook, stop_spares
from lmpolicy_grader.incidents import INCIDENTS, Incident
from lmpolicy_grader.isolation.sandbox import require_sandbox
from lmpolicy_grader.class_grading.schedule import longest_first
from lmpolicy_grader.class_grading.status import Status

NOTEBOOK_LOCKS = ".grading-locks"  # in the course folder: one lock file per notebook being graded


def _sandbox_setting(config) -> bool:
    return config.GradingKernelManager.get("sandbox", GradingKernelManager.sandbox.default_value)


# --- one notebook, in a worker process ------------------------------------------------------------

class GraderWarnings(logging.Handler):
    """The warnings the course's grader code logs while a notebook is graded: that it runs less well than it
    could (no control groups, a kernel started again, spares that could not start). nbgrader's own warnings
    are left out: the report says what matters of those."""

    PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        message = record.getMessage()
        if (record.levelno == logging.WARNING and record.pathname.startswith(self.PACKAGE)
                and message not in self.messages):
            self.messages.append(message)


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
    errors, warned = _ErrorLog(), GraderWarnings()
    warned.messages += _STARTUP_WARNINGS  # what this process's start-up warned, told with its first notebook
    _STARTUP_WARNINGS.clear()
    status, reason = Status.GRADED, ""
    autograde = Autograde(coursedir=coursedir, config=config)
    autograde.log.addHandler(errors)
    autograde.log.addHandler(warned)
    try:
        autograde.force = True
        autograde.start()
    except Exception as error:
        status = Status.FAILED
        failures = [i for i in INCIDENTS if i["kind"] == Incident.FAILED]
        reason = failures[-1]["message"] if failures else _first_cause(errors.lines, error)
    finally:
        autograde.log.removeHandler(errors)  # the log is nbgrader's shared one: the next notebook starts clean
    if status == Status.GRADED and feedback:
        generate = GenerateFeedback(coursedir=coursedir, config=config)
        generate.log.addHandler(errors)
        try:
            generate.force = True
            generate.start()
        except Exception as error:  # e.g. the gradebook became unreachable between grading and feedback
            status = Status.FAILED
            reason = ("its grades are stored, but its feedback could not be written: "
                      + _first_cause(errors.lines, error).removeprefix("nbgrader could not grade it: "))
        finally:
            generate.log.removeHandler(errors)
    autograde.log.removeHandler(warned)
    incidents = [i for i in INCIDENTS if i["kind"] != Incident.FAILED]
    return Outcome(student, notebook, status, reason, incidents, round(time.monotonic() - started, 2),
                   warned.messages)


def _first_cause(lines: list[str], error: Exception) -> str:
    tracebacks = [line.strip() for line in lines if line.lstrip().startswith("Traceback")]
    text = tracebacks[-1].splitlines()[-1] if tracebacks else str(error)
    return f"nbgrader could not grade it: {text[:300]}"


# --- start-up, once per worker process -------------------------------------------------------------

_LOADED: dict[str, object] = {}                  # course root -> its config, gradebook prepared
_STARTUP_WARNINGS: list[str] = []                # what worker_config's kernels warned, not yet told
_CONFIGS: dict[tuple[str, bool], object] = {}    # (course root, sandbox) -> the config tasks grade with


def worker_config(course_root: str, sandbox: bool):
    """The course config for grading in this process, made on first use: nbgrader and the course's
    preprocessors imported, ``nbgrader_config.py`` read, the gradebook prepared, the kernel's
    sandbox set (and checked, if on), the first notebook's kernels started (``kernels.spares``),
    nbgrader's log quietened. Later calls return it at once."""
    key = (course_root, sandbox)
    if key in _CONFIGS:
        return _CONFIGS[key]
    import nbgrader.converters  # noqa: F401  (seconds of imports, paid here once)

    from lmpolicy_grader.class_grading.gradebook import prepare_worker
    from lmpolicy_grader.nbgrader_plugins import GradingExecute
    if not (Path(course_root) / "nbgrader_config.py").exists():
        raise ClusterUnavailable(
            f"the grader's worker on {socket.gethostname()} cannot see the course folder {course_root}: every "
            "Dask worker needs it at the same path, on a file system shared with the instructor's machine")
    if course_root not in _LOADED:
        loaded = load_config(Path(course_root))
        # the trusted kernels' zygote imports torch beside the rest of the start-up, not in the first notebook
        TrustedKernelManager(config=loaded).start_zygote()
        prepare_worker(Path(course_root), loaded)
        _LOADED[course_root] = loaded
    if sandbox:
        require_sandbox()  # on the worker's machine, where the kernels run
    config = copy.deepcopy(_LOADED[course_root])
    config.GradingKernelManager.sandbox = sandbox
    quiet = logging.getLogger("traitlets")  # nbgrader's converters log here; the report says what matters,
    quiet.handlers, quiet.propagate = [logging.NullHandler()], False  # and grade_unit keeps the grader's warnings
    quiet.setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    started = GraderWarnings()  # e.g. no control groups for the first kernels: the first notebook's outcome says so
    quiet.addHandler(started)
    try:
        GradingExecute(config=config).start_first_spares()  # they start while the rest of the start-up runs
    finally:
        quiet.removeHandler(started)
    _STARTUP_WARNINGS.extend(started.messages)
    _CONFIGS[key] = config
    return config


class GraderStartup(WorkerPlugin):
    """Pays a worker's start-up (``worker_config``) when it joins the cluster, or is restarted,
    instead of in its first task; refuses a worker with more than one thread."""

    def __init__(self, course_root: str, sandbox: bool, surroundings: dict | None = None):
        # surroundings: the grader's environment and working directory, for a local cluster's worker only
        self.course_root, self.sandbox, self.surroundings = course_root, sandbox, surroundings

    def setup(self, worker):
        if self.surroundings is not None:
            adopt_surroundings(self.surroundings)  # before the config is read: it and the gradebook read both
        if worker.state.nthreads != 1:
            raise ClusterUnavailable(
                f"the Dask worker {worker.address} runs {worker.state.nthreads} threads; a grading worker runs one "
                "(`dask worker --nthreads 1`), so that nbgrader's per-process state serves one notebook at a time "
                "and a worker that dies takes only its own notebook down")
        worker_config(self.course_root, self.sandbox)

    def teardown(self, worker):
        stop_spares()  # a worker process ends without running atexit


def grade_task(course_root: str, student: str, notebook: str, assignment: str, feedback: bool,
               sandbox: bool, more_to_come: bool = True) -> Outcome:
    """One Dask task: grade one student's notebook in this worker, holding that notebook's lock;
    ``more_to_come``: the class has enough notebooks left that this worker will likely get another
    (its spare kernels then start for it)."""
    config = worker_config(course_root, sandbox)
    expect_next_notebook(more_to_come)
    with FileLock(notebook_lock(course_root, assignment, student, notebook)):
        return grade_unit(Path(course_root), config, student, notebook, assignment, feedback)


def notebook_lock(course_root, assignment: str, student: str, notebook: str) -> Path:
    """The lock file a task holds while it grades (student, notebook): one grading of it at a time."""
    folder = Path(course_root) / NOTEBOOK_LOCKS / assignment / student
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{notebook}.lock"


# --- the class ----------------------------------------------------------------------------------

def grade_class(course_root: Path, students: list[str] | None = None, workers: int | None = None,
                assignment: str = ASSIGNMENT, feedback: bool = True, log=print,
                sandbox: bool | None = None, scheduler: str | None = None) -> list[Outcome]:
    """Grade every submitted notebook of ``students`` (default: all in submitted/), one Dask task each.

    Without ``scheduler``, on a local cluster of ``workers`` processes (default: one per core), started
    here and closed after; with it (``tcp://host:8786``), on that cluster's workers, which must see
    the course folder at the same path. The kernels run in the sandbox if ``sandbox`` says so (None:
    as ``c.GradingKernelManager.sandbox`` in the course config says); a sandbox that cannot be made
    raises SandboxUnavailable, with why, before anything is graded, and so does a gradebook that
    cannot be reached (GradebookUnavailable). The notebooks go to the workers longest first, as the last
    grading timed them (``schedule``).
    Returns one Outcome per (student, notebook), sorted, and writes them to ``grading_status.json``.
    """
    from lmpolicy_grader.class_grading.gradebook import check_gradebook, gradebook_url

    if scheduler is not None and workers is not None:
        raise ValueError(f"workers={workers} sizes the grader's own local cluster; on the cluster at {scheduler} "
                         "its workers grade (add some with `dask worker`)")
    course_root = Path(course_root).resolve()
    config = load_config(course_root)
    if sandbox is None:
        sandbox = _sandbox_setting(config)
    if sandbox and scheduler is None:
        require_sandbox()  # the workers check it too, where they run; here it fails before a cluster starts
    check_gradebook(gradebook_url(config, course_root))
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
    units = longest_first(units, load_outcomes(course_root))
    if units:
        local_workers = max(1, min(workers or os.cpu_count() or 1, len(units)))
        with grading_client(scheduler, local_workers) as client:
            if scheduler is not None:
                log(f"grading {len(units)} notebooks on {describe(client)}")
            surroundings = local_surroundings() if scheduler is None else None
            outcomes += grade_on_cluster(client, course_root, units, assignment, feedback, sandbox, log,
                                         surroundings)
    outcomes.sort(key=lambda o: (o.student, o.notebook))
    save_outcomes(course_root, outcomes)
    return outcomes


def grade_on_cluster(client, course_root: Path, units: list[tuple[str, str]], assignment: str, feedback: bool,
                     sandbox: bool, log, surroundings: dict | None = None) -> list[Outcome]:
    """Grade ``units`` (student, notebook) on the cluster of ``client``, as many at once as it has threads;
    ``surroundings`` (``cluster.local_surroundings``) go to each worker of a local cluster before it starts up."""
    startup = f"lmpolicy-grader {course_root}"
    try:  # a worker that fails its start-up fails the registration, with its reason, before any task
        client.register_plugin(GraderStartup(str(course_root), sandbox, surroundings), name=startup)
        return _grade_units(client, course_root, units, assignment, feedback, sandbox, log)
    finally:  # a shared cluster's later workers need not start up for this course any more
        client.unregister_worker_plugin(startup)


def _grade_units(client, course_root: Path, units: list[tuple[str, str]], assignment: str, feedback: bool,
                 sandbox: bool, log) -> list[Outcome]:
    from distributed import KilledWorker, as_completed

    run = uuid.uuid4().hex[:8]  # keys of this run only: a later run grades again, never reuses a result
    pending = list(reversed(units))
    unit_of: dict[str, tuple[str, str]] = {}

    def submit():
        student, notebook = pending.pop()
        future = client.submit(grade_task, str(course_root), student, notebook, assignment, feedback, sandbox,
                               len(pending) >= slots(), key=f"grade-{run}-{student}/{notebook}", pure=False)
        unit_of[future.key] = (student, notebook)
        return future

    def slots() -> int:
        # A worker given a second notebook while it grades one would be holding it when it dies, and
        # Dask would count that death against both: never more in flight than there are threads.
        return max(1, sum(client.nthreads().values()))

    running = as_completed([submit() for _ in range(min(slots(), len(pending)))], loop=client.loop)
    outcomes: list[Outcome] = []
    for future in running:
        student, notebook = unit_of.pop(future.key)
        try:
            outcome = future.result()
        except KilledWorker as error:
            outcome = Outcome(student, notebook, Status.FAILED,
                              f"the grader's worker process died while grading it, {error.allowed_failures + 1} times, "
                              f"each time in a fresh worker (Dask KilledWorker; last at {error.last_worker.address})")
            log(f"  FAILED {student}/{notebook}: worker died")
        except Exception as error:  # the task raised: the grader's fault, reported as such, never a 0
            outcome = Outcome(student, notebook, Status.FAILED,
                              f"the grader failed on it: {type(error).__name__}: {str(error)[:300]}")
            log(f"  FAILED {student}/{notebook}: {outcome.reason}")
        else:
            log(f"  {outcome.status:7} {outcome.student}/{outcome.notebook} ({outcome.seconds:.1f} s)"
                + (f": {outcome.reason}" if outcome.reason else ""))
        future.release()
        outcomes.append(outcome)
        while pending and running.count() < slots():
            running.add(submit())
    return outcomes
