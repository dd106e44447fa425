"""The student's local record of their exercises, and the tables that read it.

A visible check that runs in the student's kernel records its outcome here (``lmpolicy.checks``
does the recording): passed, failing with its one-line reason, or "changed" when the answer it
passed on has been run again with different code. The record is a small JSON file at
``$LMPOLICY_PROGRESS_FILE`` or ``~/.lmpolicy/progress.json``:

    {"version": 2,
     "done": {"ex11_1a": "2026-11-30T15:02:11+00:00", ...},
     "checks": {"ex11_1a": {"3f9c...": {"state": "passed", "at": "...", "reason": null,
                                        "answer": {"<answer cell id>": "<fingerprint>"}}}}}

``checks`` holds one entry per visible check cell of an exercise, keyed by the fingerprint of the
check cell's code (the check cells are locked, so the fingerprint names the cell). ``done`` lists
the exercises whose every recorded check passed on its current answer, with the time they first
did; it is what version 1 of the format held, and a version 1 file is read as such.

Written answers are not recorded: ``table()`` and ``notebook_summary()`` read them from the
student's working copy of the notebooks (``working_copy()``), so a written answer counts only when
its cell holds text other than the placeholder the release put there.

``EXERCISES`` is the one list of the chapter's exercises and lab tasks, with the notebook that holds
each; the graded items of an exercise are the nbgrader grade cells of its notebook.
"""
from __future__ import annotations

import datetime
import hashlib
import html
import json
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
# The text nbgrader's release puts into a written-answer cell (ClearSolutions.text_stub).
WRITTEN_PLACEHOLDER = "YOUR ANSWER HERE"
ASSIGNMENT = "ch11"


@dataclass(frozen=True)
class Exercise:
    key: str        # prefix of every grade_id of the exercise: "ex11_1a" -> "ex11_1a__tests"
    label: str      # what a student reads: "11.1(a)"
    notebook: str   # the source notebook's name, without ".ipynb"
    title: str      # a few words on what it asks


def _exercises(notebook: str, *rows: tuple[str, str, str]) -> list[Exercise]:
    return [Exercise(key, label, notebook, title) for key, label, title in rows]


