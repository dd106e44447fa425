"""The grader on Dask: start-up once per worker, a dead worker's notebook retried or FAILED, one grading
of a notebook at a time, and the cluster's requirements checked with errors that say what to change.

Everything runs on local clusters (the grader's own, or one a test starts and hands over by address);
tests/deploy/test_dask_cluster.py does the same with a scheduler and workers as separate processes.
"""
from __future__ import annotations

import json
import threading
import time

import pytest
from distributed import Client, LocalCluster
from filelock import FileLock

from lmpolicy_grader.class_grading import cluster, grading
from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class, notebook_lock
from lmpolicy_grader.class_grading.course import STATUS_FILE
from lmpolicy_grader.class_grading.report import exercise_rows
from lmpolicy_grader.class_grading.status import Status
from lmpolicy_grader.isolation.sandbox import sandbox_problem

from .. import tiny_course

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dask")]


def _course(tmp_path, students: dict):
    root = tiny_course.make_course(tmp_path / "course")
    release(root)
    for student, nb in students.items():
        tiny_course.submit(root, student, nb)
    return root


def _scores(root, outcome):
    return {row.exercise: row.score for row in exercise_rows(root, [outcome]) if row.exercise != "ex3"}


def _kills_its_worker(attempts_file, first_attempt_only: bool):
    """A submission whose ex2 answer counts its runs in ``attempts_file`` and kills the process grading it
    (the kernel's parent, outside the sandbox): every time, or only the first time (a machine's fault)."""
    guard = "if len(runs) == 1:\n    " if first_attempt_only else ""
    answer = ("import os, signal\n"
              f"with open({str(attempts_file)!r}, 'a') as log:\n    log.write('run\\n')\n"
              f"runs = open({str(attempts_file)!r}).read().split()\n"
              f"{guard}os.kill(os.getppid(), signal.SIGKILL)\n"
              "def square(x):\n    return np.asarray(x, dtype=float) ** 2")
    return tiny_course.replace_answer(tiny_course.source_notebook(), "ex2__answer", answer)


def test_a_worker_killed_every_time_fails_its_notebook_after_the_allowed_attempts_and_no_other(tmp_path):
    attempts = tmp_path / "attempts"
    root = _course(tmp_path, {"a_reference": tiny_course.source_notebook(),
                              "b_kills_the_grader": _kills_its_worker(attempts, first_attempt_only=False),
                              "c_wrong": tiny_course.HOSTILE["wrong"][0](),
                              "d_reference": tiny_course.source_notebook()})
    lines = []
    outcomes = {o.student: o for o in grade_class(root, workers=2, log=lines.append, sandbox=False)}

    killed = outcomes["b_kills_the_grader"]
    assert killed.status == Status.FAILED
    assert attempts.read_text().split() == ["run"] * (cluster.ALLOWED_FAILURES + 1)  # tried, then given up
    assert "worker process died" in killed.reason and "KilledWorker" in killed.reason
    assert f"{cluster.ALLOWED_FAILURES + 1} times" in killed.reason
    assert _scores(root, killed) == {"ex1": None, "ex2": None}
    assert {s: _scores(root, outcomes[s]) for s in ("a_reference", "c_wrong", "d_reference")} == \
        {"a_reference": {"ex1": 2, "ex2": 3}, "c_wrong": {"ex1": 0, "ex2": 3}, "d_reference": {"ex1": 2, "ex2": 3}}
    assert "  FAILED b_kills_the_grader/01_tiny: worker died" in lines
    assert sum(line.startswith("  graded ") for line in lines) == 3


def test_a_worker_that_dies_once_is_replaced_and_the_notebook_graded_on_the_retry(tmp_path):
    attempts = tmp_path / "attempts"
    root = _course(tmp_path, {"a_unlucky": _kills_its_worker(attempts, first_attempt_only=True),
                              "b_reference": tiny_course.source_notebook()})
    outcomes = {o.student: o for o in grade_class(root, workers=1, log=lambda _: None, sandbox=False)}
    assert attempts.read_text().split() == ["run", "run"]
    assert outcomes["a_unlucky"].status == Status.GRADED, outcomes["a_unlucky"]
    # graded whole on the retry: ex1 earns its points; ex2, tested below the cell whose os.kill is outside the
    # code rule (lmpolicy.notebook.code_rule), gets no credit, as it would on any grading
    assert _scores(root, outcomes["a_unlucky"]) == {"ex1": 2, "ex2": 0}
    assert outcomes["b_reference"].status == Status.GRADED


