"""Is a notebook's every exercise complete? One line per thing missing (``make check-notebook NB=...``).

An exercise is complete when the notebook's cells state its facts (``lmpolicy.notebook.catalogue``), its
module of ``lmpolicy.exercises`` declares it, its check cell is a heading and one call of that declaration
(and, hidden, one call of the grader's ``lmpolicy_grader.hidden_tests`` module), the corpus holds its typical
wrong answers (an autograded exercise: at least one pitfall) or its example written answers (a written one),
and a per-student exercise has its parameters cell. ``python -m lmpolicy_grader.completeness NB ...`` prints them
(``make check-notebook NB=...`` first, before the notebook's tests and its grading).
"""
from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import nbformat

from lmpolicy.exercises.exercise import Exercise
from lmpolicy.notebook import catalogue
from lmpolicy.per_student import variants
from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS, Kind
from lmpolicy_grader.corpus.written_answers import WRITTEN_ANSWERS

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
MOST_LINES = 3  # a check cell's visible part (its heading and a call), and its hidden part


def module_name(notebook: str) -> str:
    """``01_policy_softmax`` -> ``nb01``: the name of the notebook's modules (its checks and its hidden tests)."""
    return f"nb{notebook[:2]}"


def _code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _split(source: str) -> tuple[str, str | None]:
    """A check cell's visible part and its hidden part (None: it has none)."""
    if HIDDEN_BEGIN not in source:
        return source, None
    visible, rest = source.split(HIDDEN_BEGIN, 1)
    return visible, rest.split(HIDDEN_END, 1)[0]


def _calls(text: str) -> list[ast.Call]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    return [node.value for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]


def _check_cell_problems(notebook: str, key: str, grade_id: str, source: str, module) -> list[str]:
    where = f"{notebook} {grade_id}"
    name = module_name(notebook)
    visible, hidden = _split(source)
    found = []
    if len(_code_lines(visible)) > MOST_LINES:
        found.append(f"{where}: the visible part has {len(_code_lines(visible))} lines; it is its heading, "
                     f"`from lmpolicy.exercises import {name}` and `{name}.<EXERCISE>.check(<the student's names>)`")
    declared = [call for call in _calls(visible) if isinstance(call.func, ast.Attribute) and call.func.attr == "check"
                and isinstance(call.func.value, ast.Attribute) and isinstance(call.func.value.value, ast.Name)
                and call.func.value.value.id == name]
    if not declared:
        found.append(f"{where}: no `{name}.<EXERCISE>.check(...)` call in the visible part")
    elif module is not None:
        target = getattr(module, declared[0].func.value.attr, None)
        if not isinstance(target, Exercise) or target.key != key:
            found.append(f"{where}: {name}.{declared[0].func.value.attr} is not the declaration of {key} "
                         f"in lmpolicy.exercises.{name}")
    if hidden is None or not _code_lines(hidden):
        found.append(f"{where}: no hidden tests (`{HIDDEN_BEGIN}` ... `{HIDDEN_END}`)")
        return found
    if len(_code_lines(hidden)) > MOST_LINES:
        found.append(f"{where}: the hidden part has {len(_code_lines(hidden))} lines; it is "
                     f"`from lmpolicy_grader.hidden_tests import {name} as hidden` and one call")
    tests = [call for call in _calls(hidden) if isinstance(call.func, ast.Attribute)
             and isinstance(call.func.value, ast.Name) and call.func.value.id == "hidden"]
    if not tests:
        found.append(f"{where}: the hidden part calls no `hidden.<test>(...)` of lmpolicy_grader.hidden_tests.{name}")
    else:
        try:
            hidden_module = importlib.import_module(f"lmpolicy_grader.hidden_tests.{name}")
        except ImportError:
            found.append(f"{where}: no module lmpolicy_grader/hidden_tests/{name}.py")
        else:
            if not callable(getattr(hidden_module, tests[0].func.attr, None)):
                found.append(f"{where}: lmpolicy_grader.hidden_tests.{name} has no function {tests[0].func.attr}")
    return found


def problems(notebook: str, folder: Path | None = None) -> list[str]:
    """What notebook ``notebook`` (``02_temperature``) of ``folder`` (the course's source) lacks, one line each."""
    folder = folder or catalogue.source_folder()
    path = folder / f"{notebook}.ipynb"
    if not path.is_file():
        return [f"{notebook}: no notebook {path}"]
    found = list(catalogue.problems(folder, [notebook]))
    cells = nbformat.read(path, as_version=4).cells
    name = module_name(notebook)
    try:
        module = importlib.import_module(f"lmpolicy.exercises.{name}")
    except ImportError:
        module, declared = None, {}
        found.append(f"{notebook}: no module lib/lmpolicy/exercises/{name}.py declaring its exercises")
    else:
        declared = {exercise.key: exercise for exercise in getattr(module, "EXERCISES", ())}
    tested, written, parameters = set(), set(), set()
    for cell in cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if catalogue.GRADE_ID_SEPARATOR not in grade_id:
            continue
        key = catalogue.exercise_key(grade_id)
        if catalogue.is_check_cell(cell):
            tested.add(key)
            if module is not None and key not in declared:
                found.append(f"{notebook} {grade_id}: lmpolicy.exercises.{name}.EXERCISES declares no {key}")
            found += _check_cell_problems(notebook, key, grade_id, cell.source, module)
        elif cell.cell_type == "markdown" and cell.metadata["nbgrader"].get("grade"):
            written.add(grade_id)
        elif grade_id.endswith(catalogue.PARAMETERS_CELL):
            parameters.add(key)
    for key in sorted(set(declared) - tested):
        found.append(f"{notebook}: lmpolicy.exercises.{name} declares {key}, which has no check cell in the notebook")
    pitfalls = {answer.exercise for answer in WRONG_ANSWERS if answer.notebook == notebook and answer.kind == Kind.PITFALL}
    for key in sorted(tested - pitfalls):
        found.append(f"{notebook} {key}: no typical wrong answer of kind pitfall in "
                     f"lib/lmpolicy_grader/corpus/wrong_answers/{name}.py")
    examples = {answer.cell for answer in WRITTEN_ANSWERS if answer.notebook == notebook}
    for grade_id in sorted(written - examples):
        found.append(f"{notebook} {grade_id}: no example written answers (good, partial, wrong) in "
                     "lib/lmpolicy_grader/corpus/written_answers.py")
    for key in sorted(tested):
        if (key in variants.VARYING) != (key in parameters):
            found.append(f"{notebook} {key}: " + ("varies per student (lmpolicy.per_student.variants) but has no "
                                                  f"`{key}{catalogue.PARAMETERS_CELL}` cell" if key in variants.VARYING else
                                                  f"has a `{key}{catalogue.PARAMETERS_CELL}` cell but no family in "
                                                  "lmpolicy.per_student.variants"))
    return found


def main(argv: list[str] | None = None) -> int:
    notebooks = sys.argv[1:] if argv is None else argv
    if not notebooks:
        print("usage: python -m lmpolicy_grader.completeness 02_temperature [...]", file=sys.stderr)
        return 2
    found = [line for notebook in notebooks for line in problems(notebook)]
    for line in found:
        print(line)
    if not found:
        print(f"{', '.join(notebooks)}: every exercise is complete (declared, checked in one call, hidden tests, "
              "typical wrong answers or example written answers)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
