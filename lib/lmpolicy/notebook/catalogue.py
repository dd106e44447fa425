"""The chapter's exercises, read from its notebooks: each fact written once, in the notebook.

An exercise's facts live in the cells of its notebook and nowhere else:

- its **key** is the start of the ``grade_id`` of each of its nbgrader cells, then two underscores
  (``ex11_1a__tests`` -> ``ex11_1a``; ``exercise_key``);
- its **points** are the ``points`` of its graded cells (code test cells are autograded, markdown
  answer cells graded by hand);
- its **title** (a few words on what it asks) is written in the notebook's first cell's metadata,
  ``{"lmpolicy": {"exercises": {"<key>": "<title>"}}}``, in the order the header table lists them;
- its **label**, what a student reads, follows from the key (``label``):

  ============================  ==================  =========================================
  key                           label               what it is
  ============================  ==================  =========================================
  ``ex11_<n><part>``            Exercise 11.1(a)    an exercise of the book's chapter 11
  ``task<k>``                   Lab Task 1a         a task of the chapter's lab
  ``nb<NN>_<name>``             Exercise 02.top-k   notebook NN's own exercise (``_`` -> ``-``)
  ============================  ==================  =========================================

Everything else is derived: ``Chapter`` reads the notebooks of one folder, and the header table of
each notebook (its first cell, between ``HEADER_BEGIN`` and ``HEADER_END``) and the first line of each
check cell (``check_heading``: what the cell is and how to run it) are written from it by

    python -m lmpolicy.notebook.catalogue write-headers [NN_name ...]

``python -m lmpolicy.notebook.catalogue check [NN_name ...]`` lists what is wrong with a notebook's exercises
(a key of no known form, a graded cell without points, an exercise without a title, a header table
or a check cell's first line that is out of date), one line each, and exits 1 if anything is;
``list`` prints every exercise with its points and the course's total; ``pytest-k NN_name`` the
notebook and its keys as a ``pytest -k`` expression (the tests of one notebook are named by either).

This module reads notebooks as plain JSON (no nbformat), so the student's kernel pays a few
milliseconds for it; it imports nothing of the course.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ASSIGNMENT = "ch11"
CHAPTER = 11
GRADE_ID_SEPARATOR = "__"
# the grade id's ending of a varying exercise's cell that shows the student's own numbers (`ex11_1a__parameters`)
PARAMETERS_CELL = f"{GRADE_ID_SEPARATOR}parameters"
METADATA_FIELD = "lmpolicy"       # the first cell's metadata: {"lmpolicy": {"exercises": {key: title}}}
TITLES_FIELD = "exercises"
HEADER_BEGIN = ("<!-- the exercise table: written from the cells' metadata by `python -m lmpolicy.notebook.catalogue "
                "write-headers` (titles: this cell's metadata, lmpolicy.exercises); edit those, not this -->")
HEADER_END = "<!-- end of the exercise table -->"

_CHAPTER_KEY = re.compile(rf"ex{CHAPTER}_(\d+)([a-z]?)")
_LAB_KEY = re.compile(r"task(\d+[a-z]?)")
_NOTEBOOK_KEY = re.compile(r"nb(\d\d)_([a-z0-9]+(?:_[a-z0-9]+)*)")
_NOTEBOOK_NAME = re.compile(r"(\d\d)_[a-z0-9_]+")
KEY_FORMS = f"ex{CHAPTER}_<n><part>, task<k>, nb<NN>_<name>"


def exercise_key(grade_id: str) -> str:
    """The exercise a cell belongs to, from its nbgrader grade id: ``ex11_1a__tests`` -> ``ex11_1a``.

    A grade id without the separator is its own key.
    """
    return grade_id.split(GRADE_ID_SEPARATOR, 1)[0]


def label(key: str) -> str:
    """What a student reads for exercise ``key``: "Exercise 11.1(a)", "Lab Task 1a", "Exercise 02.top-k"."""
    if match := _CHAPTER_KEY.fullmatch(key):
        number, part = match.groups()
        return f"Exercise {CHAPTER}.{number}" + (f"({part})" if part else "")
    if match := _LAB_KEY.fullmatch(key):
        return f"Lab Task {match.group(1)}"
    if match := _NOTEBOOK_KEY.fullmatch(key):
        notebook, name = match.groups()
        return f"Exercise {notebook}.{name.replace('_', '-')}"
    raise ValueError(f"exercise key {key!r} has none of the known forms ({KEY_FORMS}); see docs/instructors.md")


@dataclass(frozen=True)
class Part:
    """One nbgrader grade cell of an exercise."""
    grade_id: str
    points: float
    written: bool  # a written answer graded by hand (markdown), rather than a test cell (code, autograded)


@dataclass(frozen=True)
class Exercise:
    key: str                 # prefix of every grade_id of the exercise
    notebook: str            # the notebook's name, without ".ipynb"
    title: str               # a few words on what it asks ("" when the notebook does not give one)
    parts: tuple[Part, ...] = ()

    @property
    def label(self) -> str:
        return label(self.key)

    @property
    def points(self) -> float:
        return sum(part.points for part in self.parts)


def _nbgrader(cell: dict) -> dict:
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def titles(notebook: dict) -> dict[str, str]:
    """The titles the notebook's first cell's metadata gives, by exercise key."""
    cells = notebook.get("cells") or [{}]
    given = ((cells[0].get("metadata") or {}).get(METADATA_FIELD) or {}).get(TITLES_FIELD) or {}
    return {str(key): str(title) for key, title in given.items()} if isinstance(given, dict) else {}


def notebook_exercises(name: str, notebook: dict) -> list[Exercise]:
    """The exercises of one notebook (its JSON), in the order their first nbgrader cell appears."""
    named = titles(notebook)
    parts: dict[str, list[Part]] = {}
    for cell in notebook.get("cells", []):
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        if not grade_id or not (meta.get("grade") or meta.get("solution") or meta.get("locked")):
            continue
        if GRADE_ID_SEPARATOR not in grade_id:
            continue  # a cell of no exercise (check() names it)
        found = parts.setdefault(exercise_key(grade_id), [])
        if meta.get("grade"):
            found.append(Part(grade_id, float(meta.get("points") or 0), cell.get("cell_type") == "markdown"))
    return [Exercise(key, name, named.get(key, ""), tuple(found)) for key, found in parts.items() if found]


def read_notebook(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Chapter:
    """Every exercise of the notebooks of one folder (``NN_name.ipynb``), notebook by notebook."""
    folder: Path
    notebooks: tuple[str, ...]
    exercises: tuple[Exercise, ...]

    @classmethod
    def read(cls, folder: Path) -> "Chapter":
        folder = Path(folder)
        paths = sorted(p for p in folder.glob("*.ipynb") if _NOTEBOOK_NAME.fullmatch(p.stem))
        exercises = []
        for path in paths:
            exercises += notebook_exercises(path.stem, read_notebook(path))
        return cls(folder, tuple(p.stem for p in paths), tuple(exercises))

    def by_key(self) -> dict[str, Exercise]:
        return {exercise.key: exercise for exercise in self.exercises}

    def of(self, notebook: str) -> list[Exercise]:
        return [exercise for exercise in self.exercises if exercise.notebook == notebook]

    @property
    def points(self) -> float:
        return sum(exercise.points for exercise in self.exercises)


# --- the header table of a notebook ----------------------------------------------------------------

def _number(value: float) -> str:
    return f"{value:g}"


def _points_cell(exercise: Exercise) -> str:
    """"3 (autograded)", "3 (graded by hand) + 2 (autograded)": the parts' points by kind, in cell order."""
    by_kind: dict[bool, float] = {}
    for part in exercise.parts:
        by_kind[part.written] = by_kind.get(part.written, 0.0) + part.points
    return " + ".join(f"{_number(points)} ({'graded by hand' if written else 'autograded'})"
                      for written, points in by_kind.items())


