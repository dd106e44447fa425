"""Which run of which cell left each name in the student's kernel, so that a check judges only answers their cells
finished making.

The recorder (``lmpolicy.notebook.recorder``) tells ``AnswerRuns`` about every cell the kernel runs: before it, the
names its code binds at the top level (read from its source by ``lmpolicy.notebook.bindings``: assignments, def and
class, imports, augmented assignments, for and with targets, walrus), each with the object it holds; after it,
whether the run raised. A cell that does not parse binds what its last version that parsed bound (by the cell id
JupyterLab sends). A name whose last binding run raised holds what an earlier run left (its object unchanged), or
what the failed run set before it raised: either way not the answer its cell now holds. ``refuse_left_over`` fails
a check reading such a name with ``LeftOver`` (nothing judged, so nothing recorded as passed); the recorder keeps a
pass the check recorded before.

The kernel cannot see a cell edited and not run again: JupyterLab 4 marks such a code cell ``jp-mod-dirty``.
``show_edited_since_run`` shows, while a check runs, a small script that adds one visible line above the check's
verdict when a cell that made one of its answers (found by its prompt's execution count) is edited since it ran.
Nothing here runs under nbgrader: the recorder is not installed there.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from lmpolicy.notebook import page_script
from lmpolicy.notebook.bindings import binds, statements
from lmpolicy.notebook.failures import CheckFailed

MISSING = object()  # a name not bound before the cell ran
MAX_ERROR_CHARS = 160


@dataclass(frozen=True)
class Run:
    """The last run of a cell that binds a name: its execution count, its error ("AttributeError: ...") or None,
    and whether the name's object changed during that run (None: not known, the run came before the watch)."""
    execution_count: int | None
    error: str | None
    rebound: bool | None


class LeftOver(CheckFailed):
    """A check read an answer whose cell raised the last time it ran: it judged nothing."""

    heading = "Not checked"


def error_words(error: BaseException) -> str:
    """An answer cell's error in one line: its type and the first line of its message."""
    if isinstance(error, SyntaxError):
        text = f"{error.msg} (line {error.lineno})" if error.lineno else error.msg or ""
    else:
        text = next(iter(str(error).strip().splitlines()), "")
    words = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return words if len(words) <= MAX_ERROR_CHARS else words[:MAX_ERROR_CHARS - 3] + "..."


def names_read(source: str) -> list[str]:
    """The names a cell's code reads (a check cell's answers among them), in the order of its code."""
    nodes = [node for statement in statements([source]) for node in ast.walk(statement)
             if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)]
    return list(dict.fromkeys(node.id for node in sorted(nodes, key=lambda node: (node.lineno, node.col_offset))))


