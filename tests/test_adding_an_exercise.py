"""The instructor's guide's steps for adding an exercise, performed as the guide writes them.

docs/instructors.md ("Exercises: their names, and adding one") holds the example exercise, a min-p filter in
notebook 02, as fenced blocks, each right under a marker line ``<!-- adding an exercise: <what> -->``. This test
takes those blocks, applies them step by step to a copy of the course (``source/ch11`` and ``lib/`` in a
temporary folder, every subprocess and kernel importing the copy's ``lib/``), asks
``python -m lmpolicy_grader.completeness 02_temperature`` after each step what is missing, and finally runs the new
check cell in a kernel on the reference solution and on each of the guide's typical wrong answers. A change of the
guide that breaks its steps fails here.
"""
from __future__ import annotations

import ast
import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.notebooks.notebook_tools import CHECK_ERRORS, kernel_env, run_cell, visible_only
from tests.notebooks.test_wrong_answers import says, shown_error

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "instructors.md"
NOTEBOOK = "02_temperature"
KEY = "nb02_min_p"
AFTER = "nb02_top_p__tests"  # the guide puts the new cells right after this check cell
WRITE_HEADERS = f"run `python -m lmpolicy.notebook.catalogue write-headers {NOTEBOOK}`"

# a marker line, then a fenced block at the marker's indentation
BLOCK = re.compile(r"^(?P<indent>[ ]*)<!-- adding an exercise: (?P<name>[^>]+?) -->\n"
                   r"(?P=indent)```[a-z]*\n(?P<body>.*?)\n(?P=indent)```$", re.MULTILINE | re.DOTALL)
EXPECTED_BLOCKS = ("the question cell", "the answer cell", "the answer cell's metadata", "the test cell",
                   "the test cell's metadata", "the title", "the module entry", "the hidden test", "the wrong answers")


def guide_blocks() -> dict[str, str]:
    """The guide's blocks of the example exercise by their marker's name, their indentation taken off."""
    blocks = {}
    for match in BLOCK.finditer(GUIDE.read_text(encoding="utf-8")):
        indent = match["indent"]
        lines = match["body"].split("\n")
        assert all(line.startswith(indent) or not line.strip() for line in lines), \
            f"the guide's block {match['name']!r} has a line left of its fence"
        blocks[match["name"]] = "\n".join(line[len(indent):] for line in lines) + "\n"
    return blocks


class Course:
    """A copy of the course's notebooks and library, and the guide's commands run against it."""

    def __init__(self, folder: Path):
        self.folder = folder
        shutil.copytree(ROOT / "lib", folder / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        shutil.copytree(ROOT / "source" / "ch11", folder / "source" / "ch11")
        self.env = {**os.environ, "PYTHONPATH": str(folder / "lib"),
                    "LMPOLICY_PROGRESS_FILE": str(folder / "progress.json")}
        self.notebook = folder / "source" / "ch11" / f"{NOTEBOOK}.ipynb"

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *argv], cwd=self.folder, env=self.env, capture_output=True, text=True,
                              timeout=600)

    def missing(self) -> list[str]:
        """What ``python -m lmpolicy_grader.completeness 02_temperature`` names, one line each ([] when complete)."""
        done = self.run("-m", "lmpolicy_grader.completeness", NOTEBOOK)
        lines = done.stdout.splitlines()
        assert not done.stderr.strip(), done.stderr
        if done.returncode == 0:
            assert len(lines) == 1 and "every exercise is complete" in lines[0], done.stdout
            return []
        assert done.returncode == 1 and lines, done.stdout
        assert all(line.startswith(NOTEBOOK) for line in lines), f"a message of more than one line:\n{done.stdout}"
        return lines

    def module(self, dotted: str) -> Path:
        return self.folder / "lib" / Path(*dotted.split(".")).with_suffix(".py")


def _assignment(tree: ast.Module, name: str) -> ast.Assign:
    return next(node for node in tree.body if isinstance(node, ast.Assign)
                and any(isinstance(target, ast.Name) and target.id == name for target in node.targets))


