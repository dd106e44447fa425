"""A grading kernel started before its notebook was known takes that notebook's folder.

Loaded as an IPython extension when the grading kernel starts (before any submitted code), it serves
one operation, ``take_files``, called by the grader (``kernels.remote_call``) before the notebook's
first cell: unsandboxed, the kernel moves into the notebook's folder; sandboxed, it copies in the
files the grader staged for it.
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


def load_ipython_extension(shell) -> None:
    remote_call.serve(shell, TARGET, {"take_files": take_files})
