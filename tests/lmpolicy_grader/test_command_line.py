"""The instructor's command line (tyro, from the command dataclasses) and the limits it installs."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmpolicy_grader.__main__ import Grade, InstallKernel, Report, parse


def test_every_grade_flag_keeps_its_name():
    chosen = parse(["--course", "/somewhere", "grade", "--workers", "3", "--student", "alice", "--student", "bob",
                    "--no-release", "--no-examples", "--no-feedback"])
    assert str(chosen.course) == "/somewhere"
    assert chosen.command == Grade(workers=3, student=("alice", "bob"), release=False, examples=False, feedback=False)
    assert parse(["grade"]).command == Grade(workers=None, student=(), release=True, examples=True, feedback=True)
    assert str(parse(["grade", "--course", "/there"]).course) == "/there"  # --course after the command too
    assert isinstance(parse(["report"]).command, Report)
    assert parse(["install-kernel", "--prefix", "/k"]).command == InstallKernel(prefix=Path("/k"))


@pytest.mark.parametrize("argv", [["grade", "--no-release", "False"], ["grade", "--release", "False"],
                                  ["grade", "--no-feedback", "false"], ["grade", "--no-examples", "0"]])
def test_a_boolean_flag_takes_no_value(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        parse(argv)
    assert stopped.value.code == 2
    assert argv[-1] in capsys.readouterr().err  # tyro names the value it could not use


def test_install_kernel_writes_the_course_limits(tmp_path, repo_root):
    """From the repository's config: the documented 3 GiB and 600 CPU seconds; from a course config
    that sets its own, those: the command reads the limits, it does not repeat them."""
    def install(course, prefix):  # each install its own prefix, whatever the checkout's folder is called
        done = subprocess.run([sys.executable, "-m", "lmpolicy_grader", "--course", str(course), "install-kernel",
                               "--prefix", str(tmp_path / prefix)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads((tmp_path / prefix / "lmpolicy-grader" / "kernel.json").read_text())["argv"]

    argv = install(repo_root, "from-the-repository")
    assert f"--as={3 * 1024**3}" in argv and "--cpu=600" in argv
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(repo_root / "nbgrader_config.py", course / "nbgrader_config.py")
    with open(course / "nbgrader_config.py", "a") as config:
        config.write("c.GradingKernelManager.cpu_seconds = 42\n")
    assert "--cpu=42" in install(course, "from-a-course")


def test_a_folder_without_a_course_is_refused(tmp_path):
    done = subprocess.run([sys.executable, "-m", "lmpolicy_grader", "--course", str(tmp_path), "report"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "has no nbgrader_config.py" in done.stderr


def test_the_course_limits_are_the_documented_ones(repo_root):
    """docs/instructors.md: cells 60 s (08: 120 s), notebooks 180 s (08: 360 s), output 100 kB per cell."""
    from lmpolicy_grader.class_grading.course import load_config
    from lmpolicy_grader.nbgrader_plugins import GradingExecute

    execute = GradingExecute(config=load_config(repo_root))
    assert (execute.timeout, execute.default_budget, execute.max_output_bytes) == (60, 180, 100_000)
    assert execute.cell_timeouts == {"08_tinylm_reinforce": 120}
    assert execute.notebook_budgets == {"08_tinylm_reinforce": 360}
