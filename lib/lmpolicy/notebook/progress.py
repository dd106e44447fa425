"""The student's local record of their exercises, and the tables that read it.

A visible check that runs in the student's kernel records its outcome here (``lmpolicy.notebook.checks``
does the recording): passed, with the code of the answer cells it passed on, or failing with its
one-line reason. The record is a small JSON file at ``$LMPOLICY_PROGRESS_FILE`` or
``~/.lmpolicy/notebook/progress.json``:

    {"version": 2,
     "done": {"ex11_1a": "2026-11-30T15:02:11+00:00", ...},
     "checks": {"ex11_1a": {"3f9c...": {"state": "passed", "at": "...", "reason": null,
                                        "answer": {"<answer cell id>": "<fingerprint>"}}}}}

``checks`` holds one entry per visible check cell of an exercise, keyed by the fingerprint of the
check cell's code (the check cells are locked, so the fingerprint names the cell). ``done`` lists
the exercises whose every recorded check passed, with the time they first did; it is what version 1
of the format held, and a version 1 file is read as such.

A pass belongs to the answer that passed. The tables compare the answer cells a check passed on
with the student's notebook as last saved: an answer saved since with other code shows "changed
since its check passed: run the check", as does one run again in the kernel with other code
(``record_answer_run``). Written answers are not recorded: the tables read them from the saved
notebooks too, and one counts when its cell holds text other than the release's placeholder.

The chapter's exercises (``EXERCISES``, ``exercise(key)``) are not written here: ``lmpolicy.notebook.catalogue``
reads them from the notebooks (keys from the grade ids, points from the cells, titles from each
notebook's first cell), and ``chapter()`` says which notebooks.
"""
from __future__ import annotations

import datetime
import hashlib
import html
import json
import os
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from lmpolicy.notebook import catalogue, kernel
from lmpolicy.notebook.bindings import binds
from lmpolicy.notebook.catalogue import ASSIGNMENT, GRADE_ID_SEPARATOR, Exercise, exercise_key  # noqa: F401 (re-exported)

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
# The text nbgrader's release puts into a written-answer cell (ClearSolutions.text_stub).
WRITTEN_PLACEHOLDER = "YOUR ANSWER HERE"


# --- where the notebooks are, and the chapter's exercises as they state them ------------------------

def course_root() -> Path:
    """The course folder (the one with ``release/``), from where this package is installed (``pip -e``)."""
    return Path(__file__).resolve().parents[3]


def release_dir() -> Path:
    return course_root() / "release" / ASSIGNMENT


def working_copy() -> Path:
    """The student's copy of the assignment: ``$LMPOLICY_WORK_DIR`` if set; else ``work/ch11`` in the
    course folder (``make lab`` makes it once from ``release/ch11``) or, failing that, ``~/ch11`` (where
    nbgrader's Fetch puts it on a JupyterHub), whichever exists; else ``work/ch11``."""
    configured = os.environ.get("LMPOLICY_WORK_DIR")
    if configured:
        return Path(configured)
    candidates = [course_root() / "work" / ASSIGNMENT, Path.home() / ASSIGNMENT]
    return next((path for path in candidates if path.is_dir()), candidates[0])


NOTEBOOK_FILES = "[0-9][0-9]_*.ipynb"


def catalogue_folder() -> Path | None:
    """Where the chapter's exercises are read: the course's source notebooks where the course folder
    has them (instructors, ``make lab``), else its release, else the student's copy (a JupyterHub's
    student image holds neither); None when no folder holds them (a grading sandbox)."""
    for folder in (course_root() / "source" / ASSIGNMENT, release_dir(), working_copy()):
        if any(folder.glob(NOTEBOOK_FILES)):
            return folder
    return None


_CHAPTER: dict[tuple, catalogue.Chapter] = {}


def chapter() -> catalogue.Chapter:
    """The chapter's exercises (``lmpolicy.notebook.catalogue.Chapter``), read again when one of its notebooks changes."""
    folder = catalogue_folder()
    if folder is None:
        return catalogue.Chapter(Path(), (), ())
    stamp = (str(folder), tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob(NOTEBOOK_FILES))))
    if stamp not in _CHAPTER:
        _CHAPTER.clear()
        _CHAPTER[stamp] = catalogue.Chapter.read(folder)
    return _CHAPTER[stamp]


