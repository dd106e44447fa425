"""What nbgrader's Validate says to a student: each failing check as its ✗ lines, under its exercise's name,
and first each construct the grader's code rule would refuse (``lmpolicy.notebook.code_rule``: ``%matplotlib inline``,
``import os``, a cell that does not parse...), one ✗ line each, with what to do.

Stock nbgrader 0.9.6 reports a failing graded cell as the cell's whole source followed by its error:
for this course's check cells that is 40-65 lines of test code before the one-line verdict. Its
``Validator`` has traits for the wording of the summary (``failed_warning``...), the indent and the
width, but none for what stands for a cell, and both of its users build the class by name (the
``nbgrader validate`` command in ``nbgrader.apps.validateapp``, the Validate button's handler in
``nbgrader.server_extensions.validate_assignment.handlers``). So the course's ``nbgrader_config.py``,
which both load before they build it, calls ``use_in_nbgrader()``; from then on they build a
``VerdictValidator``, which reports each failing cell as

- ``source``: its exercise's name and the kind of cell, e.g. "Exercise 01.softmax, the check cell"
  (the dialog shows this where nbgrader shows the source);
- ``raw_error`` / ``error``: the verdict only. A failed check already renders as its few ✗ lines
  (``lmpolicy.notebook.checks.CheckFailed._render_traceback_``); any other error is cut to one line,
  "✗ TypeError: ...", and a NameError says which cell should have defined the name.

A locked cell the student changed is named the same way instead of being printed whole.

The Validate button's handler runs the whole notebook inside the Jupyter server's one thread: for the 26 s
notebook 08 takes, the student's whole JupyterLab hangs (no output, no save, not even its fonts load). In the
student's server (``jupyter-config/student`` enables this module as a server extension) the handler runs the
same validation in a subprocess (``python -m lmpolicy.notebook.validator ROOT PATH``, nbgrader's own
``validate_notebook`` there) and waits for it without holding the server; nbgrader's process-wide changes while
it validates (its working folder, ``NBGRADER_EXECUTION``, which a kernel started meanwhile would inherit) stay
in that subprocess.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from types import SimpleNamespace

import nbformat
from nbconvert.filters import ansi2html
from nbgrader import utils
from nbgrader.validator import Validator

from lmpolicy.notebook import catalogue, code_rule, validation_progress
from lmpolicy.notebook.verdict_lines import strip_ansi, wrap

MARK = "\u2717"  # how every verdict line of lmpolicy.notebook.checks begins
KERNEL_NEVER_STARTED = "Kernel died before replying to kernel_info"  # jupyter_client's words
# the modules of nbgrader that build a Validator by name (its command line, its Validate button's handler)
NBGRADER_USERS = ("nbgrader.apps.validateapp", "nbgrader.server_extensions.validate_assignment.handlers")


def cell_name(cell, notebook, with_title: bool = True) -> str:
    """"Exercise 01.softmax, the check cell": the exercise the cell belongs to (with its title when the
    notebook gives one and ``with_title``) and what kind of cell it is."""
    grade_id = (cell.metadata.get("nbgrader") or {}).get("grade_id", "")
    key = catalogue.exercise_key(grade_id)
    try:
        name = catalogue.label(key)
    except ValueError:  # a cell of no exercise: its grade id is all there is to name it by
        name = f"the cell {grade_id!r}" if grade_id else "a cell"
    title = catalogue.titles(notebook).get(key) if with_title else None
    if title:
        name += f" ({title})"
    if utils.is_solution(cell):
        kind = "the written answer" if cell.cell_type == "markdown" else "the answer cell"
    elif utils.is_grade(cell):
        kind = "the check cell"
    else:
        kind = "a cell you may not edit"
    return f"{name}, {kind}"


def _error_verdict(output, notebook, cell_index: int) -> list[str]:
    """The ✗ lines of one error output (ANSI colours kept)."""
    lines = [line for entry in output.get("traceback", []) for line in entry.split("\n")]
    marked = [i for i, line in enumerate(lines) if strip_ansi(line).lstrip().startswith(MARK)]
    if marked:  # a failed check, or a NameError explained by lmpolicy.notebook.checks: from its first ✗ line on
        return [line for line in lines[marked[0]:] if line.strip()]
    text = (output.get("evalue") or "").strip().splitlines()
    verdict = f"{MARK} {output.get('ename', 'Error')}" + (f": {text[0]}" if text else "")
    if output.get("ename") == "NameError":
        name = re.search(r"name '([^']+)' is not defined", output.get("evalue", ""))
        if name:
            verdict += f": {_undefined_name_advice(name.group(1), notebook, cell_index)}"
    return [verdict]


def _undefined_name_advice(name: str, notebook, cell_index: int) -> str:
    """Validate runs every cell from the top, so a name a cell lacks was never defined above it: the
    cell meant to define it raised first, or nothing defines it (renamed, misspelt)."""
    from lmpolicy.notebook import checks  # imports IPython; only a NameError needs it

    from lmpolicy.notebook.name_advice import renamed_advice

    above = [cell for cell in notebook.cells[:cell_index] if cell.cell_type == "code"]
    renamed = renamed_advice(name, checks.binds([cell.source for cell in above]))
    if renamed is not None:
        return renamed
    for cell in reversed(above):
        if name in checks.binds([cell.source]):
            raised = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if raised:
                return (f"the cell above that defines {name} raised {raised[0].get('ename', 'an error')} "
                        "before it got there (its error is in its output)")
            return f"a cell above defines {name} only in a branch or loop that did not run"
    return f"no cell above this one defines {name}: keep the name and arguments the notebook gives it"


def verdict(cell, notebook) -> str:
    """Why a graded cell failed, as the lines a student acts on (ANSI colours kept)."""
    index = next((i for i, c in enumerate(notebook.cells) if c is cell), len(notebook.cells))
    lines = []
    if cell.cell_type == "code":
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                lines += _error_verdict(output, notebook, index)
    return "\n".join(lines) if lines else ""




def saved_variant_mismatch(notebook) -> str | None:
    """The ✗ line for a notebook whose saved parameter cells show numbers other than this student's (the notebook
    was worked on under another id, or none); None when each shown variant is the one the id here gives."""
    from lmpolicy.per_student import variants

    for cell in notebook.cells:
        grade_id = (cell.metadata.get("nbgrader") or {}).get("grade_id", "")
        key = grade_id.removesuffix(catalogue.PARAMETERS_CELL)
        if cell.cell_type != "code" or not grade_id.endswith(catalogue.PARAMETERS_CELL) or key not in variants.VARYING:
            continue
        shown = [out.get("data", {}).get("text/markdown") or out.get("data", {}).get("text/plain") or out.get("text", "")
                 for out in cell.get("outputs", [])]  # variants.show displays markdown; its text/plain is a repr
        shown = [text if isinstance(text, str) else "".join(text) for text in shown]
        if shown and variants.describe(key) not in shown:
            saved_id = re.search(r"student id `([^`]+)`", " ".join(shown))
            whose = f"student id {saved_id.group(1)!r}" if saved_id else "the chapter (no student id)"
            now = variants.student_id()
            return (f"{MARK} The numbers saved in this notebook belong to {whose}, but here "
                    + (f"your id is {now!r}" if now else "no student id is set (the chapter's numbers)")
                    + ", and the grader uses the id of the folder you hand in from. Run the notebook again from the "
                    "top and redo the numeric exercises with the parameters it then shows.")
    return None


CODE_RULE = "Plain Python the grader can check"  # what stands for the cell of a construct outside the code rule


def code_rule_failures(notebook) -> list[dict]:
    """Every construct of ``notebook`` (as saved) outside the grader's code rule (``lmpolicy.notebook.code_rule``), each as
    one failure of one ✗ line: the cell (its place, the exercise it answers or is below), the line, the code, and
    what to do. Validate runs the notebook, which runs such code fine; grading would give every exercise checked
    below it no credit."""
    return [{"source": CODE_RULE, "raw_error": f"{MARK} {outside.student_line()}"}
            for outside in code_rule.notebook_outside(notebook)]


class VerdictValidator(Validator):
    """nbgrader's Validator, reporting each failing cell by its exercise's name and its verdict; first of all,
    numbers saved for a student other than the one this id gives."""

    def validate(self, filename: str):
        self._notebook, self._reported = None, {}
        handed_in = nbformat.read(filename, as_version=nbformat.NO_CONVERT)
        mismatch = saved_variant_mismatch(handed_in)
        outside = code_rule_failures(handed_in)
        try:
            results = super().validate(filename)
        except RuntimeError as error:
            if KERNEL_NEVER_STARTED not in str(error):
                raise
            # jupyter_client chooses the kernel's ports before the kernel binds them, and another kernel starting at
            # that moment can take one ("Address already in use"): the kernel dies before any cell ran, so run again
            self.log.warning("the kernel died as it started (%s); validating again in a new one", error)
            self._notebook, self._reported = None, {}
            results = super().validate(filename)
        for kind in ("failed", "changed"):  # in the order nbgrader listed the cells
            for entry, cell in zip(results.get(kind, []), self._reported.get(kind, [])):
                entry["source"] = cell_name(cell, self._notebook)
        if outside and not self.invert and "type_changed" not in results:
            results["failed"] = outside + results.get("failed", [])
        if mismatch and not self.invert and "type_changed" not in results:
            results.setdefault("failed", []).insert(0, {"source": "Your own numbers", "raw_error": mismatch})
        for entry in results.get("failed", []):  # the dialog shows "error" as it is: wrapped to fit it
            entry["error"] = ansi2html(wrap(entry["raw_error"]))
        return results

    def _get_changed_cells(self, nb):
        self._notebook = nb  # the notebook as it ran: every cell with its outputs
        self._reported["changed"] = super()._get_changed_cells(nb)
        return self._reported["changed"]

    def _get_failed_cells(self, nb):
        self._reported["failed"] = super()._get_failed_cells(nb)
        return self._reported["failed"]

    def _extract_error(self, cell) -> str:
        found = verdict(cell, self._notebook) if self._notebook is not None else ""
        return found or super()._extract_error(cell)

    def _print_error(self, source: str, error: str) -> None:
        self.stream.write("\n" + "=" * self.width + "\n")
        self.stream.write(f"{source}:\n")
        self.stream.write(wrap(strip_ansi(error), self.width, self.indent) + "\n")

    def _print_changed(self, source: str) -> None:
        self.stream.write("\n" + "=" * self.width + "\n")
        self.stream.write(f"{source} has changed: grading puts its released version back\n")


VALIDATE_HANDLERS = "nbgrader.server_extensions.validate_assignment.handlers"
ANSWER_LIMIT = 64 * 2**20  # the subprocess's answer is one line of JSON: every failing cell's verdict


async def _validate_in_a_subprocess(handler) -> None:
    """The Validate button's POST: nbgrader's validation in a subprocess, the server free meanwhile."""
    from tornado import web

    try:
        path = handler.get_argument("path")
    except web.MissingArgumentError:
        path = handler.get_json_body()["path"]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lmpolicy.notebook.validator", handler.settings["root_dir"], path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, limit=ANSWER_LIMIT)
    running = validation_progress.RUNNING[path] = validation_progress.Validation(path)
    try:
        printed, logged = await asyncio.gather(_lines_besides_progress(process.stdout, running), process.stderr.read())
        await process.wait()
    finally:
        if validation_progress.RUNNING.get(path) is running:
            del validation_progress.RUNNING[path]
    try:
        output = json.loads(printed[-1])
    except (ValueError, IndexError):
        output = {"success": False, "value": logged.decode(errors="replace")[-4000:]
                  or f"validation ended with exit code {process.returncode}"}
    handler.finish(json.dumps(output))


async def _lines_besides_progress(stream, running) -> list[str]:
    """The lines of the validation's stdout, each progress line read into ``running`` as it comes instead."""
    lines = []
    while line := (await stream.readline()).decode(errors="replace"):
        if not running.read(line) and line.strip():
            lines.append(line.strip())
    return lines


