"""What Validate is doing while it runs, for the student watching its button.

nbgrader's Validate button reads "Validating..." until the whole notebook has run from the top in a fresh
kernel: 26 s for notebook 08, with no sign of what is happening. The validation runs in a subprocess of the
student's server (``lmpolicy.notebook.validator``). Here:

- in that subprocess, ``report_to(config)`` makes nbgrader's ``Execute`` print one line as each code cell starts
  (``PREFIX`` and JSON: the cell's place among the notebook's code cells and what it is, e.g. "Exercise 11.8,
  the check cell");
- in the server, ``Validation`` reads those lines as they come and ``ProgressHandler`` answers
  ``GET /lmpolicy/validation-progress?path=...`` with where the validation of that notebook is;
- in the page, the course's lab extension (``jupyter-data/labextensions/lmpolicy-validation-progress``) asks
  while the button reads "Validating..." and shows the answer beside the button.
"""
from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

PREFIX = "LMPOLICY-VALIDATION-PROGRESS "  # a progress line of the subprocess's stdout; its answer is the last line
URL = "/lmpolicy/validation-progress"


def section_of(cell, notebook) -> str:
    """The last heading of the Markdown cells above ``cell``, or "" when there is none."""
    heading = ""
    for other in notebook.cells:
        if other is cell:
            break
        if other.cell_type == "markdown":
            found = [line.lstrip("#").strip() for line in other.source.splitlines() if line.startswith("#")]
            heading = found[-1] if found else heading
    return re.sub(r"[$`*_\\]", "", heading)  # the words, without Markdown's and LaTeX's marks


class Reporter:
    """nbclient's hooks (``on_notebook_start``, ``on_cell_execute``): a progress line on ``out`` per code cell,
    naming a graded cell by ``name_graded(cell, notebook)`` and any other by the section it is in."""

    def __init__(self, name_graded, out=sys.stdout):
        self.name_graded, self.out, self.notebook, self.code_cells = name_graded, out, None, []

    def notebook_started(self, notebook) -> None:
        self.notebook = notebook
        self.code_cells = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code" and cell.source.strip()]
        self._say(cell=0, of=len(self.code_cells), what="a fresh kernel started")

    def cell_started(self, cell, cell_index: int) -> None:
        place = self.code_cells.index(cell_index) + 1 if cell_index in self.code_cells else 0
        self._say(cell=place, of=len(self.code_cells), what=self.label(cell))

    def label(self, cell) -> str:
        from nbgrader import utils  # only in the validation's subprocess: the student library needs no nbgrader

        if utils.is_grade(cell) or utils.is_solution(cell):
            return self.name_graded(cell, self.notebook)
        section = section_of(cell, self.notebook)
        return f"in \u201c{section}\u201d" if section else ""

    def _say(self, **progress) -> None:
        self.out.write(PREFIX + json.dumps(progress) + "\n")
        self.out.flush()


def report_to(config, name_graded, out=sys.stdout) -> None:
    """Make the ``Execute`` preprocessor built from ``config`` (as nbgrader's Validator builds it) report on ``out``."""
    reporter = Reporter(name_graded, out)
    config.Execute.on_notebook_start = lambda notebook: reporter.notebook_started(notebook)
    config.Execute.on_cell_execute = lambda cell, cell_index: reporter.cell_started(cell, cell_index)


@dataclass
class Validation:
    """One validation running in the server, as its subprocess last reported it."""
    path: str
    started: float = field(default_factory=time.monotonic)
    cell: int = 0
    of: int = 0
    what: str = "starting a kernel"

    def read(self, line: str) -> bool:
        """Take in one line of the subprocess's stdout; False when it is not a progress line."""
        if not line.startswith(PREFIX):
            return False
        try:
            progress = json.loads(line[len(PREFIX):])
            self.cell, self.of, self.what = int(progress["cell"]), int(progress["of"]), str(progress["what"])
        except (ValueError, KeyError, TypeError):
            return False
        return True

    def as_reply(self) -> dict:
        reply = asdict(self)
        del reply["started"]
        return dict(reply, running=True, seconds=int(time.monotonic() - self.started))


RUNNING: dict[str, Validation] = {}  # the validations the server runs now, by notebook path


def handler_class():
    """The Tornado handler of ``URL`` (built on first use: the subprocess and the checks never need Tornado)."""
    from jupyter_server.base.handlers import APIHandler
    from tornado import web

    class ProgressHandler(APIHandler):
        @web.authenticated
        def get(self):
            running = RUNNING.get(self.get_argument("path", ""))
            self.finish(json.dumps(running.as_reply() if running else {"running": False}))

    return ProgressHandler


LABEXTENSIONS = Path(__file__).with_name("labextensions")  # the page's side, where JupyterLab looks for it (below)


def add_lab_extension(config) -> None:
    """Have JupyterLab load the course's lab extension: for a role's ``jupyter_server_config.py`` (``c``), wherever
    ``lmpolicy`` is installed (a clone's ``make lab``, a hub's image)."""
    paths = list(config.LabApp.get("extra_labextensions_path", []))
    config.LabApp.extra_labextensions_path = [*paths, str(LABEXTENSIONS)] if str(LABEXTENSIONS) not in paths else paths