def __getattr__(name: str):
    """``EXERCISES`` (every exercise, notebook by notebook), ``EXERCISES_BY_KEY`` and ``NOTEBOOKS``: read
    from the notebooks when first asked for (PEP 562), so importing this module reads nothing."""
    if name == "EXERCISES":
        return chapter().exercises
    if name == "EXERCISES_BY_KEY":
        return chapter().by_key()
    if name == "NOTEBOOKS":
        return chapter().notebooks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def exercise(key: str) -> Exercise:
    """The exercise with this key; a clear error for a key no notebook has.

    Where no notebook can be read (a grading sandbox shows the kernel its own notebook only), any key of
    a known form is accepted, with its label and no title: a check must never fail for that.
    """
    known = chapter()
    found = known.by_key().get(key)
    if found is not None:
        return found
    if not known.notebooks:
        catalogue.label(key)  # ValueError for a key of no known form
        return Exercise(key, "", "")
    raise KeyError(f"unknown exercise key {key!r}: no grade_id in the notebooks of {known.folder} starts with "
                   f"'{key}{GRADE_ID_SEPARATOR}'")


def fingerprint(source: str) -> str:
    """A short hash of a cell's code that ignores trailing blanks (what the kernel ran vs what is saved)."""
    normalised = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()[:16]


# --- the record on disk ---------------------------------------------------------------------------

class ProgressFileCorrupt(UserWarning):
    """The progress file could not be read; it was moved aside, not deleted."""


def progress_file() -> Path:
    """Where the record lives: ``$LMPOLICY_PROGRESS_FILE`` or ``~/.lmpolicy/notebook/progress.json``."""
    configured = os.environ.get("LMPOLICY_PROGRESS_FILE")
    return Path(configured) if configured else Path.home() / ".lmpolicy" / "progress.json"


PASSED, FAILING, CHANGED = "passed", "failing", "changed"
UNKNOWN_CHECK = "-"  # a check recorded outside a notebook kernel, whose cell is not known
CHANGED_STATUS = "changed since its check passed: run the check"
# The saved notebook holds another answer than the one that passed: changed and saved, or passed and not saved yet.
SAVED_OTHER_STATUS = CHANGED_STATUS + " (or, if you have not changed it, save the notebook)"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _validated(data) -> dict:
    """The record as version 2, or ValueError naming what is wrong with it."""
    if not isinstance(data, dict):
        raise ValueError("the file does not hold a JSON object")
    version = data.get("version", 1)
    if version not in READABLE_VERSIONS:
        raise ValueError(f"format version {version!r} is not one this lmpolicy reads {READABLE_VERSIONS}")
    done = data["done"]
    if not isinstance(done, dict) or not all(isinstance(v, str) for v in done.values()):
        raise ValueError("'done' is not a mapping of exercise keys to times")
    if version == 1:  # every exercise done then passed a check whose cell was not recorded
        checks = {key: {UNKNOWN_CHECK: {"state": PASSED, "at": when}} for key, when in done.items()}
    else:
        checks = data["checks"]
        if not isinstance(checks, dict) or not all(
                isinstance(runs, dict) and all(isinstance(run, dict) and run.get("state") in (PASSED, FAILING, CHANGED)
                                               for run in runs.values())
                for runs in checks.values()):
            raise ValueError("'checks' is not a mapping of exercise keys to check records")
    return {"version": FORMAT_VERSION, "done": dict(done), "checks": checks}