def header_block(chapter: Chapter, name: str) -> str:
    """The generated part of notebook ``name``'s first cell: its points, then a row per exercise."""
    exercises = chapter.of(name)
    parts = [part for exercise in exercises for part in exercise.parts]
    auto = sum(p.points for p in parts if not p.written)
    by_hand = sum(p.points for p in parts if p.written)
    split = " and ".join(text for value, text in ((auto, f"{_number(auto)} autograded"),
                                                  (by_hand, f"{_number(by_hand)} graded by your instructor")) if value)
    number = int(_NOTEBOOK_NAME.fullmatch(name).group(1))
    rows = [f"| {exercise.label} | {(exercise.title or '(no title yet)').replace('|', chr(92) + '|')} | "
            f"{_points_cell(exercise)} |"
            for exercise in exercises]
    return "\n".join([
        HEADER_BEGIN,
        f"*Chapter {CHAPTER}, notebook {number} of {len(chapter.notebooks)}.* This notebook is worth "
        f"**{_number(auto + by_hand)} points** ({split}):",
        "",
        "| exercise | what you do | points |",
        "|---|---|---|",
        *rows,
        "",
        HEADER_END,
    ])


def with_header(first_cell_source: str, block: str) -> str:
    """The first cell's text with ``block`` in place of the generated part (or after its title line)."""
    if HEADER_BEGIN in first_cell_source and HEADER_END in first_cell_source:
        before, rest = first_cell_source.split(HEADER_BEGIN, 1)
        after = rest.split(HEADER_END, 1)[1]
        return before + block + after
    title, _, rest = first_cell_source.partition("\n")
    return f"{title}\n\n{block}\n\n{rest.lstrip()}".rstrip() + "\n"


