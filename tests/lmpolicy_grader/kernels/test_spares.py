"""Spare kernels: a notebook is graded in kernels started while the last one was graded.

The tests grade the tiny course (its notebook's tests in the trusted process) one notebook after
another in this process, as a grading worker does, in the sandbox, and compare with grading
without spares.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import nbformat
import pytest

from lmpolicy_grader.isolation import sandbox
from lmpolicy_grader.kernels import spares as kernel_pool
from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_unit, worker_config
from lmpolicy_grader.class_grading.status import Status

from ...own_thread import in_own_thread
from .. import tiny_course

pytestmark = pytest.mark.skipif(sandbox.sandbox_problem() is not None and not os.environ.get("LMPOLICY_REQUIRE_SANDBOX"),
                                reason=f"no sandbox here: {sandbox.sandbox_problem()}")

WRONG_DOUBLE = "def double(x):\n    return 3 * np.asarray(x, dtype=float)"
# A file of the student's folder the answer reads (with numpy: the code rule refuses an import of the folder's own modules)
FACTOR_FILE, FACTOR_ANSWER = "factor.txt", ("_factor = float(np.loadtxt('factor.txt'))\n\n"
                                            "def double(x):\n    return _factor * np.asarray(x, dtype=float)")


def _released_notebook(root: Path):
    return nbformat.read(root / "release" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb", as_version=4)


@pytest.fixture
def course(tmp_path):
    """The tiny course with four students: the reference, a wrong
    double, an answer that reads its factor from a file of its own folder, and one that plants things
    for whoever comes next."""
    root = tiny_course.make_course(tmp_path / "course")
    release(root)
    tiny_course.submit(root, "a_reference", tiny_course.source_notebook())
    tiny_course.submit(root, "b_wrong", tiny_course.replace_answer(_released_notebook(root), "ex1__answer", WRONG_DOUBLE))
    tiny_course.submit(root, "c_helper", tiny_course.replace_answer(_released_notebook(root), "ex1__answer",
                                                                    FACTOR_ANSWER))
    (root / "submitted" / "c_helper" / "ch11" / FACTOR_FILE).write_text("2\n")
    planter = ("import builtins, pathlib\nbuiltins.PLANTED = True\npathlib.Path('planted.txt').write_text('x')\n"
               "pathlib.Path('/tmp/planted.txt').write_text('x')\n" + tiny_course.CORRECT_DOUBLE)
    tiny_course.submit(root, "d_planter", tiny_course.replace_answer(_released_notebook(root), "ex1__answer", planter))
    yield root
    kernel_pool.stop_spares()


def _grade_all(root: Path, students: list[str], spares: bool) -> dict[str, object]:
    config = worker_config(str(root), True)
    config.GradingExecute.spare_kernels = spares
    return {student: grade_unit(root, config, student, tiny_course.NOTEBOOK) for student in students}


def _grade_reference(root: Path):
    return grade_unit(root, worker_config(str(root), True), "a_reference", tiny_course.NOTEBOOK)


def _scores(root: Path, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(tiny_course.NOTEBOOK, "ch11", student)
        return {grade.name: grade.score for grade in notebook.grades if grade.auto_score is not None}


def _children_kernels() -> list[int]:
    """This process's children that are kernels or sandboxes (bwrap, ipykernel)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if int(parent) == os.getpid() and ("bwrap" in command or "ipykernel" in command):
            found.append(int(entry.name))
    return found


STUDENTS = ["d_planter", "a_reference", "b_wrong", "c_helper"]  # the planter first: the others come after it


def test_notebooks_graded_in_spare_kernels_score_as_in_kernels_of_their_own(course):
    kernel_pool.SERVED.clear()
    with_spares = in_own_thread(_grade_all, course, STUDENTS, True)
    served = dict(kernel_pool.SERVED)
    scores_with_spares = {student: _scores(course, student) for student in STUDENTS}
    in_own_thread(kernel_pool.stop_spares)
    assert _children_kernels() == [], "a spare kernel outlived stop_spares"

    without = in_own_thread(_grade_all, course, STUDENTS, False)
    scores_without = {student: _scores(course, student) for student in STUDENTS}

    # every notebook found both ready, the first too: the worker's start-up (worker_config) started its kernels
    assert served == {"grading": len(STUDENTS), "trusted": len(STUDENTS)}
    assert {s: o.status for s, o in with_spares.items()} == {s: Status.GRADED for s in STUDENTS}
    assert scores_with_spares == scores_without
    assert scores_with_spares["a_reference"] == {"ex1__tests": 2.0, "ex2__tests": 3.0}
    assert scores_with_spares["b_wrong"]["ex1__tests"] == 0.0
    assert scores_with_spares["c_helper"]["ex1__tests"] == 2.0  # its factor.txt reached the spare's folder
    assert not (course / "autograded" / "d_planter" / "ch11" / "planted.txt").exists()  # nothing goes back