def load_record() -> dict:
    """The whole record, as version 2 (``{"version", "done", "checks"}``); empty if there is no file yet.

    A file that cannot be read is moved aside (``progress.json.corrupt-<time>``) with a warning
    naming both paths, so nothing is silently lost.
    """
    path = progress_file()
    if not path.exists():
        return {"version": FORMAT_VERSION, "done": {}, "checks": {}}
    try:
        return _validated(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        aside = path.with_name(f"{path.name}.corrupt-{stamp}")
        os.replace(path, aside)
        warnings.warn(
            f"your progress file {path} could not be read ({error}); it was moved to {aside} "
            "and a fresh record starts now",
            ProgressFileCorrupt,
            stacklevel=2,
        )
        return {"version": FORMAT_VERSION, "done": {}, "checks": {}}


def load() -> dict[str, str]:
    """Exercises whose every recorded check passed: ``{key: when first done}`` (whatever the saved answers)."""
    return load_record()["done"]


def _write_atomically(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=1, sort_keys=True)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


LOCK_TIMEOUT = 10  # seconds; two kernels (two open notebooks) may record at the same moment


def _update(key: str, change) -> None:
    """Apply ``change(runs of key)`` to the record, re-derive ``done[key]``, write atomically.

    Read, change and write happen under a file lock, so two kernels recording at once both count.
    ``change`` returns False to leave the file as it is.
    """
    from filelock import FileLock  # only what writes the record needs it

    exercise(key)
    path = progress_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_name(path.name + ".lock")), timeout=LOCK_TIMEOUT):
        data = load_record()
        runs = data["checks"].setdefault(key, {})
        if change(runs) is False:
            return
        if runs and all(run["state"] == PASSED for run in runs.values()):
            data["done"].setdefault(key, _now())
        else:
            data["done"].pop(key, None)
        _write_atomically(path, data)


def record(key: str, check: str = UNKNOWN_CHECK, answer: dict[str, str] | None = None) -> None:
    """A visible check of exercise ``key`` passed (``check``: its cell's fingerprint; ``answer``: the
    fingerprints of the answer cells it ran on, by cell id). Keeps the time the exercise was first done.

    In a notebook kernel, an answer cell of ``key`` missing from ``answer`` (it ran before the kernel
    imported ``lmpolicy.notebook.checks``, whose recorder sees cells from then on) is taken from the kernel's
    history (``answers_from_history``).
    """
    if answer is not None:
        answer = {**answers_from_history(key, exclude=set(answer), check=check), **answer}

    def passed(runs):
        runs[check] = {"state": PASSED, "at": _now(), "reason": None, "answer": dict(answer or {})}
        if check != UNKNOWN_CHECK:  # a pass from a known cell supersedes one from an unknown cell
            runs.pop(UNKNOWN_CHECK, None)
    _update(key, passed)


def _failing(runs: dict, check: str, reason: str) -> None:
    runs[check] = {"state": FAILING, "at": _now(), "reason": reason.strip().splitlines()[0][:300] if reason.strip() else ""}
    if check != UNKNOWN_CHECK:
        runs.pop(UNKNOWN_CHECK, None)


def record_failure(key: str, reason: str, check: str = UNKNOWN_CHECK) -> None:
    """A visible check of exercise ``key`` failed, for ``reason`` (one line, in the check's words): the exercise
    is not done."""
    _update(key, lambda runs: _failing(runs, check, reason))


def record_unjudged(key: str, reason: str, check: str = UNKNOWN_CHECK) -> None:
    """A visible check of exercise ``key`` could not reach the answer, for ``reason`` (a name it calls is not
    defined in this kernel: after a restart, or run before its answer cell). It judged nothing, so a pass it
    recorded stays (the tables still compare it with the saved answer); else it is recorded failing."""
    def unjudged(runs):
        if runs.get(check, {}).get("state") == PASSED:
            return False
        _failing(runs, check, reason)
    _update(key, unjudged)


def record_answer_run(key: str, cell_id: str, answer_fingerprint: str) -> None:
    """An answer cell of ``key`` ran: every check that passed on other code for it is now "changed"."""
    if not any(run["state"] == PASSED and cell_id in run.get("answer", {})
               for run in load_record()["checks"].get(key, {}).values()):
        return  # the usual case, without taking the lock: no passed check ran on this cell

    def changed(runs):
        stale = [check for check, run in runs.items() if run["state"] == PASSED
                 and run.get("answer", {}).get(cell_id, answer_fingerprint) != answer_fingerprint]
        for check in stale:
            runs[check] = {**runs[check], "state": CHANGED, "at": _now(), "reason": CHANGED_STATUS}
        return bool(stale)
    _update(key, changed)


