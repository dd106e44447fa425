"""Where a notebook's code runs: under nbgrader, or in the student's own IPython kernel, and which notebook
that kernel belongs to.

nbgrader sets ``NBGRADER_EXECUTION`` while it runs a notebook (Validate and autograding alike); JupyterLab
names a kernel's notebook in ``JPY_SESSION_NAME``. Nothing here imports IPython: a script has no shell.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def running_under_grader() -> bool:
    """True while nbgrader executes the notebook (it sets NBGRADER_EXECUTION: validate or autograde)."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def shell():
    """The IPython shell this code runs in, or None (a script, or IPython never imported)."""
    module = sys.modules.get("IPython")
    return module.get_ipython() if module is not None else None


def notebook_path() -> Path | None:
    """The notebook file this kernel belongs to, as JupyterLab names it; None when it names none that exists."""
    path = Path(os.environ.get("JPY_SESSION_NAME", ""))
    return path if path.suffix == ".ipynb" and path.exists() else None


def this_notebook(name: str) -> Path | None:
    """The notebook file this kernel belongs to, when it is notebook ``name`` (e.g. "01_policy_softmax")."""
    path = notebook_path()
    return path if path is not None and path.stem == name else None
