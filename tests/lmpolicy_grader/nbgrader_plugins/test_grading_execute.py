"""GradingExecute when a kernel dies at start-up: the grading kernel before any cell of the submission
ran, or the trusted test kernel before its first test."""
from __future__ import annotations

import sys

import nbformat
import pytest
from traitlets.config import Config

from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager
from lmpolicy_grader.kernels import notebook_kernels
from lmpolicy_grader.kernels.trusted_kernel import TrustedKernelManager
from lmpolicy_grader.nbgrader_plugins.grading_execute import GradingExecute
from lmpolicy_grader.incidents import GradingFailed

DIE_AT_START = [sys.executable, "-c", "raise SystemExit(3)"]


class DyingAtStart:
    """A kernel manager whose first ``deaths`` kernels exit before answering kernel_info (``starts`` counts them)."""
    deaths = 0
    starts = 0

    def format_kernel_cmd(self, extra_arguments=None):
        type(self).starts += 1
        if type(self).starts <= type(self).deaths:
            return DIE_AT_START
        return super().format_kernel_cmd(extra_arguments)


class KernelDyingAtStart(DyingAtStart, GradingKernelManager):
    """A grading kernel (unsandboxed) that dies at start-up."""


def _grade(tmp_path, deaths: int):
    KernelDyingAtStart.deaths, KernelDyingAtStart.starts = deaths, 0
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("answer = 6 * 7\nprint(answer)")])
    config = Config({"GradingKernelManager": {"sandbox": False}})
    execute = GradingExecute(config=config, kernel_manager_class=KernelDyingAtStart,
                             spare_kernels=False)  # the kernels this notebook starts for itself
    resources = {"nbgrader": {"notebook": "01_policy_softmax"}, "metadata": {"path": str(tmp_path)}}
    return execute.preprocess(nb, resources)[0]


def test_a_kernel_that_dies_once_at_start_up_is_started_again_and_the_notebook_runs(tmp_path):
    nb = _grade(tmp_path, deaths=1)
    assert KernelDyingAtStart.starts == 2
    assert nb.cells[0].outputs[0]["text"] == "42\n"


def test_a_kernel_that_dies_twice_at_start_up_fails_the_notebook_with_that_reason(tmp_path):
    with pytest.raises(GradingFailed) as failed:
        _grade(tmp_path, deaths=2)
    assert failed.value.kind == "kernel died"
    assert "died twice at start-up, before any cell ran" in failed.value.reason
    assert KernelDyingAtStart.starts == 2


class TrustedKernelDyingAtStart(DyingAtStart, TrustedKernelManager):
    """A trusted test kernel that dies at start-up."""


def _grade_a_test(tmp_path, monkeypatch, deaths: int):
    monkeypatch.setattr(notebook_kernels, "TrustedKernelManager", TrustedKernelDyingAtStart)
    TrustedKernelDyingAtStart.deaths, TrustedKernelDyingAtStart.starts = deaths, 0
    test = nbformat.v4.new_code_cell("assert answer == 42, answer\nprint('checked', answer)")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "t1", "points": 1}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("answer = 6 * 7"), test])
    config = Config({"GradingKernelManager": {"sandbox": False}})
    execute = GradingExecute(config=config, spare_kernels=False)
    resources = {"nbgrader": {"notebook": "01_policy_softmax"}, "metadata": {"path": str(tmp_path)}}
    return execute.preprocess(nb, resources)[0]


def test_a_trusted_kernel_that_dies_once_at_start_up_is_started_again_and_the_tests_run(tmp_path, monkeypatch):
    nb = _grade_a_test(tmp_path, monkeypatch, deaths=1)
    assert TrustedKernelDyingAtStart.starts == 2
    assert [out.get("text") for out in nb.cells[1].outputs] == ["checked 42\n"]


def test_a_trusted_kernel_that_dies_twice_at_start_up_fails_the_notebook_with_that_reason(tmp_path, monkeypatch):
    with pytest.raises(GradingFailed) as failed:
        _grade_a_test(tmp_path, monkeypatch, deaths=2)
    assert failed.value.kind == "trusted tests"
    assert "trusted test kernel died twice at start-up" in failed.value.reason
    assert TrustedKernelDyingAtStart.starts == 2


class KernelWithoutItsPython(GradingKernelManager):
    """A grading kernel whose Python is not there (as when the sandbox hides where it lives)."""

    @property
    def kernel_spec(self):
        from jupyter_client.kernelspec import KernelSpec

        from lmpolicy_grader.kernels.grading_kernel import grading_kernel_spec
        return KernelSpec(resource_dir="", **grading_kernel_spec(python="/nonexistent/bin/python3"))


def test_a_kernel_that_cannot_start_shows_its_own_error_output(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("answer = 6 * 7")])
    execute = GradingExecute(config=Config({"GradingKernelManager": {"sandbox": False}}),
                             kernel_manager_class=KernelWithoutItsPython, spare_kernels=False)
    resources = {"nbgrader": {"notebook": "01_policy_softmax"}, "metadata": {"path": str(tmp_path)}}
    with pytest.raises(GradingFailed) as failed:
        execute.preprocess(nb, resources)
    assert "died twice at start-up" in failed.value.reason
    assert "/nonexistent/bin/python3" in failed.value.reason and "No such file or directory" in failed.value.reason


def test_a_kernel_killed_by_its_file_size_limit_fails_the_notebook_with_a_reason_that_names_that_limit(tmp_path):
    """A submission that gives SIGXFSZ back its default and writes past the sandbox's file-size limit kills its
    own kernel: the reason names the file-size limit among the sandbox's limits, not only memory and CPU."""
    killer = "import os, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_DFL)\nos.kill(os.getpid(), signal.SIGXFSZ)"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(killer)])
    config = Config({"GradingKernelManager": {"sandbox": False}})
    execute = GradingExecute(config=config, spare_kernels=False)
    resources = {"nbgrader": {"notebook": "01_policy_softmax"}, "metadata": {"path": str(tmp_path)}}
    with pytest.raises(GradingFailed) as failed:
        execute.preprocess(nb, resources)
    assert failed.value.kind == "kernel died"
    assert "file size" in failed.value.reason and "memory" in failed.value.reason