def answers_from_history(key: str, exclude: set[str] = frozenset(), check: str = UNKNOWN_CHECK) -> dict[str, str]:
    """``{cell id: fingerprint}`` of the answer cells of ``key`` as this kernel last ran them, read from
    its input history: for each answer cell of the kernel's notebook (but those in ``exclude``), the last
    code run before the check (fingerprint ``check``) that binds a name the cell binds. Empty outside a
    notebook kernel; a cell whose names no code in the history binds is left out (its pass cannot be
    compared with the saved answer, and shows as passed)."""
    shell, path = kernel.shell(), kernel.notebook_path()
    if shell is None or path is None:
        return {}
    history = [source for source in getattr(shell.history_manager, "input_hist_raw", [])
               if source.strip() and fingerprint(source) != check]
    answers = {}
    for cell in notebook_cells(path):
        if getattr(cell, "id", None) in exclude or answer_cells_of([cell]).get(getattr(cell, "id", None)) != key:
            continue
        names = binds([cell.source])
        ran = next((source for source in reversed(history) if names & binds([source])), None)
        if names and ran is not None:
            answers[cell.id] = fingerprint(ran)
    return answers


# --- the notebooks: what is graded in the student's copy -----------------------------------------

@dataclass(frozen=True)
class GradedItem:
    """One nbgrader grade cell: a visible check (autograded) or a written answer (graded by hand)."""
    exercise: Exercise
    grade_id: str
    written: bool     # a written answer (markdown) rather than a check cell
    points: float
    source: str       # the cell as the student's copy holds it
    placeholder: str  # for a written answer: what the release put in the cell


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _read(path: Path):
    import nbformat  # only the start page and the summaries read notebooks

    return nbformat.read(path, as_version=4)


def notebook_cells(path: Path) -> list:
    return list(_read(path).cells) if path.exists() else []


def _student_cells(name: str, student_notebook: Path | None = None) -> list:
    """The cells of notebook ``name`` as the student's copy holds them (``student_notebook`` or
    ``working_copy()/name.ipynb``), else as the release has them."""
    return (notebook_cells(student_notebook or working_copy() / f"{name}.ipynb")
            or notebook_cells(release_dir() / f"{name}.ipynb"))


def graded_items(name: str, student_notebook: Path | None = None) -> list[GradedItem]:
    """The grade cells of notebook ``name``, in order, as the student's copy holds them.

    When the student's copy does not exist the release copy is read, so the list is complete even
    before the student starts.
    """
    release = {_nbgrader(c).get("grade_id"): c for c in notebook_cells(release_dir() / f"{name}.ipynb")}
    known = chapter().by_key()
    items = []
    for cell in _student_cells(name, student_notebook) or list(release.values()):
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        if not meta.get("grade") or not grade_id or exercise_key(grade_id) not in known:
            continue
        written = cell.cell_type == "markdown"
        placeholder = release.get(grade_id, {}).get("source", WRITTEN_PLACEHOLDER) if written else ""
        items.append(GradedItem(known[exercise_key(grade_id)], grade_id, written,
                                float(meta.get("points") or 0), cell.source, placeholder))
    return items


def answer_cells_of(cells) -> dict[str, str]:
    """``{cell id: exercise key}`` of the code answer cells among ``cells``."""
    return {cell.id: exercise_key(_nbgrader(cell)["grade_id"]) for cell in cells
            if cell.cell_type == "code" and _nbgrader(cell).get("solution") and _nbgrader(cell).get("grade_id")
            and getattr(cell, "id", None)}


def answer_cells(name: str, student_notebook: Path | None = None) -> dict[str, str]:
    """``{cell id: exercise key}`` of the code answer cells of notebook ``name``."""
    return answer_cells_of(_student_cells(name, student_notebook))


