"""A kernel started before its notebook was known takes that notebook's folder and student.

Loaded as an IPython extension when a kernel starts (before any submitted code), it serves two
operations, called by the grader (``kernels.remote_call``) before the notebook's first cell:

- ``take_files`` (the grading kernel): unsandboxed, the kernel moves into the notebook's folder;
  sandboxed, it copies in the files the grader staged for it;
- ``become_student`` (both kernels): the environment variables that say whose notebook it is
  (``lmpolicy_grader.students``).
"""
from __future__ import annotations

import os
import subprocess

from lmpolicy_grader.kernels import remote_call

TARGET = "lmpolicy_grader.moving_in"


def take_files(folder: str | None = None, copy_command: list[str] | None = None) -> None:
    if folder is not None:
        os.chdir(folder)
    if copy_command is not None:
        subprocess.run(copy_command, check=True)


def become_student(environment: dict[str, str | None]) -> None:
    for name, value in environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def load_ipython_extension(shell) -> None:
    remote_call.serve(shell, TARGET, {"take_files": take_files, "become_student": become_student})
