"""Which run of which cell left each name in the student's kernel, so that a check judges only answers their cells
finished making.

``watch(shell)`` has IPython tell an ``AnswerRuns`` about every cell the kernel runs: before it, the names its code
binds at the top level (read from its source by ``lmpolicy.notebook.bindings``: assignments, def and class, imports,
augmented assignments, for and with targets, walrus), each with the object it holds; after it, whether the run
raised. The kernels of the student's JupyterLab load this module as an IPython extension as they start
(``lmpolicy.notebook.student_kernels``), so that the cells run before the first check are known too; elsewhere the
recorder starts the watch when the checks are first imported, and learns only the cell run just before. A cell that
does not parse binds what its last version that parsed bound (by the cell id JupyterLab sends). A name whose last
binding run raised holds what an earlier run left (its object unchanged), or what the failed run set before it
raised: either way not the answer its cell now holds. ``refuse_left_over`` fails a check reading such a name with
``LeftOver`` (nothing judged, so nothing recorded as passed); the recorder keeps a pass the check recorded before.

The kernel cannot see a cell edited and not run again; the page can: JupyterLab 4 marks such a code cell
``jp-mod-dirty``. ``show_edited_since_run`` shows, while a check runs, a small script that looks for the cells that
made its answers (by their prompts' execution counts) among the edited ones. When one is, the check's verdict is
not on what the student sees: the script puts one line above it ("Not checked: your answer cell (In [7]) changed
since it ran: run it (Shift+Enter), then this check"), and once the check has run it takes out its ✓ lines and
marks its ✗ lines as found in the answers that ran. The kernel is told nothing, so the progress record holds the
verdict on the code that ran, with that code's fingerprints, and the line says so ("It judged prob_86 as that cell
left it, and it passed; your edit is not checked"); once the edit is saved the start page shows that pass as changed
since it passed.
Nothing here runs under nbgrader: neither the watch nor the recorder is installed there.
"""
from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass

from lmpolicy.notebook import kernel, page_script
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


def watch(shell) -> AnswerRuns:
    """The ``AnswerRuns`` of IPython ``shell``, told of every cell it runs from the first call on (hooks registered
    once per shell). Started while a cell runs (by the recorder, at the first import of the checks), it learns the
    run just before that cell (``learn_the_run_before``)."""
    runs = getattr(shell, "_lmpolicy_answer_runs", None)
    if isinstance(runs, AnswerRuns):
        return runs
    runs = AnswerRuns()
    runs.learn_the_run_before(getattr(shell, "last_execution_result", None))

    def before(info) -> None:
        with contextlib.suppress(Exception):  # the record must never break the student's notebook
            runs.before_cell(getattr(info, "raw_cell", "") or "", getattr(info, "cell_id", None), shell.user_ns)

    def after(result) -> None:
        try:
            runs.after_cell(result, shell.user_ns)  # an interrupted run too: it did not finish
        except Exception as error:  # noqa: BLE001 - the record must never break the student's notebook
            print(f"(lmpolicy could not record what this cell bound: {type(error).__name__}: {error})")

    shell.events.register("pre_run_cell", before)
    shell.events.register("post_run_cell", after)
    shell._lmpolicy_answer_runs = runs
    return runs


def load_ipython_extension(shell) -> None:
    """What an IPython kernel of the student's JupyterLab loads as it starts (``lmpolicy.notebook.student_kernels``):
    the watch, from the kernel's first cell; nothing under the grader."""
    if not kernel.running_under_grader():
        watch(shell)