def is_written(source: str, placeholder: str = WRITTEN_PLACEHOLDER) -> bool:
    """A written answer counts when its cell holds text other than what the release put there."""
    text = fingerprint(source)
    return bool(source.strip()) and text not in (fingerprint(placeholder), fingerprint(WRITTEN_PLACEHOLDER))


# --- states -----------------------------------------------------------------------------------------

PASSED_STATUS, NOT_ATTEMPTED, STILL_EMPTY = "passed", "not attempted", "still empty"
WRITTEN_STATUS = "written (graded by hand)"  # a written answer is never done here: the instructor grades it
NO_REASON = "failing (no reason recorded)"


@dataclass(frozen=True)
class ItemState:
    item: GradedItem
    done: bool    # a visible check that passed on the answer as saved
    status: str   # PASSED_STATUS; a failed check's own words; CHANGED_STATUS...; NOT_ATTEMPTED; WRITTEN_STATUS; STILL_EMPTY

    @property
    def part(self) -> str:
        return "written answer" if self.item.written else "visible check"

    @property
    def written_in(self) -> bool:
        """A written answer in its cell, waiting for the instructor: nothing left for the student to do."""
        return self.item.written and self.status == WRITTEN_STATUS

    @property
    def settled(self) -> bool:
        return self.done or self.written_in

    @property
    def mark(self) -> str:
        """✓ passed, ✎ written (graded by hand), · not started, ✗ failing or changed since it passed."""
        if self.done:
            return "\u2713"
        if self.written_in:
            return "\u270e"
        return "\u00b7" if self.status in (NOT_ATTEMPTED, STILL_EMPTY) else "\u2717"


def _check_state(item: GradedItem, runs: dict, saved: dict[str, str]) -> tuple[bool, str]:
    """The state of a check cell from its recorded runs; ``saved``: the fingerprints of the code cells of
    the student's notebook as last saved, by cell id."""
    run = runs.get(fingerprint(item.source))
    if run is None and set(runs) == {UNKNOWN_CHECK}:
        run = runs[UNKNOWN_CHECK]  # recorded where the check's cell was not known (format 1, scripts)
    if run is None:
        return False, NOT_ATTEMPTED
    if run["state"] == PASSED:
        passed_on = run.get("answer") or {}
        if any(saved.get(cell) != code for cell, code in passed_on.items()):
            return False, SAVED_OTHER_STATUS  # the saved answer is not the one that passed
        return True, PASSED_STATUS
    if run["state"] == CHANGED:
        return False, CHANGED_STATUS
    return False, run.get("reason") or NO_REASON  # the check's own words: "Check failed: ...", "Not defined yet: ..."


def item_states(name: str, record_data: dict | None = None, student_notebook: Path | None = None) -> list[ItemState]:
    """Every graded item of notebook ``name`` with its state, from the record and the student's saved copy."""
    data = record_data if record_data is not None else load_record()
    saved = {cell.id: fingerprint(cell.source) for cell in _student_cells(name, student_notebook)
             if cell.cell_type == "code" and getattr(cell, "id", None)}
    states = []
    for item in graded_items(name, student_notebook):
        if item.written:
            states.append(ItemState(item, False, WRITTEN_STATUS if is_written(item.source, item.placeholder)
                                    else STILL_EMPTY))
        else:
            states.append(ItemState(item, *_check_state(item, data["checks"].get(item.exercise.key, {}), saved)))
    return states


def item_label(state: ItemState, states: list[ItemState]) -> str:
    """The exercise's label, with the cell's name when the exercise has several items of this kind."""
    same = [s for s in states if s.item.exercise == state.item.exercise and s.item.written == state.item.written]
    if len(same) == 1:
        return state.item.exercise.label
    cell_name = state.item.grade_id.split(GRADE_ID_SEPARATOR, 1)[-1].removesuffix("_tests").removesuffix("_manual")
    return f"{state.item.exercise.label} ({cell_name})"


def _points(value: float) -> str:
    return f"{value:g}"


_CODE, _AS_CODE = re.compile(r"`([^`]+)`"), r"<code>\1</code>"


