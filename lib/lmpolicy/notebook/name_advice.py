"""What a NameError in a notebook cell says: "✗ Not defined yet:" and what to do about it.

Most often a cell ran before the cell that defines the name (after a kernel restart, say): then the advice
names that cell. Else the name is misspelt, and the advice offers the closest name the notebook defines.
"""
from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass

from lmpolicy.notebook import kernel, progress
from lmpolicy.notebook.bindings import binds
from lmpolicy.notebook.failures import verdict_line
from lmpolicy.notebook.verdict_lines import wrapped

HEADING = "Not defined yet"
RUN_ALL_ABOVE = "After a restart (or to be sure), Run \u25b8 Run All Above runs every cell above this one."
# answers' names as a student's older copy of a released notebook writes them -> the name its checks read
RENAMED = {"temperature_095": "temperature_at_target"}


@dataclass(frozen=True)
class NameAdvice:
    """What to do about a NameError; ``alone``: the advice says all, IPython's traceback would only hide it;
    ``gist``: its first sentence, for the start page's table (the whole text when empty)."""
    text: str
    alone: bool = False
    gist: str = ""

    def in_short(self) -> str:
        return self.gist or self.text


def explain_name_errors(shell, advice) -> None:
    """Make a NameError that reaches a cell of IPython ``shell`` end with "✗ Not defined yet:" and
    ``advice(name, namespace)``: what to do about it (a str, or a NameAdvice). IPython's own traceback
    comes first, unless the advice is a NameAdvice that stands alone: then it is the one line shown."""
    def explain(shell, etype, value, tb, tb_offset=None) -> list[str]:
        shown = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
        try:
            name = getattr(value, "name", None)
            if name:
                found = advice(name, shell.user_ns)
                found = found if isinstance(found, NameAdvice) else NameAdvice(str(found))
                lines = wrapped([verdict_line(HEADING, found.text)])
                shown = lines if found.alone else [*shown, *lines]
        except Exception:  # noqa: BLE001 - the advice must never hide the error itself
            pass
        sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # for %debug, as IPython's display
        shell._showtraceback(etype, value, shown)
        return shown
    shell.set_custom_exc((NameError,), explain)


def renamed_advice(name: str, defined) -> str | None:
    """The advice for ``name`` when it is one side of a renamed answer (``RENAMED``), else None. ``defined``: the
    names the notebook's cells or the kernel define. The checks ask for the current name, so a check that misses it
    names it, and the older one the student's cell defines instead."""
    older = next((old for old, new in RENAMED.items() if new == name), None)
    if older is not None and older in defined:
        return (f"this exercise's answer is named {name}; your cell names it {older}, as older copies of this "
                f"notebook do: rename it {name}")
    if name in RENAMED:
        return f"{name} is named {RENAMED[name]} in this notebook's checks: use {RENAMED[name]}"
    return None


def undefined_name_advice(name: str, namespace: dict, in_a_check: bool) -> NameAdvice:
    """In the student's kernel: the advice for ``name``, undefined in ``namespace``. When a cell of this kernel's
    notebook defines it, that cell has not run: the advice is all there is to say. Else the name is misspelt: in
    the student's own cell IPython's traceback shows the line, in a check cell (``in_a_check``) only the check's
    insides, so there the advice stands alone too."""
    path = kernel.notebook_path()
    cells = progress.notebook_cells(path) if path is not None else []
    renamed = renamed_advice(name, set(namespace) | binds([cell.source for cell in cells if cell.cell_type == "code"]))
    if renamed is not None:
        return NameAdvice(renamed + ".", alone=in_a_check)
    defining = [cell for cell in cells if cell.cell_type == "code" and name in binds([cell.source])]
    if defining:
        key = progress.answer_cells(path.stem, path).get(getattr(defining[0], "id", None))
        where = (f"{progress.exercise(key).label}'s answer cell" if key in progress.EXERCISES_BY_KEY
                 else "a cell of this notebook")
        gist = f"{name} is defined in {where}, which has not run in this kernel: run it first."
        return NameAdvice(f"{gist} {RUN_ALL_ABOVE}", alone=True, gist=gist)
    known = {n for cell in cells if cell.cell_type == "code" for n in binds([cell.source])}
    known |= {n for n in namespace if not n.startswith("_")}
    close = difflib.get_close_matches(name, sorted(known), n=1)
    unknown = f"nothing in this notebook defines {name}" if cells else f"{name} is not defined in this kernel"
    return NameAdvice(unknown + (f"; did you mean {close[0]}?" if close
                                 else ": check its spelling, or run the cell that defines it."), alone=in_a_check)