def validate_in_this_process(root_dir: str, path: str, report_progress: bool = False) -> dict:
    """What the Validate button's handler answers for ``path`` (relative to ``root_dir``): nbgrader's own
    ``validate_notebook``, its config loaded as the handler loads it, with a ``VerdictValidator``; with
    ``report_progress``, a progress line on stdout as each code cell starts (``validation_progress``)."""
    import importlib

    handlers = importlib.import_module(VALIDATE_HANDLERS)
    use_in_nbgrader()
    handler = SimpleNamespace(root_dir=root_dir, log=logging.getLogger("nbgrader.validate"))

    def load_config():
        config = handlers.ValidateAssignmentHandler.load_config(handler)
        if report_progress:
            validation_progress.report_to(config, lambda cell, notebook: cell_name(cell, notebook, with_title=False))
        return config

    handler.load_config = load_config
    return handlers.ValidateAssignmentHandler.validate_notebook(handler, path)


def _jupyter_server_extension_points():
    return [{"module": "lmpolicy.notebook.validator"}]


def _load_jupyter_server_extension(serverapp) -> None:
    """The student's server: the Validate button validates in a subprocess (see the module's docstring)."""
    import importlib

    from jupyter_server.utils import url_path_join
    from tornado import web

    handler_class = importlib.import_module(VALIDATE_HANDLERS).ValidateAssignmentHandler
    handler_class.post = web.authenticated(_validate_in_a_subprocess)
    serverapp.web_app.add_handlers(".*$", [(url_path_join(serverapp.base_url, validation_progress.URL),
                                            validation_progress.handler_class())])
    use_in_nbgrader()


def use_in_nbgrader() -> None:
    """Make nbgrader's ``validate`` command and Validate button build a ``VerdictValidator``.

    Only the modules already imported are changed: the command has imported its app, the server its
    handler, and neither imports the other's.
    """
    for name in NBGRADER_USERS:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "Validator", None) is Validator:
            module.Validator = VerdictValidator


if __name__ == "__main__":  # the Validate button's subprocess: ROOT PATH; its answer, as JSON, on the last line
    from lmpolicy.notebook import validator  # the module itself, not a second copy of it named __main__

    logging.basicConfig(level=logging.WARNING)
    print(json.dumps(validator.validate_in_this_process(sys.argv[1], sys.argv[2], report_progress=True)))