def test_invalid_and_missing_notebooks_are_reported_without_a_task(tmp_path):
    root = _course(tmp_path, {"alice": tiny_course.source_notebook()})
    tiny_course.submit(root, "bob", raw='{"cells": [ not json')
    (root / "submitted" / "carol" / "ch11").mkdir(parents=True)  # submitted an empty folder
    lines = []
    outcomes = {o.student: o for o in grade_class(root, workers=2, log=lines.append)}
    assert outcomes["bob"].status == Status.FAILED and outcomes["bob"].reason.startswith("invalid notebook: ")
    assert outcomes["carol"].status == Status.MISSING
    assert outcomes["alice"].status == Status.GRADED
    assert [line.split()[:2] for line in lines] == [["graded", "alice/01_tiny"]]  # one task, alice's
    assert not (root / "autograded" / "bob").exists()
    saved = {o["student"]: o["status"] for o in json.loads((root / STATUS_FILE).read_text())}
    assert saved == {"alice": "graded", "bob": "FAILED", "carol": "missing"}


def test_the_notebooks_the_last_grading_timed_longest_are_handed_out_first(tmp_path):
    root = _course(tmp_path, {name: tiny_course.source_notebook() for name in ("alice", "bob", "carol")})
    last_time = {"alice": 5.0, "bob": 1.0, "carol": 9.0}
    (root / STATUS_FILE).write_text(json.dumps([
        {"student": student, "notebook": tiny_course.NOTEBOOK, "status": "graded", "seconds": seconds}
        for student, seconds in last_time.items()]))
    lines = []
    outcomes = grade_class(root, workers=1, log=lines.append, sandbox=False)
    assert [line.split()[1] for line in lines] == [f"{s}/{tiny_course.NOTEBOOK}" for s in ("carol", "alice", "bob")]
    assert [o.status for o in outcomes] == [Status.GRADED] * 3
    # and the times this grading took are the ones the next one orders by
    saved = {o["student"]: o["seconds"] for o in json.loads((root / STATUS_FILE).read_text())}
    assert saved == {o.student: o.seconds for o in outcomes} and saved != last_time


def test_a_notebook_being_graded_elsewhere_waits_for_its_lock(tmp_path):
    """Dask may start a task again while a worker it gave up on still grades it: the task then waits."""
    root = _course(tmp_path, {"alice": tiny_course.source_notebook(), "bob": tiny_course.source_notebook()})
    lines, result = [], {}
    other_grading = FileLock(notebook_lock(root, "ch11", "bob", tiny_course.NOTEBOOK))
    other_grading.acquire()
    thread = threading.Thread(target=lambda: result.update(
        {o.student: o for o in grade_class(root, workers=2, log=lines.append)}))
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while not lines and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)  # bob's task has long reached its lock
        assert [line.split()[1] for line in lines] == ["alice/01_tiny"]
        assert not (root / "autograded" / "bob").exists()
    finally:
        other_grading.release()
        thread.join(300)
    assert result["bob"].status == Status.GRADED and _scores(root, result["bob"]) == {"ex1": 2, "ex2": 3}


def _count_course_loads():
    """Installed in each worker before grading: count how often the course config is read."""
    from lmpolicy_grader.class_grading import grading as in_worker
    original = in_worker.load_config
    in_worker.LOADS = 0

    def counting(course_root):
        in_worker.LOADS += 1
        return original(course_root)
    in_worker.load_config = counting


def _loads_and_gradebook():
    from lmpolicy_grader.class_grading import gradebook
    from lmpolicy_grader.class_grading import grading as in_worker
    return in_worker.LOADS, sorted(gradebook._prepared)


def test_start_up_is_paid_once_per_worker_on_a_cluster_given_by_address(tmp_path):
    root = _course(tmp_path, {f"s{n}": tiny_course.source_notebook() for n in range(4)})
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=0) as local, Client(local, set_as_default=False) as client:
        client.run(_count_course_loads)
        lines = []
        outcomes = grade_class(root, log=lines.append, scheduler=local.scheduler_address)
        per_worker = client.run(_loads_and_gradebook)
    assert [o.status for o in outcomes] == [Status.GRADED] * 4
    assert lines[0].startswith(f"grading 4 notebooks on the Dask scheduler at {local.scheduler_address}: 2 workers")
    # both workers loaded the course and prepared its gradebook once, before their first task
    assert sorted(per_worker.values()) == [(1, ["sqlite"]), (1, ["sqlite"])]


def _no_control_groups():
    """Installed in each worker before grading: no control group can be made there, and nothing warned yet."""
    from lmpolicy_grader.kernels import grading_kernel
    grading_kernel.cgroup_problem = lambda: "a test says so"
    grading_kernel._warned.clear()


