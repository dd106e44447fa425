"""The wrong-answer corpus: each typical wrong answer fails its exercise's tests; the reference passes.

One kernel per notebook: run the source notebook top to bottom, then for each wrong answer run its
replacement cell and the exercise's test cells (they must fail with a friendly check), then the
reference answer cell again and the test cells (they must pass). An answer taken from a demo
(``Kind.FROM_DEMO``) is right in the student's JupyterLab and fails under nbgrader with the demo's message.
"""
import contextlib
import copy
import re

import pytest

from .notebook_tools import (CHECK_ERRORS, visible_only, HIDDEN_TESTS, NOTEBOOK_NAMES, SOURCE_DIR, client, exercise_key, grade_id,
                             is_autograded_test, is_code_answer, kernel_env, read, run_cell)
from lmpolicy.demos.base import DemoNotAvailableWhileGrading
from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS, Kind
from tests.verdicts import one_line

CORPUS_NOTEBOOKS = sorted({wrong.notebook for wrong in WRONG_ANSWERS} & set(NOTEBOOK_NAMES))
FROM_DEMO = [w for w in WRONG_ANSWERS if w.kind == Kind.FROM_DEMO]
DEMO_NOTEBOOKS = sorted({w.notebook for w in FROM_DEMO} & set(NOTEBOOK_NAMES))
DEMO_ERROR = DemoNotAvailableWhileGrading.__name__


def autograded_exercises(name):
    return sorted({exercise_key(c) for c in read(SOURCE_DIR / f"{name}.ipynb").cells if is_autograded_test(c)})


AUTOGRADED = [(name, key) for name in NOTEBOOK_NAMES for key in autograded_exercises(name)]


@pytest.mark.parametrize("name,key", AUTOGRADED, ids=[key for _, key in AUTOGRADED])
def test_every_autograded_exercise_has_a_wrong_answer(name, key):
    assert any(w.notebook == name and w.exercise == key for w in WRONG_ANSWERS), \
        f"no typical wrong answer for {key} in lib/lmpolicy_grader/corpus/wrong_answers/nb{name[:2]}.py"


@pytest.mark.parametrize("wrong", WRONG_ANSWERS, ids=[f"{w.cell}:{i}" for i, w in enumerate(WRONG_ANSWERS)])
def test_wrong_answers_name_real_answer_cells(wrong):
    if wrong.notebook not in NOTEBOOK_NAMES:
        pytest.skip(f"{wrong.notebook} is not written yet")
    cells = {grade_id(c): c for c in read(SOURCE_DIR / f"{wrong.notebook}.ipynb").cells}
    assert wrong.cell in cells and is_code_answer(cells[wrong.cell]), f"{wrong.cell} is not an answer cell"
    assert wrong.exercise in autograded_exercises(wrong.notebook)
    assert wrong.source.strip() != cells[wrong.cell].source.strip()
    assert "BEGIN SOLUTION" not in wrong.source and wrong.why.strip()


@contextlib.contextmanager
def reference_run(name: str, tmp_path, *, grader: bool):
    """A kernel that has run notebook ``name`` with its reference answers (as nbgrader runs it if ``grader``):
    its client, the notebook's cells as they were before running, and each graded cell's index."""
    nb = read(SOURCE_DIR / f"{name}.ipynb")  # the runner stores every executed cell back into nb.cells
    pristine = copy.deepcopy(nb.cells)
    index_of = {grade_id(cell): i for i, cell in enumerate(nb.cells) if grade_id(cell)}
    runner = client(nb)
    with runner.setup_kernel(env=kernel_env(grader=grader, progress_file=tmp_path / "progress.json")):
        for i, cell in enumerate(copy.deepcopy(pristine)):
            if cell.cell_type == "code":
                assert run_cell(runner, cell, i) is None, f"{name}: the reference notebook fails at cell {i}"
        yield runner, pristine, index_of