# --- the first line of a check cell -----------------------------------------------------------------

CHECK_HEADING_START = "# Checks of "


def check_heading(key: str) -> str:
    """The first line of exercise ``key``'s check cell: whose checks these are and how a student reaches them.

    Shift+Enter from the answer runs it and steps on (over the hint) towards the check; the cell is a heading and
    one call, shown in full, so ArrowDown stops on it like on any cell.
    """
    return f"{CHECK_HEADING_START}{label(key)}: run with Shift+Enter from your answer"


def with_check_heading(source: str, key: str) -> str:
    """A check cell's code with ``check_heading(key)`` as its first line (replacing an older heading)."""
    first, newline, rest = source.partition("\n")
    if first.startswith(CHECK_HEADING_START):
        return check_heading(key) + newline + rest
    return f"{check_heading(key)}\n{source}"


def is_check_cell(cell: dict) -> bool:
    """An autograded test cell: code, graded, not an answer (read from the JSON; the grader reads the same
    through nbgrader's own ``utils``, ``lmpolicy_grader.cells.is_test``)."""
    meta = _nbgrader(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def write_headers(folder: Path, names: list[str] | None = None) -> list[Path]:
    """Rewrite the header table and the check cells' first lines of notebooks ``names`` (default: all) of
    ``folder``; the paths changed."""
    import nbformat  # only the instructor's command writes notebooks

    chapter = Chapter.read(folder)
    changed = []
    for name in names or chapter.notebooks:
        path = Path(folder) / f"{name}.ipynb"
        notebook = nbformat.read(path, as_version=4)
        derived = [(notebook.cells[0], with_header(notebook.cells[0].source, header_block(chapter, name)))]
        derived += [(cell, with_check_heading(cell.source, exercise_key(_nbgrader(cell)["grade_id"])))
                    for cell in notebook.cells
                    if is_check_cell(cell) and GRADE_ID_SEPARATOR in _nbgrader(cell).get("grade_id", "")]
        edited = [(cell, source) for cell, source in derived if source != cell.source]
        for cell, source in edited:
            cell.source = source
        if edited:
            nbformat.write(notebook, path)
            changed.append(path)
    return changed


def problems(folder: Path, names: list[str] | None = None) -> list[str]:
    """What is wrong with the exercises of notebooks ``names`` (default: all) of ``folder``, one line each."""
    chapter = Chapter.read(folder)
    found = []
    homes: dict[str, str] = {}
    for exercise in chapter.exercises:
        if homes.setdefault(exercise.key, exercise.notebook) != exercise.notebook:
            found.append(f"{exercise.notebook}: exercise {exercise.key} is also in {homes[exercise.key]}; "
                         "an exercise lives in one notebook")
    for name in names or chapter.notebooks:
        path = Path(folder) / f"{name}.ipynb"
        if not path.exists():
            found.append(f"{name}: no notebook {path}")
            continue
        notebook = read_notebook(path)
        for cell in notebook.get("cells", []):
            meta = _nbgrader(cell)
            grade_id = meta.get("grade_id")
            if not (meta.get("grade") or meta.get("solution") or meta.get("locked")) or not grade_id:
                continue
            key = exercise_key(grade_id)
            if GRADE_ID_SEPARATOR not in grade_id:
                found.append(f"{name}: grade_id {grade_id!r} must be '<exercise key>__<cell name>'")
                continue
            try:
                label(key)
            except ValueError as error:
                found.append(f"{name}: grade_id {grade_id!r}: {error}")
                continue
            notebook_key = _NOTEBOOK_KEY.fullmatch(key)
            if notebook_key and notebook_key.group(1) != name[:2]:
                found.append(f"{name}: exercise {key} is named for notebook {notebook_key.group(1)}; "
                             f"in {name} its key starts nb{name[:2]}_")
            if meta.get("grade") and not float(meta.get("points") or 0) > 0:
                found.append(f"{name}: graded cell {grade_id} has no points (its cell metadata, nbgrader.points)")
            if is_check_cell(cell) and _source(cell).partition("\n")[0] != check_heading(key):
                found.append(f"{name}: the check cell {grade_id} does not start with its heading: run "
                             f"`python -m lmpolicy.notebook.catalogue write-headers {name}`")
        exercises = chapter.of(name)
        if not exercises:
            found.append(f"{name}: no graded cell (nbgrader metadata grade: true, with points)")
        named = titles(notebook)
        for exercise in exercises:
            if not named.get(exercise.key, "").strip():
                found.append(f"{name}: exercise {exercise.key} has no title: add it to the first cell's metadata, "
                             f'"{METADATA_FIELD}": {{"{TITLES_FIELD}": {{"{exercise.key}": "<what it asks>"}}}}')
        for key in sorted(set(named) - {exercise.key for exercise in exercises}):
            found.append(f"{name}: the first cell's metadata titles {key}, which has no graded cell here")
        if _source(notebook["cells"][0]) != with_header(_source(notebook["cells"][0]), header_block(chapter, name)):
            found.append(f"{name}: the header table is out of date: run `python -m lmpolicy.notebook.catalogue write-headers "
                         f"{name}`")
    return found


def source_folder() -> Path:
    """The course's source notebooks (``source/ch11`` in the course folder this package is installed from)."""
    return Path(__file__).resolve().parents[3] / "source" / ASSIGNMENT


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lmpolicy.notebook.catalogue", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("check", "write-headers", "list", "pytest-k"))
    parser.add_argument("notebooks", nargs="*", help="NN_name of source notebooks (default: all)")
    parser.add_argument("--folder", type=Path, default=source_folder(), help="default: %(default)s")
    args = parser.parse_intermixed_args(argv)
    names = [Path(n).stem for n in args.notebooks] or None
    if args.command == "write-headers":
        for path in write_headers(args.folder, names):
            print(f"wrote the header table and check headings of {path}")
        return 0
    if args.command == "pytest-k":  # the notebooks and their exercise keys, for pytest's -k (make check-notebook)
        chapter = Chapter.read(args.folder)
        chosen = names or list(chapter.notebooks)
        print(" or ".join(chosen + [e.key for e in chapter.exercises if e.notebook in chosen]))
        return 0
    if args.command == "list":
        chapter = Chapter.read(args.folder)
        shown = [exercise for exercise in chapter.exercises if names is None or exercise.notebook in names]
        for exercise in shown:
            print(f"{exercise.notebook:<20} {exercise.key:<18} {exercise.label:<24} {_points_cell(exercise):<36} "
                  f"{exercise.title}")
        parts = [part for exercise in shown for part in exercise.parts]
        print(f"{_number(sum(p.points for p in parts))} points in {len({e.notebook for e in shown})} notebooks: "
              f"{_number(sum(p.points for p in parts if not p.written))} autograded ({sum(not p.written for p in parts)} "
              f"test cells), {_number(sum(p.points for p in parts if p.written))} graded by hand "
              f"({sum(p.written for p in parts)} written answers)")
        return 0
    found = problems(args.folder, names)
    for line in found:
        print(line)
    if not found:
        print(f"{', '.join(names or Chapter.read(args.folder).notebooks)}: the exercises' facts agree "
              "(keys, points, titles, header table, check headings)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