@pytest.mark.skipif(sandbox_problem() is not None, reason="the warning comes from the sandbox's control groups")
def test_what_a_workers_start_up_warned_reaches_the_report_with_its_first_notebook(tmp_path):
    """A worker's start-up starts its first notebook's kernels (kernels.spares); what they warn, e.g. that no
    control group could be made (a grader that is not root, as on a hub), is told with that notebook's outcome."""
    root = _course(tmp_path, {f"s{n}": tiny_course.source_notebook() for n in range(3)})
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=0) as local, Client(local, set_as_default=False) as client:
        client.run(_no_control_groups)
        outcomes = grade_class(root, log=lambda _: None, scheduler=local.scheduler_address, sandbox=True)
    assert [o.status for o in outcomes] == [Status.GRADED] * 3
    warned = [o.warnings for o in outcomes]
    assert sum("limited one by one, not together: a test says so" in " ".join(w) for w in warned) == 1, warned


def test_a_worker_with_two_threads_is_refused_with_what_to_run_instead(tmp_path):
    root = _course(tmp_path, {"alice": tiny_course.source_notebook()})
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as local:
        with pytest.raises(cluster.ClusterUnavailable, match=r"runs 2 threads.*dask worker --nthreads 1"):
            grade_class(root, log=lambda _: None, scheduler=local.scheduler_address)
    assert not (root / "autograded").exists()
    with pytest.raises(ValueError, match="sizes the grader's own local cluster"):
        grade_class(root, workers=2, scheduler=local.scheduler_address)


def test_no_scheduler_at_the_address_is_a_clear_error(tmp_path, monkeypatch):
    import socket

    root = _course(tmp_path, {"alice": tiny_course.source_notebook()})
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{unused.getsockname()[1]}"
    monkeypatch.setattr(cluster, "CONNECT_SECONDS", 3)
    with pytest.raises(cluster.ClusterUnavailable, match=f"no Dask scheduler answers at {address}.*dask scheduler"):
        grade_class(root, log=lambda _: None, scheduler=address)
    assert not (root / "autograded").exists()


def test_a_course_folder_the_workers_cannot_see_is_named(tmp_path):
    """A worker on another machine without the shared file system: the error says so, nothing is graded."""
    with pytest.raises(cluster.ClusterUnavailable, match="cannot see the course folder .*same path"):
        grading.worker_config(str(tmp_path / "not-mounted-here"), sandbox=False)


def _worker_process_facts():
    import os
    import sys
    return {"parent": os.getppid(), "nbgrader imported": "nbgrader.converters" in sys.modules,
            "environ": dict(os.environ), "cwd": os.getcwd()}


def test_local_workers_are_forked_with_the_grader_imported_and_take_the_graders_environment(
        tmp_path, monkeypatch):
    """The local cluster's workers come from a forkserver that has imported nbgrader; one started for an
    earlier grading still has that grading's environment, and every worker gets the grader's current one."""
    import os
    from contextlib import contextmanager

    root = _course(tmp_path, {"alice": tiny_course.source_notebook()})
    facts = []
    real_client = grading.grading_client

    @contextmanager
    def watched_client(scheduler=None, workers=1):
        with real_client(scheduler, workers) as client:
            yield client
            facts.append(list(client.run(_worker_process_facts).values()))

    monkeypatch.setattr(grading, "grading_client", watched_client)
    monkeypatch.setenv("LMPOLICY_TEST_EARLIER_ONLY", "set for the first grading")
    first = grade_class(root, workers=1, log=lambda _: None)
    monkeypatch.delenv("LMPOLICY_TEST_EARLIER_ONLY")
    monkeypatch.setenv("LMPOLICY_TEST_LATER_ONLY", "set for the second grading")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    second = grade_class(root, workers=1, log=lambda _: None)
    assert [o.status for o in first + second] == [Status.GRADED] * 2
    (first_worker,), (second_worker,) = facts
    for worker in (first_worker, second_worker):
        # forked by the forkserver (a spawned worker's parent is this process, where its nanny runs),
        # and nbgrader already there before the grader's start-up imported it
        assert worker["parent"] != os.getpid() and worker["nbgrader imported"]
    assert first_worker["environ"]["LMPOLICY_TEST_EARLIER_ONLY"] == "set for the first grading"
    assert second_worker["environ"] == dict(os.environ) and "LMPOLICY_TEST_EARLIER_ONLY" not in os.environ
    assert second_worker["cwd"] == str(tmp_path / "elsewhere")
