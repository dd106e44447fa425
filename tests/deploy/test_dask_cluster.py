"""The grader on a Dask cluster of separate processes: a scheduler and two workers started by Dask's own
command line tools on loopback, as an SSH host list, a Kubernetes deployment or an HPC job would start them,
the class graded through ``python -m lmpolicy_grader grade --scheduler``, one worker killed with SIGKILL in the
middle. No grade is lost, the killed worker's notebook is graded on the other worker (or FAILED with the
reason), and every score and status is the one the grader's own local cluster gives.

The course folder is shared the way a deployment shares it: every process sees it at the same path.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.cluster import ALLOWED_FAILURES
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.course import load_outcomes
from lmpolicy_grader.class_grading.report import exercise_rows
from lmpolicy_grader.class_grading.status import Status
from tests.deploy.hub import require
from tests.lmpolicy_grader import tiny_course

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dask")]

START_TIMEOUT = 120  # seconds for the scheduler, a worker, or a grading step on a busy 2-core machine
# ten notebooks of the tiny course, of several kinds, so that the grades differ and grading lasts a while
CLASS = ["reference", "wrong", "edited_cells", "deleted_cells", "monkeypatch", "code_swap", "loop",
         "duplicated_cells", "changed_kernelspec", "sys_exit"]


def _dask_command() -> str:
    found = shutil.which("dask", path=str(Path(sys.executable).parent)) or shutil.which("dask")
    require(found is not None, "Dask's command line (`dask`, from the distributed package) is not installed")
    return found


def _wait(condition, what: str, process=None):
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process ended with code {process.returncode}")
        if (answer := condition()):
            return answer
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {START_TIMEOUT} s")


@pytest.fixture
def dask_cluster(tmp_path):
    """(scheduler address, {worker name: its `dask worker` process}) on 127.0.0.1, stopped afterwards."""
    dask = _dask_command()
    # the settings the deployment guide gives a grading cluster: one retry of a notebook whose worker died
    env = dict(os.environ, DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=str(ALLOWED_FAILURES))
    scheduler_file = tmp_path / "scheduler.json"
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    started = []

    def start(name, args):
        with open(logs / f"{name}.log", "w") as log:
            started.append(subprocess.Popen([dask, *args], env=env, stdout=log, stderr=subprocess.STDOUT))
        return started[-1]
    try:
        scheduler = start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                        "--scheduler-file", str(scheduler_file)])
        address = _wait(lambda: scheduler_file.exists() and json.loads(scheduler_file.read_text() or "{}").get("address"),
                        "the Dask scheduler writes its address", scheduler)
        workers = {name: start(name, ["worker", "--scheduler-file", str(scheduler_file), "--name", name,
                                      "--nthreads", "1", "--memory-limit", "0", "--no-dashboard",
                                      "--host", "127.0.0.1"])
                   for name in ("worker-1", "worker-2")}
        yield address, workers, logs
    finally:
        for process in reversed(started):
            if process.poll() is None:
                process.terminate()
        for process in started:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _make_class(root: Path) -> Path:
    tiny_course.make_course(root)
    release(root)
    for student in CLASS:
        tiny_course.submit(root, student, tiny_course.HOSTILE[student][0]())
    return root


def _grades(root: Path) -> dict:
    """(student, exercise) -> (score, status), from the gradebook and grading_status.json, as the report reads them."""
    return {(row.student, row.exercise): (row.score, row.status) for row in exercise_rows(root, load_outcomes(root))}


def test_a_class_graded_on_separate_dask_processes_survives_a_killed_worker(tmp_path, dask_cluster):
    from distributed import Client

    address, workers, logs = dask_cluster
    root = _make_class(tmp_path / "course")
    with Client(address, set_as_default=False, timeout=START_TIMEOUT) as watcher:
        watcher.wait_for_workers(2, timeout=START_TIMEOUT)
        grader = subprocess.Popen([sys.executable, "-m", "lmpolicy_grader", "--course", str(root), "grade",
                                   "--no-release", "--no-examples", "--scheduler", address],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=dict(os.environ, PYTHONUNBUFFERED="1"))  # its lines as they are printed
        lines = []
        try:
            # in the middle: one notebook graded and stored, the others waiting or being graded
            while not any(line.startswith("  graded ") for line in lines):
                line = grader.stdout.readline()
                assert line, "the grader stopped before grading a notebook:\n" + "".join(lines)
                lines.append(line)
            busy = _wait(lambda: {worker: keys for worker, keys in watcher.processing().items() if keys},
                         "a worker grading a notebook")
            victim, keys = sorted(busy.items())[0]
            grading_there = keys[0].split("-", 2)[2]        # grade-<run>-<student>/<notebook>
            worker_pid, nanny_pid = watcher.run(lambda: (os.getpid(), os.getppid()), workers=[victim])[victim]
            victim_name = next(name for name, process in workers.items() if process.pid == nanny_pid)
            os.kill(worker_pid, signal.SIGKILL)     # the machine is lost: its worker process and its nanny
            os.kill(nanny_pid, signal.SIGKILL)
            rest, _ = grader.communicate(timeout=10 * START_TIMEOUT)
            lines += rest.splitlines(keepends=True)
        finally:
            if grader.poll() is None:
                grader.kill()
        assert grader.returncode == 0, "".join(lines)
        assert workers[victim_name].wait(5) == -signal.SIGKILL
        survivor = next(w for w, info in watcher.scheduler_info()["workers"].items() if info["name"] != victim_name)
        assert list(watcher.nthreads()) == [survivor]

    log = "".join(lines)
    assert f"grading {len(CLASS)} notebooks on the Dask scheduler at {address}: 2 workers" in log
    outcomes = {o.student: o for o in load_outcomes(root)}
    assert set(outcomes) == set(CLASS)
    # one death is within the scheduler's allowed failures: the killed worker's notebook is graded on the
    # other worker like every other one (had it died there too, it would be FAILED "worker process died")
    assert ALLOWED_FAILURES >= 1
    assert {student: outcome.status for student, outcome in outcomes.items()} == dict.fromkeys(CLASS, Status.GRADED), \
        f"{grading_there} was being graded on the killed worker\n{log}"

    # the same class on the grader's own local cluster: the same scores and statuses
    local = _make_class(tmp_path / "local-course")
    grade_class(local, workers=2, log=lambda _: None)
    on_cluster = _grades(root)
    assert on_cluster == _grades(local)
    # and they are the grades the tiny course's design expects, not merely equal
    for student in CLASS:
        expected = tiny_course.HOSTILE[student][1]
        assert {ex: on_cluster[(student, ex)][0] for ex in expected} == expected, student