def _replace_lines(text: str, node: ast.stmt, replacement: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:node.lineno - 1]) + replacement + "".join(lines[node.end_lineno:])


def add_cells(course: Course, blocks: dict[str, str]) -> None:
    """Step 1: the question, the answer cell and the test cell after Exercise 02.top-p, and the title."""
    nb = nbformat.read(course.notebook, as_version=4)
    at = next(i for i, cell in enumerate(nb.cells) if cell.get("id") == AFTER) + 1
    answer_meta = json.loads(blocks["the answer cell's metadata"])
    test_meta = json.loads(blocks["the test cell's metadata"])
    answer = nbformat.v4.new_code_cell(blocks["the answer cell"].rstrip("\n"), metadata=answer_meta)
    tests = nbformat.v4.new_code_cell(blocks["the test cell"].rstrip("\n"), metadata=test_meta)
    answer.id, tests.id = answer_meta["nbgrader"]["grade_id"], test_meta["nbgrader"]["grade_id"]
    nb.cells[at:at] = [nbformat.v4.new_markdown_cell(blocks["the question cell"].rstrip("\n")), answer, tests]
    nb.cells[0].metadata["lmpolicy"]["exercises"].update(json.loads(blocks["the title"]))
    nbformat.validate(nb)
    nbformat.write(nb, course.notebook)


def add_module_entry(course: Course, blocks: dict[str, str]) -> None:
    """Step 2: the visible checks and the declaration before ``EXERCISES``, and ``MIN_P`` added to it."""
    path = course.module("lmpolicy.exercises.nb02")
    text = path.read_text(encoding="utf-8")
    exercises = _assignment(ast.parse(text), "EXERCISES")
    assert isinstance(exercises.value, ast.Tuple), "EXERCISES is not a tuple"
    exercises.value.elts.append(ast.Name("MIN_P"))
    entry = blocks["the module entry"] + "\n\n" + ast.unparse(exercises) + "\n"
    path.write_text(_replace_lines(text, exercises, entry), encoding="utf-8")


def add_hidden_test(course: Course, blocks: dict[str, str]) -> None:
    """Step 2: the hidden test at the end of the grader's module, ``MIN_P`` added to its import of the declarations."""
    path = course.module("lmpolicy_grader.hidden_tests.nb02")
    text = path.read_text(encoding="utf-8")
    imports = next(node for node in ast.parse(text).body
                   if isinstance(node, ast.ImportFrom) and node.module == "lmpolicy.exercises.nb02")
    imports.names.append(ast.alias("MIN_P"))
    text = _replace_lines(text, imports, ast.unparse(imports) + "\n")
    path.write_text(text.rstrip("\n") + "\n\n\n" + blocks["the hidden test"], encoding="utf-8")


def add_wrong_answers(course: Course, blocks: dict[str, str]) -> None:
    """Step 3: the typical wrong answers, at the end of the list ``WRONG_ANSWERS``."""
    path = course.module("lmpolicy_grader.corpus.wrong_answers.nb02")
    text = path.read_text(encoding="utf-8")
    answers = _assignment(ast.parse(text), "WRONG_ANSWERS")
    lines = text.splitlines(keepends=True)
    closing = answers.end_lineno - 1  # the line of the list's `]`
    assert lines[closing].strip() == "]", "WRONG_ANSWERS does not end with a line of its own `]`"
    path.write_text("".join(lines[:closing]) + blocks["the wrong answers"] + "".join(lines[closing:]),
                    encoding="utf-8")


def write_headers(course: Course, blocks: dict[str, str]) -> None:
    """Step 3: ``python -m lmpolicy.notebook.catalogue write-headers 02_temperature``."""
    done = course.run("-m", "lmpolicy.notebook.catalogue", "write-headers", NOTEBOOK)
    assert done.returncode == 0, done.stdout + done.stderr
    assert str(course.notebook) in done.stdout, "write-headers wrote another course's notebook than the copy's"


