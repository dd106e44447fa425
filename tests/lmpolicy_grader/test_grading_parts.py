"""The grader's parts that need no kernel: the kernel spec, the gradebook lock, the mistake rounds."""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.class_grading.examples_course import mistake_rounds
from lmpolicy_grader.class_grading.gradebook import serialise_gradebook_sessions
from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.kernels.grading_kernel import grading_kernel_spec, install_grading_kernel


def test_grading_kernel_runs_under_prlimit_with_one_thread(tmp_path):
    spec = grading_kernel_spec(memory_bytes=123_456_789, cpu_seconds=77)
    assert spec["argv"][0].endswith("prlimit")
    assert "--as=123456789" in spec["argv"] and "--cpu=77" in spec["argv"]
    assert "--ext=lmpolicy_grader.trusted_tests.call_server" in spec["argv"]
    assert "--ext=lmpolicy_grader.kernels.moving_in" in spec["argv"]
    assert spec["env"]["OMP_NUM_THREADS"] == "1" and spec["env"]["MKL_NUM_THREADS"] == "1"
    written = json.loads((install_grading_kernel(tmp_path, cpu_seconds=5) / "kernel.json").read_text())
    assert "--cpu=5" in written["argv"] and "{connection_file}" in written["argv"]


TRY_LOCK = """import fcntl, sys
with open(sys.argv[1], "a") as handle:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("blocked")
    else:
        print("free")
"""


def _other_process_can_lock(path) -> bool:
    # a fresh process, not a fork of this one: a forked child shares this process's open lock (the very
    # lock under test) for as long as it lives, and a fork of a process with threads may hang before it exits
    answer = subprocess.run([sys.executable, "-c", TRY_LOCK, str(path)], capture_output=True, text=True, timeout=60)
    return answer.stdout.strip() == "free"


@pytest.mark.slow
def test_gradebook_sessions_hold_the_lock_exactly_while_open(tmp_path, repo_root):
    load_config(repo_root)  # as in every grading process: the course config puts nbgrader's alembic on PATH
    lock = tmp_path / ".gradebook.lock"
    undo = serialise_gradebook_sessions(lock)
    try:
        gradebook = Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}")
        assert not _other_process_can_lock(lock)
        gradebook.close()
        assert _other_process_can_lock(lock)
    finally:
        undo()


@pytest.mark.slow
def test_two_serialisers_in_one_process_each_release_their_own_lock(tmp_path, repo_root):
    """A worker that graded one SQLite course (prepare_worker) and then opens another's gradebook holds both
    locks while a session is open, and neither after it closes (one serialiser once kept the other's lock)."""
    load_config(repo_root)
    first, second = tmp_path / "first.lock", tmp_path / "second.lock"
    undo_first = serialise_gradebook_sessions(first)
    undo_second = serialise_gradebook_sessions(second)
    try:
        gradebook = Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}")
        assert not _other_process_can_lock(first) and not _other_process_can_lock(second)
        gradebook.close()
        assert _other_process_can_lock(first) and _other_process_can_lock(second)
    finally:
        undo_second()
        undo_first()


def test_mistake_rounds_never_put_two_answers_of_one_exercise_together():
    answer = lambda notebook, cell, exercise: SimpleNamespace(notebook=notebook, cell=cell, exercise=exercise)  # noqa: E731
    answers = [answer("01", "a", "ex1"), answer("01", "a", "ex1"), answer("01", "b", "ex2"),
               answer("02", "a", "ex1"), answer("01", "c", "ex1")]
    rounds = mistake_rounds(answers)
    assert [len(r) for r in rounds] == [3, 1, 1]
    for round_ in rounds:
        keys = [(a.notebook, a.exercise) for a in round_]
        assert len(keys) == len(set(keys))
    assert sum(len(r) for r in rounds) == len(answers)


def _failed_test_cell(failed_line):
    source = ("from lmpolicy.notebook import checks\nchecks.check_close(double(1.0), 2.0, 'double')\n"
              "### BEGIN HIDDEN TESTS\nassert double(-3.0) == -6.0, 'hidden check of double failed'\n"
              "### END HIDDEN TESTS")
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "ex1__tests",
                                 "points": 1, "schema_version": 3}
    if failed_line is not None:
        cell.metadata["lmpolicy_grader"] = {"failed_line": failed_line}
    quoted = "\n".join(f"{'---->' if n == failed_line else '     '} {n} {line}"
                       for n, line in enumerate(source.split("\n"), start=1))
    cell.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue="double is off",
                                           traceback=["\x1b[31mCheckFailed\x1b[0m  Traceback", quoted,
                                                      "CheckFailed: double is off"])]
    return cell