@pytest.mark.slow
@pytest.mark.parametrize("name", CORPUS_NOTEBOOKS)
def test_hidden_tests_fail_each_wrong_answer_and_pass_the_reference(name, tmp_path):
    problems = []
    with reference_run(name, tmp_path, grader=True) as (runner, pristine, index_of):
        for wrong in (w for w in WRONG_ANSWERS if w.notebook == name):
            tests = [(i, c) for i, c in enumerate(pristine) if is_autograded_test(c) and exercise_key(c) == wrong.exercise]
            answer_index = index_of[wrong.cell]
            replaced = copy.deepcopy(pristine[answer_index])
            replaced.source = wrong.source
            answer_error = run_cell(runner, replaced, answer_index)  # a wrong answer may raise; the tests decide
            ran = [(i, copy.deepcopy(c)) for i, c in tests]
            errors = [run_cell(runner, c, i) for i, c in ran]
            if wrong.kind == Kind.FROM_DEMO:  # the answer cell fails, and so its check, with the demo's message
                problems += demo_message_problems(wrong, replaced, answer_error, ran, errors)
            elif not any(errors):
                problems.append(f"{wrong.cell} ({wrong.why}): the tests of {wrong.exercise} pass")
            elif not all(e is None or e in CHECK_ERRORS for e in errors):
                problems.append(f"{wrong.cell} ({wrong.why}): a test cell failed with {errors}, not a friendly check")
            assert run_cell(runner, copy.deepcopy(pristine[answer_index]), answer_index) is None
            restored = [run_cell(runner, copy.deepcopy(c), i) for i, c in tests]
            assert not any(restored), f"{name}: the reference answer of {wrong.exercise} fails after {wrong.cell}"
    assert not problems, "\n".join(problems)


def demo_message_problems(wrong, answer_cell, answer_error, tests, errors) -> list[str]:
    """What is wrong with how a FROM_DEMO answer failed under nbgrader: its answer cell must raise the demo's
    error, and the check right after it (the one nbgrader validate shows) repeat it, message and all."""
    label = f"{wrong.cell} ({wrong.why})"
    if answer_error != DEMO_ERROR:
        return [f"{label}: under nbgrader the answer cell ended with {answer_error}, not {DEMO_ERROR}"]
    problems = []
    if not says(shown_error(answer_cell), wrong.names):
        problems.append(f"{label}: the answer cell's error does not say {wrong.names!r}:\n{shown_error(answer_cell)}")
    first_check = tests[0][1]
    if errors[0] != DEMO_ERROR or not says(shown_error(first_check), wrong.names):
        problems.append(f"{label}: its check failed with {errors[0]}, not the demo's message")
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("name", DEMO_NOTEBOOKS)
def test_each_answer_taken_from_a_demo_passes_every_check_in_jupyterlab(name, tmp_path):
    """Issue 20's gap: such an answer is right where the student works (so only nbgrader can tell them, and
    does, at once); here, with no grader, its visible and hidden checks pass."""
    problems = []
    with reference_run(name, tmp_path, grader=False) as (runner, pristine, index_of):
        for wrong in (w for w in FROM_DEMO if w.notebook == name):
            replaced = copy.deepcopy(pristine[index_of[wrong.cell]])
            replaced.source = wrong.source
            tests = [(i, copy.deepcopy(c)) for i, c in enumerate(pristine)
                     if is_autograded_test(c) and exercise_key(c) == wrong.exercise]
            ran = [run_cell(runner, replaced, index_of[wrong.cell])] + [run_cell(runner, c, i) for i, c in tests]
            if any(ran):
                problems.append(f"{wrong.cell} ({wrong.why}): in JupyterLab the answer and its tests give {ran}")
    assert not problems, "\n".join(problems)


# --- pitfalls: the visible check catches them at once, in a few lines -----------------------------

MAX_MESSAGE_LINES = 8
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
PITFALLS = [w for w in WRONG_ANSWERS if w.kind == Kind.PITFALL]
PITFALL_NOTEBOOKS = sorted({w.notebook for w in PITFALLS} & set(NOTEBOOK_NAMES))