def as_html(text) -> str:
    """A table cell's text as HTML: escaped, its `code` shown as code."""
    return _CODE.sub(_AS_CODE, html.escape(str(text)))


class ProgressTable(list):
    """Rows ``(exercise, what, part, points, status)`` with a total row per notebook and one for the
    course; shows as an HTML table in Jupyter and as aligned text when printed."""

    HEADER = ("exercise", "what", "part", "points", "status")

    def __init__(self, rows, source: Path):
        super().__init__(rows)
        self.source = source  # where the written answers were read

    def _repr_html_(self) -> str:
        # JupyterLab right-aligns output tables; words read better left-aligned (inline: the
        # output sanitizer drops <style> elements). A title's `code` shows as code.
        def row(cells, tag="td", style=""):
            scope = ' scope="col"' if tag == "th" else ""  # a screen reader names each cell by its column
            return f"<tr{style}>" + "".join(f'<{tag}{scope} style="text-align:left">'
                                            f'{as_html(c)}</{tag}>'
                                            for c in cells) + "</tr>"

        body = "".join(row(r, style=' style="font-weight:bold"' if r[0].startswith(("notebook", "course")) else "")
                       for r in self)
        note = f"<p>Written answers and code answers as last saved in <code>{html.escape(str(self.source))}</code>.</p>"
        caption = '<caption style="text-align:left">Every graded item, with its state</caption>'
        return f"<table>{caption}{row(self.HEADER, 'th')}{body}</table>{note}"

    def __str__(self) -> str:
        rows = [self.HEADER, *self]
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(self.HEADER))]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        return "\n".join(lines + [f"(answers as last saved in {self.source})"])


@dataclass(frozen=True)
class Count:
    """How far a list of items is: the items done, of all, and the written answers in (graded by hand); the points
    of the checks passed, of all the points."""
    done: int
    of: int
    written: int
    points: str

    @classmethod
    def of_states(cls, states: list[ItemState]) -> Count:
        done = [s for s in states if s.done]
        return cls(len(done), len(states), sum(s.written_in for s in states),
                   f"{_points(sum(s.item.points for s in done))} of {_points(sum(s.item.points for s in states))}")

    def items(self, short: bool = False) -> str:
        """"3 of 7 items done, 1 written (graded by hand)"; ``short``: "3 of 7, 1 written"."""
        if short:
            return f"{self.done} of {self.of}" + (f", {self.written} written" if self.written else "")
        return f"{self.done} of {self.of} items done" + (f", {self.written} {WRITTEN_STATUS}" if self.written else "")


def _total(label: str, states: list[ItemState]) -> tuple:
    count = Count.of_states(states)
    return (label, "", count.items(), count.points, "")


def table() -> ProgressTable:
    """Every graded item of the chapter's notebooks with its state; a total per notebook and for the course."""
    data = load_record()
    rows, everything = [], []
    for name in chapter().notebooks:
        states = item_states(name, data)
        for state in states:
            rows.append((item_label(state, states), state.item.exercise.title, state.part,
                         _points(state.item.points), state.status))
        rows.append(_total(f"notebook {name}", states))
        everything += states
    rows.append(_total("course total", everything))
    return ProgressTable(rows, working_copy())


def notebook_summary(name: str, student_notebook: Path | None = None) -> str:
    """What is left to do in notebook ``name``, one line per graded item, for the notebook's last cell."""
    states = item_states(name, student_notebook=student_notebook)
    if not states:
        raise ValueError(f"no graded cells found for notebook {name!r}: the notebooks are "
                         f"{', '.join(chapter().notebooks)}")
    lines = []
    width = max(len(item_label(s, states)) + len(s.part) + 1 for s in states)
    for state in states:
        lines.append(f"{state.mark} {(item_label(state, states) + ' ' + state.part).ljust(width)}  {state.status}")
    count = Count.of_states(states)
    header = f"{name}: {count.items()} ({count.points} points)"
    footer = "(checks as they last ran, on your answers as last saved: save the notebook (Ctrl+S) first)"
    return "\n".join([header, *lines, footer])
