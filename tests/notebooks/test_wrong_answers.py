"""The wrong-answer corpus: each typical wrong answer fails its exercise's tests; the reference passes.

One kernel per notebook: run the source notebook top to bottom, then for each wrong answer run its
replacement cell and the exercise's test cells (they must fail with a friendly check), then the
reference answer cell again and the test cells (they must pass).
"""
import copy

import pytest

from .notebook_tools import (CHECK_ERRORS, NOTEBOOK_NAMES, SOURCE_DIR, client, exercise_key, grade_id,
                             is_autograded_test, is_code_answer, kernel_env, read, run_cell)
from lmpolicy_grader.wrong_answers import WRONG_ANSWERS

CORPUS_NOTEBOOKS = sorted({wrong.notebook for wrong in WRONG_ANSWERS} & set(NOTEBOOK_NAMES))


def autograded_exercises(name):
    return sorted({exercise_key(c) for c in read(SOURCE_DIR / f"{name}.ipynb").cells if is_autograded_test(c)})


AUTOGRADED = [(name, key) for name in NOTEBOOK_NAMES for key in autograded_exercises(name)]


@pytest.mark.parametrize("name,key", AUTOGRADED, ids=[key for _, key in AUTOGRADED])
def test_every_autograded_exercise_has_a_wrong_answer(name, key):
    assert any(w.notebook == name and w.exercise == key for w in WRONG_ANSWERS), \
        f"no typical wrong answer for {key} in lib/lmpolicy_grader/wrong_answers/nb{name[:2]}.py"


@pytest.mark.parametrize("wrong", WRONG_ANSWERS, ids=[f"{w.cell}:{i}" for i, w in enumerate(WRONG_ANSWERS)])
def test_wrong_answers_name_real_answer_cells(wrong):
    if wrong.notebook not in NOTEBOOK_NAMES:
        pytest.skip(f"{wrong.notebook} is not written yet")
    cells = {grade_id(c): c for c in read(SOURCE_DIR / f"{wrong.notebook}.ipynb").cells}
    assert wrong.cell in cells and is_code_answer(cells[wrong.cell]), f"{wrong.cell} is not an answer cell"
    assert wrong.exercise in autograded_exercises(wrong.notebook)
    assert wrong.source.strip() != cells[wrong.cell].source.strip()
    assert "BEGIN SOLUTION" not in wrong.source and wrong.why.strip()


@pytest.mark.slow
@pytest.mark.parametrize("name", CORPUS_NOTEBOOKS)
def test_hidden_tests_fail_each_wrong_answer_and_pass_the_reference(name, tmp_path):
    nb = read(SOURCE_DIR / f"{name}.ipynb")  # the runner stores every executed cell back into nb.cells
    pristine = copy.deepcopy(nb.cells)
    index_of = {grade_id(cell): i for i, cell in enumerate(nb.cells) if grade_id(cell)}
    runner = client(nb)
    problems = []
    with runner.setup_kernel(env=kernel_env(grader=True, progress_file=tmp_path / "progress.json")):
        for i, cell in enumerate(copy.deepcopy(pristine)):
            if cell.cell_type == "code":
                assert run_cell(runner, cell, i) is None, f"{name}: the reference notebook fails at cell {i}"
        for wrong in (w for w in WRONG_ANSWERS if w.notebook == name):
            tests = [(i, c) for i, c in enumerate(pristine) if is_autograded_test(c) and exercise_key(c) == wrong.exercise]
            answer_index = index_of[wrong.cell]
            replaced = copy.deepcopy(pristine[answer_index])
            replaced.source = wrong.source
            run_cell(runner, replaced, answer_index)  # a wrong answer may raise by itself; the tests decide
            errors = [run_cell(runner, copy.deepcopy(c), i) for i, c in tests]
            if not any(errors):
                problems.append(f"{wrong.cell} ({wrong.why}): the tests of {wrong.exercise} pass")
            elif not all(e is None or e in CHECK_ERRORS for e in errors):
                problems.append(f"{wrong.cell} ({wrong.why}): a test cell failed with {errors}, not a friendly check")
            assert run_cell(runner, copy.deepcopy(pristine[answer_index]), answer_index) is None
            restored = [run_cell(runner, copy.deepcopy(c), i) for i, c in tests]
            assert not any(restored), f"{name}: the reference answer of {wrong.exercise} fails after {wrong.cell}"
    assert not problems, "\n".join(problems)