# Each step of the guide, and the line of the completeness check that names it as missing until it is done (none
# for the first: before it nothing of the exercise exists to be named).
STEPS = [
    (add_cells, None),
    (add_module_entry, f"lmpolicy.exercises.nb02.EXERCISES declares no {KEY}"),
    (add_hidden_test, "lmpolicy_grader.hidden_tests.nb02 has no function min_p"),
    (add_wrong_answers,
     f"{KEY}: no typical wrong answer of kind pitfall in lib/lmpolicy_grader/corpus/wrong_answers/nb02.py"),
    (write_headers, WRITE_HEADERS),
]


def the_new_wrong_answers(course: Course) -> list[dict]:
    """The copy's typical wrong answers of the new exercise, as the corpus reads them."""
    done = course.run("-c", "import json; from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS; "
                            f"print(json.dumps([vars(w) for w in WRONG_ANSWERS if w.exercise == {KEY!r}]))")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_guide_holds_every_block_of_the_example():
    assert set(guide_blocks()) == set(EXPECTED_BLOCKS)


@pytest.mark.slow
def test_the_guides_steps_add_a_working_exercise(tmp_path):
    blocks = guide_blocks()
    course = Course(tmp_path / "course")
    assert course.missing() == [], "notebook 02 of the course is not complete before the guide's steps"

    # After each step, the check names the next step's thing and no longer names this step's or an earlier one's.
    for index, (step, _) in enumerate(STEPS):
        step(course, blocks)
        missing = course.missing()
        done = [names for _, names in STEPS[:index + 1] if names]
        for line in missing:
            assert not any(names in line for names in done), f"after {step.__name__}, still: {line}"
        if index + 1 < len(STEPS):
            upcoming = STEPS[index + 1][1]
            assert any(upcoming in line for line in missing), \
                f"after {step.__name__}, the check does not name {upcoming!r}:\n" + "\n".join(missing)
        else:
            assert missing == [], "after the guide's last step the check still names:\n" + "\n".join(missing)

    nb = nbformat.read(course.notebook, as_version=4)
    by_id = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in nb.cells}
    setup = next(cell for grade_id, cell in by_id.items() if grade_id and grade_id.endswith("__setup"))
    answer, tests = by_id[f"{KEY}__answer"], by_id[f"{KEY}__tests"]
    assert tests.source.startswith("# Checks of Exercise 02.min-p:") and "step 3 writes it" not in tests.source

    wrong_answers = the_new_wrong_answers(course)
    assert {wrong["kind"] for wrong in wrong_answers} == {"pitfall", "breadth"}
    runner = NotebookClient(nb, kernel_name="python3", timeout=120,
                            resources={"metadata": {"path": str(course.notebook.parent)}})
    env = {**kernel_env(grader=False, progress_file=tmp_path / "progress.json"), "PYTHONPATH": course.env["PYTHONPATH"]}
    problems = []
    with runner.setup_kernel(env=env):
        assert run_cell(runner, copy.deepcopy(setup), 0) is None
        assert run_cell(runner, copy.deepcopy(answer), 1) is None
        reference = copy.deepcopy(tests)
        assert run_cell(runner, reference, 2) is None, \
            "the reference fails the new check cell:\n" + shown_error(reference)
        assert any("Exercise 02.min-p passed" in output.get("text", "") for output in reference.outputs)
        for wrong in wrong_answers:
            replaced = copy.deepcopy(answer)
            replaced.source = wrong["source"]
            assert run_cell(runner, replaced, 1) is None
            visible = visible_only(tests)
            error = run_cell(runner, visible, 2)
            if wrong["kind"] == "pitfall":
                if error not in CHECK_ERRORS:
                    problems.append(f"{wrong['why']}: the visible check gave {error}, not a failed check")
                elif not says(shown_error(visible), wrong["names"]):
                    problems.append(f"{wrong['why']}: the message does not say {wrong['names']!r}:\n"
                                    + shown_error(visible))
            elif error is not None:
                problems.append(f"{wrong['why']}: a breadth answer fails the visible check ({error})")
            elif run_cell(runner, copy.deepcopy(tests), 2) not in CHECK_ERRORS:
                problems.append(f"{wrong['why']}: the hidden test does not fail it")
    assert not problems, "\n\n".join(problems)