def test_a_spare_that_no_longer_fits_is_stopped_and_the_notebook_starts_its_own(course, monkeypatch):
    in_own_thread(_grade_reference, course)  # leaves a spare of each kind for the next notebook
    stale = kernel_pool._SPARES["grading"].manager
    monkeypatch.setenv("LMPOLICY_SOMETHING_CHANGED", "1")  # the kernel would now inherit another environment
    kernel_pool.SERVED.clear()
    outcome = in_own_thread(_grade_reference, course)
    assert outcome.status == Status.GRADED
    assert kernel_pool.SERVED["grading"] == 0
    assert not in_own_thread(lambda: __import__("jupyter_core.utils").utils.run_sync(stale.is_alive)())


def test_a_spare_that_died_while_it_waited_is_replaced(course):
    in_own_thread(_grade_reference, course)
    spare = kernel_pool._SPARES["grading"]
    os.kill(spare.manager.provisioner.process.pid, signal.SIGKILL)  # bwrap, and the kernel with it
    spare.manager.provisioner.process.wait()
    kernel_pool.SERVED.clear()
    outcome = in_own_thread(_grade_reference, course)
    assert outcome.status == Status.GRADED, outcome.reason
    assert kernel_pool.SERVED["grading"] == 0
    assert _scores(course, "a_reference") == {"ex1__tests": 2.0, "ex2__tests": 3.0}


def test_no_spare_starts_when_no_next_notebook_is_expected(course):
    """The grader's last tasks of a class say no other notebook comes: they leave no kernel behind."""
    kernel_pool.expect_next_notebook(False)
    try:
        outcome = in_own_thread(_grade_reference, course)
    finally:
        kernel_pool.expect_next_notebook(True)
    assert outcome.status == Status.GRADED
    assert kernel_pool._SPARES == {} and _children_kernels() == []


def test_a_spare_that_cannot_start_costs_the_next_notebook_its_head_start_never_this_notebook(course, monkeypatch):
    """A spare's start that fails (here: its kernel started, then the machine ran out of processes) leaves the
    notebook being graded GRADED, stops what the spare had started, and the next notebook starts its own."""
    from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager

    started = GradingKernelManager.start_for_a_later_notebook

    async def start_then_fail(self, **kw):
        await started(self, **kw)
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(GradingKernelManager, "start_for_a_later_notebook", start_then_fail)
    outcome = in_own_thread(_grade_reference, course)
    assert outcome.status == Status.GRADED, outcome.reason
    assert "grading" not in kernel_pool._SPARES and _children_kernels() == []
    # what the grader warns of itself reaches the instructor with the outcome (nbgrader's own warnings do not)
    failed = ("could not be started ahead (BlockingIOError: [Errno 11] Resource temporarily unavailable); "
              "it starts its own")
    ahead = [w for w in outcome.warnings if "could not be started ahead" in w]
    assert f"the kernels of the notebook after {tiny_course.NOTEBOOK} {failed}" in ahead, outcome.warnings
    # where this process's start-up (worker_config) came first, its own spares failed as well, and it says so
    assert set(ahead) <= {f"the kernels of the notebook after {tiny_course.NOTEBOOK} {failed}",
                          f"the kernels of the notebook after the worker's start-up {failed}"}, ahead

    monkeypatch.undo()
    kernel_pool.SERVED.clear()
    outcome = in_own_thread(_grade_reference, course)
    assert outcome.status == Status.GRADED, outcome.reason
    assert kernel_pool.SERVED["grading"] == 0
    assert _scores(course, "a_reference") == {"ex1__tests": 2.0, "ex2__tests": 3.0}