MARK_EDITED = """
  const cell = element.closest('.jp-Cell');
  const notebook = element.closest('.jp-Notebook');
  const edited = new Map();  // execution count of an edited answer cell -> the answers it made
  for (const answerCell of (notebook ? notebook.querySelectorAll('.jp-CodeCell.jp-mod-dirty') : [])) {
    const prompt = answerCell.querySelector('.jp-InputPrompt');
    const shown = prompt ? prompt.textContent.trim().replace(/:$/, '') : '';
    for (const [name, count] of spec.answers) {
      if (shown === '[' + count + ']') edited.set(count, [...(edited.get(count) || []), name]);
    }
  }
  if (!cell || !edited.size) {
    hide();  // nothing to say
    return;
  }
  const listed = (words) => words.length > 1 ? words.slice(0, -1).join(', ') + ' and ' + words[words.length - 1]
    : words[0];
  const names = [...edited.values()].flat();
  const one = edited.size === 1;
  const box = document.createElement('div');  // drawn as a verdict's ✗ lines are: an error output's text
  box.className = 'jp-RenderedText lmpolicy-edited-since-run';
  box.setAttribute('data-mime-type', 'application/vnd.jupyter.stderr');
  box.setAttribute('role', 'status');  // a screen reader hears the line as it is completed below
  const line = document.createElement('pre');
  line.style.whiteSpace = 'pre-wrap';
  line.style.wordBreak = 'normal';  // whole words
  const heading = document.createElement('span');
  heading.className = 'ansi-red-fg ansi-bold';
  heading.textContent = '\\u2717 Not checked:';
  const said = document.createTextNode('');
  line.append(heading, said);
  const what = ' your answer cell' + (one ? '' : 's') + ' (' +
    listed([...edited.keys()].map((count) => 'In [' + count + ']')) + ') changed since ' + (one ? 'it' : 'they') +
    ' ran: run ' + (one ? 'it' : 'them') + ' (Shift+Enter), then this check.';
  const judged = 'It judged ' + listed(names) + ' as ' + (one ? 'that cell' : 'those cells') + ' left ' +
    (names.length > 1 ? 'them' : 'it');
  said.data = what + ' ' + judged + ', not as ' + (one ? 'it reads' : 'they read') + ' now.';
  box.appendChild(line);
  element.appendChild(box);

  // Once the check has run, its verdict is on the answers that ran: its ✓ lines go, its ✗ lines are marked.
  const verdict = () => {
    let passed = false, failed = false;
    for (const output of cell.querySelectorAll('.jp-OutputArea-output')) {
      if (output.contains(element)) continue;
      const kind = output.getAttribute('data-mime-type') || '';
      if (kind === 'application/vnd.jupyter.stdout') {
        const walker = document.createTreeWalker(output, NodeFilter.SHOW_TEXT);
        for (let text = walker.nextNode(); text; text = walker.nextNode()) {
          const kept = text.data.replace(/^\\u2713[^\\n]*\\n?/gm, '');
          if (kept !== text.data) {
            text.data = kept;
            passed = true;
          }
        }
        const area = output.closest('.jp-OutputArea-child');
        if (!output.textContent.trim() && area) area.style.display = 'none';
      } else if (kind === 'application/vnd.jupyter.stderr') {
        failed = true;
        output.style.borderLeft = '3px solid currentColor';
        output.style.paddingLeft = '8px';
      }
    }
    if (failed) {
      said.data = what + ' ' + judged + ': what it found follows, about that run, not your edit.';
    } else if (passed) {
      said.data = what + ' ' + judged + ', and ' + (names.length > 1 ? 'they' : 'it') +
        ' passed; your edit is not checked.';
    }
  };
  const prompt = cell.querySelector('.jp-InputPrompt');
  const whenRun = () => {
    if (!element.isConnected) return;  // the check ran again: these outputs are gone
    if (prompt && prompt.textContent.includes('[*]')) return setTimeout(whenRun, 200);
    setTimeout(verdict, 50);  // the check's last outputs are drawn as its run ends
  };
  whenRun();
"""


def show_edited_since_run(runs: AnswerRuns, names) -> None:
    """Show the script that says a check judged answers whose cell is edited since it ran, and takes its verdict
    off them (see the module's docstring); nothing outside a kernel JupyterLab started for a notebook."""
    answers = [[name, runs.last_run[name].execution_count] for name in names
               if name in runs.last_run and runs.last_run[name].execution_count]
    if answers:
        page_script.show(MARK_EDITED, answers=answers)