class AnswerRuns:
    """For each name a cell binds at the top level, the last run of such a cell (``last_run``)."""

    def __init__(self):
        self.last_run: dict[str, Run] = {}
        self.names_of_cell: dict[str, set[str]] = {}  # cell id -> the names its last version that parsed binds
        self.running: set[str] = set()  # the names the running cell binds: what it sets is its own, not left over
        self._before: dict[str, object] = {}
        self._cell_id: str | None = None

    def before_cell(self, source: str, cell_id: str | None, namespace: dict) -> None:
        self._cell_id = cell_id
        self.running = binds([source])
        earlier = self.names_of_cell.get(cell_id, set()) if cell_id else set()
        self._before = {name: namespace.get(name, MISSING) for name in self.running | earlier}

    def after_cell(self, result, namespace: dict) -> None:
        """Record the run that ended (IPython's ExecutionResult) for every name the cell binds."""
        error = result.error_in_exec or result.error_before_exec
        names = set(self.running)
        if result.error_before_exec is not None and self._cell_id:
            names |= self.names_of_cell.get(self._cell_id, set())  # it did not parse: what it bound before
        elif self._cell_id:
            self.names_of_cell[self._cell_id] = set(self.running)
        words = None if error is None else error_words(error)
        for name in names:
            rebound = namespace.get(name, MISSING) is not self._before.get(name, MISSING)
            self.last_run[name] = Run(result.execution_count, words, rebound)
        self.running, self._before, self._cell_id = set(), {}, None

    def learn_the_run_before(self, result) -> None:
        """The cell that ran just before the watch began (IPython's ``last_execution_result``: the watch begins in
        the cell that first imports the checks, often a check run right after its answer cell raised): when it
        raised, the names its code binds are taken as left by it, whether it changed them or not unknown."""
        error = None if result is None else result.error_in_exec or result.error_before_exec
        source = getattr(getattr(result, "info", None), "raw_cell", None)
        if error is None or not source:
            return
        for name in binds([source]):
            self.last_run.setdefault(name, Run(result.execution_count, error_words(error), None))

    def answer_names(self, answers, names, source: str, namespace: dict) -> list[str]:
        """The names of a check's answers: ``names`` as given, and the names the check cell's code (``source``)
        reads that hold one of ``answers`` (the very object); none the running cell binds itself."""
        held = [name for name in names_read(source) if name in namespace
                and any(namespace[name] is answer for answer in answers)]
        return [name for name in dict.fromkeys([*names, *held]) if name not in self.running]

    def left_over(self, names, namespace: dict) -> dict[Run, list[str]]:
        """``{run that raised: names}`` among ``names``: the names bound now whose last binding run raised."""
        found: dict[Run, list[str]] = {}
        for name in names:
            run = self.last_run.get(name)
            if run is not None and run.error is not None and name in namespace:
                found.setdefault(run, []).append(name)
        return found

    def refuse_left_over(self, names, namespace: dict) -> None:
        """Fail with ``LeftOver`` when an answer among ``names`` is not what its cell finished making: one line
        per run that raised, naming the answer and the error."""
        found = self.left_over(names, namespace)
        if found:
            raise LeftOver("\n".join(left_over_line(run, shown) for run, shown in found.items()))


def left_over_line(run: Run, names: list[str]) -> str:
    """What a check says instead of judging ``names``, which ``run`` left (``run.error`` is set)."""
    listed = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    one = len(names) == 1
    cell = f"{'its' if one else 'their'} cell" + (f" (In [{run.execution_count}])" if run.execution_count else "")
    if run.rebound is None:
        said = (f"{listed} may be left from an earlier run: {cell} raised {run.error} the last time it ran.")
    elif run.rebound:
        said = f"{listed} {'was' if one else 'were'} set by a run of {cell} that then raised {run.error}."
    else:
        said = (f"{listed} {'is' if one else 'are'} left from an earlier run: {cell} raised {run.error} "
                "the last time it ran.")
    return f"{said} Fix that cell and run it again, then this check."


MARK_EDITED = """
  const notebook = element.closest('.jp-Notebook');
  const edited = [];
  for (const [name, count] of spec.answers) {
    for (const cell of (notebook ? notebook.querySelectorAll('.jp-CodeCell.jp-mod-dirty') : [])) {
      const prompt = cell.querySelector('.jp-InputPrompt');
      if (prompt && prompt.textContent.trim().replace(/:$/, '') === '[' + count + ']') edited.push([name, count]);
    }
  }
  if (!edited.length) {
    hide();  // nothing to say
    return;
  }
  const line = document.createElement('pre');
  line.className = 'lmpolicy-edited-since-run';
  const names = edited.map(([name]) => name).join(', ');
  const counts = [...new Set(edited.map(([, count]) => '[' + count + ']'))].join(', ');
  line.textContent = '\\u2717 ' + names + ': the cell ' + counts + ' that set ' +
    (edited.length > 1 ? 'them' : 'it') + ' was edited after it ran, so this check judges what it ran then. ' +
    'Run that cell (Shift+Enter), then this check.';
  element.appendChild(line);
"""


def show_edited_since_run(runs: AnswerRuns, names) -> None:
    """Show the script that adds one line when a cell that made one of ``names`` is edited since it ran (see the
    module's docstring); nothing outside a kernel JupyterLab started for a notebook."""
    answers = [[name, runs.last_run[name].execution_count] for name in names
               if name in runs.last_run and runs.last_run[name].execution_count]
    if answers:
        page_script.show(MARK_EDITED, answers=answers)