EXERCISES: tuple[Exercise, ...] = tuple(
    _exercises(
        "01_policy_softmax",
        ("nb01_softmax", "softmax", "a numerically stable softmax"),
        ("ex11_1a", "11.1(a)", "a response's probability and log-prob"),
        ("ex11_1b", "11.1(b)", "the log-prob is a sum (proof)"),
    )
    + _exercises(
        "02_temperature",
        ("task2", "Lab Task 2", "sample_with_temperature"),
        ("nb02_top_k", "top-k", "the top-k filter"),
        ("nb02_top_p", "top-p", "the top-p (nucleus) filter"),
        ("ex11_2a", "11.2(a)", "temperature as a power (proof)"),
        ("ex11_2b", "11.2(b)", "the temperature that gives the top token 0.95"),
        ("ex11_2c", "11.2(c)", "dH/dkappa = -kappa Var(z)"),
    )
    + _exercises(
        "03_three_stages",
        ("ex11_1c", "11.1(c)", "rejection-sampling fine-tuning vs REINFORCE"),
        ("nb03_four_reasons", "why RL after SFT", "the four reasons (concept)"),
    )
    + _exercises(
        "04_two_mdp_views",
        ("ex11_3a", "11.3(a)", "the bandit policy gradient"),
        ("ex11_3b", "11.3(b)", "the token-level gradient, with and without baseline"),
        ("ex11_3c", "11.3(c)", "the chain rule for KL"),
    )
    + _exercises(
        "05_tilted_optimum",
        ("task4", "Lab Task 4", "tilted_optimum and kl_objective"),
        ("task5", "Lab Task 5", "token_level_optimum"),
        ("ex11_5a", "11.5(a)", "derive the tilted optimum"),
        ("ex11_5b", "11.5(b)", "the worked example at beta = 0.5"),
        ("ex11_5c", "11.5(c)", "the limits beta -> 0 and beta -> infinity"),
        ("ex11_7a", "11.7(a)", "the power distribution as a tilted optimum"),
        ("ex11_7b", "11.7(b)", "token temperature is not sequence temperature"),
        ("ex11_7c", "11.7(c)", "the difference through soft values"),
        ("ex11_8a", "11.8(a)", "where a reward model errs"),
        ("ex11_8b", "11.8(b)", "the blind spot"),
        ("ex11_8c", "11.8(c)", "reasons for and against beta > 0"),
        ("ex11_8d", "11.8(d)", "clip and KL"),
        ("ex11_9a", "11.9(a)", "tilting demo: beta = 0.5"),
        ("ex11_9b", "11.9(b)", "tilting demo: temperature vs beta"),
        ("ex11_9c", "11.9(c)", "tilting demo: the blind spot"),
    )
    + _exercises(
        "06_kl_estimators",
        ("task3", "Lab Task 3", "kl_estimators"),
        ("ex11_4a", "11.4(a)", "k3 is non-negative"),
        ("ex11_4b", "11.4(b)", "k3 is unbiased"),
        ("ex11_4c", "11.4(c)", "k1 and k3 on a sharp policy"),
        ("ex11_4d", "11.4(d)", "k3 from 16 samples"),
        ("ex11_6a", "11.6(a)", "the gradient of the reverse KL"),
        ("ex11_6b", "11.6(b)", "KL in the reward"),
        ("ex11_6c", "11.6(c)", "KL in the loss: k1, k2, k3"),
        ("ex11_9d", "11.9(d)", "KL demo: k3 at N = 16"),
    )
    + _exercises(
        "07_logprob_plumbing",
        ("task1a", "Lab Task 1a", "response_logprobs"),
        ("task1b", "Lab Task 1b", "sequence_logprob with a mask"),
    )
    + _exercises(
        "08_tinylm_reinforce",
        ("nb08_baseline", "leave-one-out baseline", "the baseline from the other answers to the same prompt"),
        ("nb08_kl_reward", "KL in the reward", "the k1 penalty folded into each answer's reward"),
        ("nb08_pg_loss", "policy-gradient loss", "the REINFORCE loss over response tokens"),
        ("ex11_10", "11.10", "the lab's questions"),
    )
)

EXERCISES_BY_KEY: dict[str, Exercise] = {exercise.key: exercise for exercise in EXERCISES}
NOTEBOOKS: tuple[str, ...] = tuple(dict.fromkeys(exercise.notebook for exercise in EXERCISES))
GRADE_ID_SEPARATOR = "__"


def exercise_key(grade_id: str) -> str:
    """The exercise a cell belongs to, from its nbgrader grade id: ``ex11_1a__tests`` -> ``ex11_1a``.

    The one statement of the naming rule (docs/architecture.md, "Notebooks"): every grade id is the
    exercise key, two underscores, and a name. A grade id without the separator is its own key.
    """
    return grade_id.split(GRADE_ID_SEPARATOR, 1)[0]


class ProgressFileCorrupt(UserWarning):
    """The progress file could not be read; it was moved aside, not deleted."""


def progress_file() -> Path:
    """Where the record lives: ``$LMPOLICY_PROGRESS_FILE`` or ``~/.lmpolicy/progress.json``."""
    configured = os.environ.get("LMPOLICY_PROGRESS_FILE")
    return Path(configured) if configured else Path.home() / ".lmpolicy" / "progress.json"


def exercise(key: str) -> Exercise:
    """The exercise with this key; a clear error for a key that is not in ``EXERCISES``."""
    try:
        return EXERCISES_BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown exercise key {key!r}: lmpolicy.progress.EXERCISES lists the known ones") from None


def fingerprint(source: str) -> str:
    """A short hash of a cell's code that ignores trailing blanks (what the kernel ran vs what is saved)."""
    normalised = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()[:16]


# --- the record on disk ---------------------------------------------------------------------------

PASSED, FAILING, CHANGED = "passed", "failing", "changed"
UNKNOWN_CHECK = "-"  # a check recorded outside a notebook kernel, whose cell is not known


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
    """Exercises whose every recorded check passed on its current answer: ``{key: when first done}``."""
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
    """A visible check of exercise ``key`` passed (``check``: its cell's fingerprint; ``answer``:
    the fingerprints of the answer cells it ran on, by cell id). Keeps the time the exercise was first done."""
    def passed(runs):
        runs[check] = {"state": PASSED, "at": _now(), "reason": None, "answer": dict(answer or {})}
        if check != UNKNOWN_CHECK:  # a pass from a known cell supersedes one from an unknown cell
            runs.pop(UNKNOWN_CHECK, None)
    _update(key, passed)