@pytest.mark.parametrize("failed_line, hidden", [(4, True), (2, False), (None, False)])
def test_feedback_notes_a_hidden_test_only_when_one_failed_and_shows_no_message_of_a_hidden_one(failed_line, hidden):
    from lmpolicy_grader.nbgrader_plugins import HideHiddenTests

    cell, _ = HideHiddenTests().preprocess_cell(_failed_test_cell(failed_line), {}, 0)
    output = cell.outputs[0]
    shown = "\n".join(output.traceback)
    assert ("fails one of the hidden checks" in shown) == hidden
    # a hidden check's message may quote its hint and values of its hidden inputs: in no part of the output
    assert ("double is off" in shown + output.evalue) != hidden
    assert "double(-3.0)" not in shown and "HIDDEN TESTS" not in shown and "double(-3.0)" not in cell.source
    if failed_line == 2:  # the visible check's own traceback stays, pointing at its line
        assert "----> 2 checks.check_close(double(1.0), 2.0, 'double')" in shown


def test_an_instructor_may_show_the_message_of_a_failed_hidden_check_in_the_feedback():
    from lmpolicy_grader.nbgrader_plugins import HideHiddenTests

    cell, _ = HideHiddenTests(show_hidden_message=True).preprocess_cell(_failed_test_cell(4), {}, 0)
    shown = "\n".join(cell.outputs[0].traceback)
    assert "CheckFailed: double is off" in shown and "fails one of the hidden checks" in shown
    assert "double(-3.0)" not in shown


def test_outcomes_read_back_with_their_status_even_from_an_older_status_file(tmp_path):
    from lmpolicy_grader.class_grading.course import STATUS_FILE, Outcome, load_outcomes, save_outcomes
    from lmpolicy_grader.class_grading.status import Status

    save_outcomes(tmp_path, [Outcome("ada", "01_x", Status.FAILED, "kernel died")])
    assert '"status": "FAILED"' in (tmp_path / STATUS_FILE).read_text()
    (tmp_path / STATUS_FILE).write_text(json.dumps([{"student": "bob", "notebook": "01_x", "status": "failed"}]))
    assert [o.status for o in load_outcomes(tmp_path)] == [Status.FAILED]  # written before one spelling
    with pytest.raises(ValueError, match="'finished'"):
        Outcome("eve", "01_x", "finished")


def test_a_failure_no_test_line_raised_reads_as_its_checks_verdict_or_by_its_name():
    """The code rule refuses a test before it runs (no line of it raised): the feedback shows the rule's reason as
    the checks show a refusal, "✗ Not allowed: ...", wrapped, not a class name and one line running off the page."""
    from lmpolicy.notebook.verdict_lines import WIDTH
    from lmpolicy_grader.nbgrader_plugins import HideHiddenTests

    reason = ("cell 5 (your answer to ex1) line 1 uses from IPython.display import (from IPython.display import "
              "publish_display_data), outside the plain Python the grader can check: take it out of your notebook")
    refused = _failed_test_cell(None)
    refused.outputs[0].update(ename="LibraryShortcutUsed", evalue=reason)
    cell, _ = HideHiddenTests().preprocess_cell(refused, {}, 0)
    (shown,) = cell.outputs[0].traceback
    assert shown.startswith("✗ Not allowed: cell 5 (your answer to ex1) line 1")
    assert "LibraryShortcutUsed" not in shown and " ".join(shown.split()) == " ".join(f"✗ Not allowed: {reason}".split())
    assert max(len(line) for line in shown.split("\n")) <= WIDTH

    timed_out = _failed_test_cell(None)
    timed_out.outputs[0].update(ename="CellTimeoutError", evalue="the cell ran past 60 s")
    cell, _ = HideHiddenTests().preprocess_cell(timed_out, {}, 0)
    assert cell.outputs[0].traceback == ["CellTimeoutError: the cell ran past 60 s"]
