"""Which frames of a traceback are the student's own code, and how a verdict shows one: "In [12], line 3: ...".

A frame is the student's unless its file is in this package, the standard library or an installed package
(or a ``<frozen ...>``/``<string>`` pseudo-file); a notebook cell is named by its execution count, as IPython
keeps it. A check in the student's kernel and the grader's call server in the grading kernel show the same
lines.
"""
from __future__ import annotations

import contextlib
import linecache
import os
import sysconfig
import traceback
from pathlib import Path

from lmpolicy.notebook import kernel

MAX_LINE = 120  # a frame's line is cut here: a verdict wraps it onto two lines at most


def _library_folders() -> tuple[str, ...]:
    """Folders whose frames are never the student's: all of lmpolicy, the standard library, installed packages."""
    folders = {str(Path(__file__).resolve().parents[1])}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError):
            folders.add(str(Path(sysconfig.get_paths()[key]).resolve()))
    return tuple(folder + os.sep for folder in folders)


LIBRARY_FOLDERS = _library_folders()


def is_student_code(filename: str) -> bool:
    """Whether a frame in file ``filename`` runs the student's code (a notebook cell or a file of their own)."""
    if filename.startswith("<") and not filename.startswith("<ipython-input"):
        return False  # <frozen ...>, <string>: never the student's
    with contextlib.suppress(OSError, ValueError):
        filename = str(Path(filename).resolve())
    return not filename.startswith(LIBRARY_FOLDERS)


def cell_name(filename: str) -> str:
    """"In [12]" for a notebook cell (IPython keeps the map from file to execution count), else the file's name."""
    shell = kernel.shell()
    count = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename) if shell else None
    return f"In [{count}]" if count is not None else Path(filename).name


def frame_line(frame: traceback.FrameSummary) -> str:
    """One frame as a verdict shows it: where (cell or file, line), the function, the code."""
    code = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
    where = f"{cell_name(frame.filename)}, line {frame.lineno}"
    text = f"  {where}, in {frame.name}: {code}" if frame.name != "<module>" else f"  {where}: {code}"
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 3] + "..."


def student_frame_lines(error: BaseException, count: int) -> list[str]:
    """The lines of the innermost ``count`` frames of the student's code in ``error``'s traceback."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if is_student_code(f.filename)]
    return [frame_line(frame) for frame in frames[-count:]] if count > 0 else []