def record_failure(key: str, reason: str, check: str = UNKNOWN_CHECK) -> None:
    """A visible check of exercise ``key`` failed, for ``reason`` (one line): the exercise is not done."""
    def failed(runs):
        runs[check] = {"state": FAILING, "at": _now(), "reason": reason.strip().splitlines()[0][:300] if reason.strip() else ""}
        if check != UNKNOWN_CHECK:
            runs.pop(UNKNOWN_CHECK, None)
    _update(key, failed)


def record_answer_run(key: str, cell_id: str, answer_fingerprint: str) -> None:
    """An answer cell of ``key`` ran: every check that passed on other code for it is now "changed"."""
    if not any(run["state"] == PASSED and cell_id in run.get("answer", {})
               for run in load_record()["checks"].get(key, {}).values()):
        return  # the usual case, without taking the lock: no passed check ran on this cell

    def changed(runs):
        stale = [check for check, run in runs.items() if run["state"] == PASSED
                 and run.get("answer", {}).get(cell_id, answer_fingerprint) != answer_fingerprint]
        for check in stale:
            runs[check] = {**runs[check], "state": CHANGED, "at": _now(),
                           "reason": "your answer changed since its check passed: run the check again"}
        return bool(stale)
    _update(key, changed)


# --- the notebooks: where the student's copy is, what is graded in it -----------------------------

def course_root() -> Path:
    """The course folder (the one with ``release/``), from where this package is installed (``pip -e``)."""
    return Path(__file__).resolve().parents[2]


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


def graded_items(name: str, student_notebook: Path | None = None) -> list[GradedItem]:
    """The grade cells of notebook ``name``, in order, as the student's copy holds them.

    The student's copy is ``student_notebook`` or ``working_copy()/name.ipynb``; when it does not
    exist the release copy is read, so the list is complete even before the student starts.
    """
    release_path = release_dir() / f"{name}.ipynb"
    student_path = student_notebook or working_copy() / f"{name}.ipynb"
    release = {_nbgrader(c).get("grade_id"): c for c in notebook_cells(release_path)}
    cells = notebook_cells(student_path) or list(release.values())
    items = []
    for cell in cells:
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        if not meta.get("grade") or not grade_id or exercise_key(grade_id) not in EXERCISES_BY_KEY:
            continue
        written = cell.cell_type == "markdown"
        placeholder = release.get(grade_id, {}).get("source", WRITTEN_PLACEHOLDER) if written else ""
        items.append(GradedItem(EXERCISES_BY_KEY[exercise_key(grade_id)], grade_id, written,
                                float(meta.get("points") or 0), cell.source, placeholder))
    return items


def answer_cells(name: str, student_notebook: Path | None = None) -> dict[str, str]:
    """``{cell id: exercise key}`` of the code answer cells of notebook ``name``."""
    path = student_notebook or working_copy() / f"{name}.ipynb"
    cells = notebook_cells(path) or notebook_cells(release_dir() / f"{name}.ipynb")
    return {cell.id: exercise_key(_nbgrader(cell)["grade_id"]) for cell in cells
            if cell.cell_type == "code" and _nbgrader(cell).get("solution") and _nbgrader(cell).get("grade_id")
            and getattr(cell, "id", None)}


def is_written(source: str, placeholder: str = WRITTEN_PLACEHOLDER) -> bool:
    """A written answer counts when its cell holds text other than what the release put there."""
    text = fingerprint(source)
    return bool(source.strip()) and text not in (fingerprint(placeholder), fingerprint(WRITTEN_PLACEHOLDER))


# --- states -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ItemState:
    item: GradedItem
    done: bool
    status: str  # "passed", "failing: <reason>", "not attempted", "answered", "still empty", ...

    @property
    def part(self) -> str:
        return "written answer" if self.item.written else "visible check"