@pytest.mark.parametrize("wrong", WRONG_ANSWERS, ids=[f"{w.cell}:{i}" for i, w in enumerate(WRONG_ANSWERS)])
def test_every_wrong_answer_is_tagged_with_its_kind(wrong):
    assert wrong.kind in tuple(Kind), f"{wrong.cell} ({wrong.why}) has no kind"
    if wrong.kind in (Kind.PITFALL, Kind.FROM_DEMO):
        assert wrong.names and wrong.names.strip(), f"{wrong.cell}: a {wrong.kind} names the phrase its message must hold"


@pytest.mark.parametrize("key", ["ex11_9a", "ex11_9c", "ex11_9d"])
def test_each_exercise_read_off_a_demo_has_an_answer_taken_from_the_demo(key):
    assert any(w.exercise == key for w in FROM_DEMO), f"no FROM_DEMO answer for {key}"


@pytest.mark.parametrize("name,key", AUTOGRADED, ids=[key for _, key in AUTOGRADED])
def test_every_autograded_exercise_has_a_pitfall(name, key):
    assert any(w.notebook == name and w.exercise == key for w in PITFALLS), \
        f"no pitfall for {key} in lib/lmpolicy_grader/corpus/wrong_answers/nb{name[:2]}.py"


def shown_error(cell) -> str:
    """What the student reads under a failed cell: the error output's rendered traceback."""
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert errors, "the cell failed without an error output"
    return ANSI_ESCAPE.sub("", "\n".join(errors[-1].get("traceback", [])))


def says(shown: str, phrase: str) -> bool:
    """Whether ``shown`` holds ``phrase``, whatever its case and wherever its lines were wrapped."""
    return one_line(phrase.lower()) in one_line(shown.lower())


@pytest.mark.slow
@pytest.mark.parametrize("name", PITFALL_NOTEBOOKS)
def test_each_pitfall_fails_the_visible_check_in_a_few_lines(name, tmp_path):
    nb = read(SOURCE_DIR / f"{name}.ipynb")
    pristine = copy.deepcopy(nb.cells)
    index_of = {grade_id(cell): i for i, cell in enumerate(nb.cells) if grade_id(cell)}
    runner = client(nb)
    problems = []
    # The visible checks are the same code for student and grader; the grader's environment only keeps
    # notebook 08's training cells short, so the reference run takes seconds, not minutes.
    with runner.setup_kernel(env=kernel_env(grader=True, progress_file=tmp_path / "progress.json")):
        for i, cell in enumerate(copy.deepcopy(pristine)):
            if cell.cell_type == "code":
                cell = visible_only(cell) if is_autograded_test(cell) else cell
                assert run_cell(runner, cell, i) is None, f"{name}: the reference notebook fails at cell {i}"
        for wrong in (w for w in PITFALLS if w.notebook == name):
            tests = [(i, visible_only(c)) for i, c in enumerate(pristine)
                     if is_autograded_test(c) and exercise_key(c) == wrong.exercise]
            answer_index = index_of[wrong.cell]
            replaced = copy.deepcopy(pristine[answer_index])
            replaced.source = wrong.source
            run_cell(runner, replaced, answer_index)
            failed = [(c, e) for (i, c), e in ((t, run_cell(runner, t[1], t[0])) for t in tests) if e]
            label = f"{wrong.cell} ({wrong.why})"
            if not failed:
                problems.append(f"{label}: the visible check of {wrong.exercise} passes")
                continue
            cell, error = failed[0]
            shown = shown_error(cell)
            lines = shown.strip().splitlines()
            if error not in CHECK_ERRORS:
                problems.append(f"{label}: the visible check failed with {error}, not a friendly check")
            if len(lines) > MAX_MESSAGE_LINES:
                problems.append(f"{label}: the message has {len(lines)} lines (at most {MAX_MESSAGE_LINES}):\n{shown}")
            if not says(shown, wrong.names):
                problems.append(f"{label}: the message does not say {wrong.names!r}:\n{shown}")
            assert run_cell(runner, copy.deepcopy(pristine[answer_index]), answer_index) is None
    assert not problems, "\n\n".join(problems)
