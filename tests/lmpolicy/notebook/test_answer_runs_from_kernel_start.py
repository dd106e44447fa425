"""A kernel of the student's JupyterLab watches which run of which cell left each name from its first cell
(``lmpolicy.notebook.student_kernels``, ``answer_runs.load_ipython_extension``): a cell that raised before the first
check, other cells run since, is still known; the kernel imports none of the checks for it; the grader's kernels
are never watched."""
import os
import re
from pathlib import Path

import pytest

from lmpolicy.notebook import progress, student_kernels
from tests.lmpolicy.notebook.test_answer_runs import CHAPTER_PROBS, NOTEBOOK, check_11_1a, numbers_cell, release_cell, \
    verdict
from tests.lmpolicy.notebook.test_checks import Kernel

ROOT = Path(__file__).resolve().parents[3]


def students_kernel(monkeypatch, env) -> Kernel:
    """A python3 kernel started from the kernel spec the student's JupyterLab hands out (its server's kernel spec
    manager, which jupyter_client's kernel manager builds here in place of its own)."""
    from jupyter_client import kernelspec

    monkeypatch.setattr(kernelspec, "KernelSpecManager", student_kernels.StudentKernelSpecManager)
    return Kernel(env)


def kernel_env(folder, **extra) -> dict:
    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(folder / "progress.json"), LMPOLICY_STUDENT_ID="alice",
               JPY_SESSION_NAME=str(folder / f"{NOTEBOOK}.ipynb"), **extra)
    for variable in ("NBGRADER_EXECUTION", "LMPOLICY_VARIANTS"):
        if variable not in extra:
            env.pop(variable, None)
    return env


@pytest.mark.parametrize("folder", ["jupyter-config/student", "deploy/singleuser/student",
                                    "jupyter-config/instructor", "deploy/singleuser/instructor"])
def test_the_student_servers_kernels_load_the_watch(folder, monkeypatch):
    """A server started with a student's configuration (make lab, the hubs' student servers) hands out kernel specs
    that load the extension, an IPython kernel's only; an instructor's server, the installed ones."""
    from jupyter_server.serverapp import ServerApp

    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(ROOT / folder))
    server = ServerApp()
    try:
        server.load_config_file()
        configured = server.config.ServerApp.get("kernel_spec_manager_class")
    finally:
        ServerApp.clear_instance()
    if folder.endswith("instructor"):
        assert configured is None
        return
    assert configured == "lmpolicy.notebook.student_kernels.StudentKernelSpecManager"
    argv = student_kernels.StudentKernelSpecManager().get_kernel_spec("python3").argv
    assert argv[-1] == "--InteractiveShellApp.extra_extensions=lmpolicy.notebook.answer_runs", argv
    other = ["ir", "--slave", "-e", "IRkernel::main()", "{connection_file}"]
    assert student_kernels.watching(student_kernels.KernelSpec(argv=list(other))).argv == other


def test_a_cell_that_raised_before_the_first_check_is_known_though_cells_ran_since(tmp_path, monkeypatch):
    """A fresh kernel: the numbers run, then their cell raises, then the function's cell runs, and only then the
    first check (the first import of the checks). The check says the numbers are left from the run before the one
    that raised, instead of judging them: the watch began with the kernel, which imported no check for it."""
    (tmp_path / f"{NOTEBOOK}.ipynb").write_text((progress.release_dir() / f"{NOTEBOOK}.ipynb").read_text())
    fresh = students_kernel(monkeypatch, kernel_env(tmp_path))
    try:
        parameters = release_cell("ex11_1a__parameters")
        fresh.run("import math\nimport torch\n" + parameters.source, cell_id=parameters.id)
        fresh.run(numbers_cell(" * ".join(map(str, CHAPTER_PROBS))), cell_id="ex11_1a__numbers")
        fresh.run(numbers_cell("token_probs_86.product()"), cell_id="ex11_1a__numbers")  # raises AttributeError
        fresh.run("def sequence_logprob(token_probs):\n    return token_probs.log().sum(dim=-1)",
                  cell_id="ex11_1a__sequence_logprob")
        imported, _ = fresh.run("import sys\nprint(sorted(m for m in sys.modules if m.startswith('lmpolicy.')))")
        assert "lmpolicy.notebook.answer_runs" in imported
        assert not {"lmpolicy.notebook.checks", "lmpolicy.notebook.recorder", "lmpolicy.notebook.progress"} & set(
            eval(imported)), imported  # the watch alone: a kernel that never checks imports nothing else for it
        _, error = check_11_1a(fresh)
        assert error is not None and error["ename"] == "LeftOver", error
        assert re.sub(r"In \[\d+\]", "In [n]", verdict(error)) == (
            "\u2717 Not checked: prob_86, logprob_86 and main_contributor are left from an earlier run: their cell "
            "(In [n]) raised AttributeError: 'Tensor' object has no attribute 'product' the last time it ran. "
            "Fix that cell and run it again, then this check.")
    finally:
        fresh.close()


def test_a_kernel_under_the_grader_is_not_watched(tmp_path, monkeypatch):
    """nbgrader's kernels are started by nbgrader's kernel manager; one started with the extension all the same
    (NBGRADER_EXECUTION set) registers nothing."""
    graded = students_kernel(monkeypatch, kernel_env(tmp_path, NBGRADER_EXECUTION="autograde"))
    try:
        printed, error = graded.run("import sys\nprint('lmpolicy.notebook.answer_runs' in sys.modules, "
                                    "hasattr(get_ipython(), '_lmpolicy_answer_runs'))")
        assert error is None and printed.strip() == "True False", (printed, error)  # loaded, and nothing hooked
    finally:
        graded.close()