def _check_state(item: GradedItem, runs: dict) -> tuple[bool, str]:
    run = runs.get(fingerprint(item.source))
    if run is None and set(runs) == {UNKNOWN_CHECK}:
        run = runs[UNKNOWN_CHECK]  # recorded where the check's cell was not known (format 1, scripts)
    if run is None:
        return False, "not attempted"
    if run["state"] == PASSED:
        return True, "passed"
    return False, f"{run['state']}: {run.get('reason') or 'no reason recorded'}"


def item_states(name: str, record_data: dict | None = None, student_notebook: Path | None = None) -> list[ItemState]:
    """Every graded item of notebook ``name`` with its state, from the record and the student's copy."""
    data = record_data if record_data is not None else load_record()
    states = []
    for item in graded_items(name, student_notebook):
        if item.written:
            answered = is_written(item.source, item.placeholder)
            states.append(ItemState(item, answered, "answered" if answered else "still empty"))
        else:
            states.append(ItemState(item, *_check_state(item, data["checks"].get(item.exercise.key, {}))))
    return states


def _item_label(state: ItemState, states: list[ItemState]) -> str:
    """The exercise's label, with the cell's name when the exercise has several items of this kind."""
    same = [s for s in states if s.item.exercise == state.item.exercise and s.item.written == state.item.written]
    if len(same) == 1:
        return state.item.exercise.label
    cell_name = state.item.grade_id.split(GRADE_ID_SEPARATOR, 1)[-1].removesuffix("_tests").removesuffix("_manual")
    return f"{state.item.exercise.label} ({cell_name})"


def _points(value: float) -> str:
    return f"{value:g}"


class ProgressTable(list):
    """Rows ``(exercise, what, part, points, status)`` with a total row per notebook and one for the
    course; shows as an HTML table in Jupyter and as aligned text when printed."""

    HEADER = ("exercise", "what", "part", "points", "status")

    def __init__(self, rows, source: Path):
        super().__init__(rows)
        self.source = source  # where the written answers were read

    def _repr_html_(self) -> str:
        # JupyterLab right-aligns output tables; words read better left-aligned (inline: the
        # output sanitizer drops <style> elements)
        def row(cells, tag="td", style=""):
            return f"<tr{style}>" + "".join(f'<{tag} style="text-align:left">{html.escape(str(c))}</{tag}>'
                                            for c in cells) + "</tr>"

        body = "".join(row(r, style=' style="font-weight:bold"' if r[0].startswith(("notebook", "course")) else "")
                       for r in self)
        note = f"<p>Written answers as last saved in <code>{html.escape(str(self.source))}</code>.</p>"
        return f"<table>{row(self.HEADER, 'th')}{body}</table>{note}"

    def __str__(self) -> str:
        rows = [self.HEADER, *self]
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(self.HEADER))]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        return "\n".join(lines + [f"(written answers as last saved in {self.source})"])


def _total(label: str, states: list[ItemState]) -> tuple:
    done = [s for s in states if s.done]
    points = sum(s.item.points for s in states)
    return (label, "", f"{len(done)} of {len(states)} items done", f"{_points(sum(s.item.points for s in done))} of "
            f"{_points(points)}", "")


def table() -> ProgressTable:
    """Every graded item of the eight notebooks with its state; a total per notebook and for the course."""
    data = load_record()
    rows, everything = [], []
    for name in NOTEBOOKS:
        states = item_states(name, data)
        for state in states:
            rows.append((_item_label(state, states), state.item.exercise.title, state.part,
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
                         f"{', '.join(NOTEBOOKS)}")
    marks = {True: "\u2713", False: "\u2717"}
    lines = []
    width = max(len(_item_label(s, states)) + len(s.part) + 1 for s in states)
    for state in states:
        failing = not state.done and state.status not in ("not attempted", "still empty")
        mark = marks[state.done] if state.done or failing else "\u00b7"
        lines.append(f"{mark} {(_item_label(state, states) + ' ' + state.part).ljust(width)}  {state.status}")
    done = [s for s in states if s.done]
    header = (f"{name}: {len(done)} of {len(states)} graded items done "
              f"({_points(sum(s.item.points for s in done))} of {_points(sum(s.item.points for s in states))} points)")
    footer = "(checks as they last ran; written answers as last saved: save the notebook (Ctrl+S) first)"
    return "\n".join([header, *lines, footer])
