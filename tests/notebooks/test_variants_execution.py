"""Per-student variants in the real notebooks: a source notebook run as student A and as student B computes
different answers, each passes its own visible checks, and A's numbers (or the chapter's) typed in by B are
flagged by B's visible checks without showing B's value."""
from __future__ import annotations

import copy
import json
import re

import nbformat
import pytest

from lmpolicy.per_student import variants

from .notebook_tools import (HIDDEN_TESTS, visible_only, SOURCE_DIR, client, exercise_key, grade_id, is_autograded_test, kernel_env,
                             read, run_cell)

pytestmark = pytest.mark.slow

# The varying exercises of each notebook, and what their answer cells set (the variants' answer names)
NOTEBOOKS = {"01_policy_softmax": ("ex11_1a",), "02_temperature": ("ex11_2b",),
             "05_tilted_optimum": ("ex11_5b", "ex11_8b", "ex11_9a", "ex11_9c"),
             "06_kl_estimators": ("ex11_4c", "ex11_4d", "ex11_9d")}
STUDENTS = ("student-a", "student-b")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def numeric_names(key):
    return [name for name, value in variants.answer(key, None).items() if not isinstance(value, str)]


def error_text(cell) -> str:
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    return ANSI_ESCAPE.sub("", "\n".join(errors[-1].get("traceback", []))) if errors else ""


def env_for(student, tmp_path):
    env = kernel_env(grader=False, progress_file=tmp_path / f"progress-{student}.json")
    for name in (variants.HUB_USER_VARIABLE, variants.VARIANTS_OFF_VARIABLE):
        env.pop(name, None)
    env[variants.STUDENT_ID_VARIABLE] = student
    return env


def read_answers(runner, index, keys) -> dict:
    names = [name for key in keys for name in numeric_names(key)]
    cell = nbformat.v4.new_code_cell("import json\nprint(json.dumps({n: float(globals()[n]) for n in %r}))" % names)
    assert run_cell(runner, cell, index) is None
    return json.loads(cell.outputs[0]["text"])


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_two_students_get_their_own_answers_which_pass_their_own_visible_checks_and_fail_each_other(name, tmp_path):
    keys = NOTEBOOKS[name]
    pristine = read(SOURCE_DIR / f"{name}.ipynb").cells
    tests = [(i, visible_only(c)) for i, c in enumerate(pristine) if is_autograded_test(c) and exercise_key(c) in keys]
    answer_cells = [(i, c) for i, c in enumerate(pristine)
                    if grade_id(c) and exercise_key(c) in keys and c.metadata.get("nbgrader", {}).get("solution")
                    and c.cell_type == "code"]
    computed, problems = {}, []
    for student in STUDENTS:  # run each student's notebook, with the visible checks only, as the release has them
        nb = read(SOURCE_DIR / f"{name}.ipynb")
        runner = client(nb)
        with runner.setup_kernel(env=env_for(student, tmp_path)):
            for i, cell in enumerate(copy.deepcopy(pristine)):
                if cell.cell_type != "code":
                    continue
                cell = visible_only(cell) if is_autograded_test(cell) else cell
                error = run_cell(runner, cell, i)
                assert error is None, f"{name} as {student}: cell {i} fails ({error}):\n{error_text(cell)}"
            computed[student] = read_answers(runner, len(pristine) - 1, keys)
            # the other students' numbers and the chapter's, typed into this student's answer cells
            for other in [s for s in STUDENTS if s != student] + [None]:
                for key in keys:
                    given = variants.answer(key, other)
                    typed = "\n".join(f"{n} = {given[n]!r}" for n in numeric_names(key))
                    last_answer = max(i for i, c in answer_cells if exercise_key(c) == key)
                    cell = nbformat.v4.new_code_cell(typed)
                    assert run_cell(runner, cell, last_answer) is None
                    for i, test in tests:
                        if exercise_key(test) != key:
                            continue
                        ran = copy.deepcopy(test)
                        error = run_cell(runner, ran, i)
                        shown = error_text(ran)
                        who = other or "the chapter"
                        if error is None:
                            problems.append(f"{name} as {student}: {who}'s numbers of {key} pass the visible check")
                        elif other is None and "this is the chapter's value" not in shown:
                            problems.append(f"{name} as {student}: the chapter's numbers of {key} are not named:\n{shown}")
                        mine = variants.answer(key, student)
                        for n in numeric_names(key):
                            if f"{mine[n]:.6g}" in shown:
                                problems.append(f"{name} as {student}: the check shows the right value of {n}:\n{shown}")
    first, second = (computed[s] for s in STUDENTS)
    for student in STUDENTS:
        for key in keys:
            for n in numeric_names(key):
                assert computed[student][n] == pytest.approx(variants.answer(key, student)[n], abs=0.05, rel=0.05), \
                    (student, n)
    assert all(first[n] != second[n] for n in first), "the two students' notebooks computed the same answers"
    assert not problems, "\n".join(problems)
