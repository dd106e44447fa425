"""A check cell copied before an answer's rename (name_advice.RENAMED) still checks it: in a real kernel, notebook 02
as older copies hold it judges the student's value as the current check cell does; any other missing name of a
notebook's module says what the module holds."""
import os
import re

import nbformat
import pytest

from lmpolicy.exercises import nb02, registry
from lmpolicy.notebook import name_advice, progress
from lmpolicy.per_student import variants
from tests.lmpolicy.notebook.test_checks import Kernel
from tests.verdicts import one_line

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STUDENT = "alice"
OLD_CHECK = "from lmpolicy.exercises import nb02\nnb02.TEMPERATURE_095.check(temperature_095)"


def old_copy(path, answer: str) -> tuple:
    """Release notebook 02 with Exercise 11.2(b)'s answer and check cells as an older copy writes them, the answer
    ``answer``; returns the two cells."""
    notebook = nbformat.read(progress.release_dir() / "02_temperature.ipynb", as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in notebook.cells}
    cells["ex11_2b__answer"].source = answer
    cells["ex11_2b__tests"].source = OLD_CHECK
    nbformat.write(notebook, path)
    return cells["ex11_2b__answer"], cells["ex11_2b__tests"]


def run_old_cells(tmp_path, temperature: float) -> tuple[str, dict | None]:
    """The older copy's answer ``temperature_095 = temperature`` and its check cell, run in a kernel of that
    notebook; (what the check cell printed, its error)."""
    notebook = tmp_path / "02_temperature.ipynb"
    answer, check = old_copy(notebook, f"temperature_095 = {temperature!r}\n")
    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(tmp_path / "progress.json"), JPY_SESSION_NAME=str(notebook),
               LMPOLICY_STUDENT_ID=STUDENT)
    env.pop("NBGRADER_EXECUTION", None)
    kernel = Kernel(env)
    try:
        kernel.run("from lmpolicy.notebook import checks")
        kernel.run(answer.source, cell_id=answer.id)
        return kernel.run(check.source, cell_id=check.id)
    finally:
        kernel.close()


def test_an_old_check_cell_passes_the_students_right_answer(tmp_path):
    right = variants.answer("ex11_2b", STUDENT)["temperature_at_target"]
    printed, error = run_old_cells(tmp_path, right)
    assert error is None, ANSI.sub("", "\n".join(error["traceback"]))
    assert printed.strip() == "\u2713 Exercise 11.2(b) passed the visible checks", printed


def test_an_old_check_cell_fails_a_wrong_answer_as_the_current_one_does(tmp_path):
    printed, error = run_old_cells(tmp_path, 0.2)
    assert error is not None and error["ename"] == "CheckFailed", (printed, error)
    shown = one_line(ANSI.sub("", "\n".join(error["traceback"])))
    assert "at temperature_at_target = 0.2 the top token has probability" in shown, shown


def test_every_renamed_answer_renames_its_exercise():
    for older, current in name_advice.RENAMED.items():
        holding = [module for module in registry.notebook_modules().values() if hasattr(module, current.upper())]
        assert len(holding) == 1, (current, holding)  # the answer's exercise, named after it
        assert getattr(holding[0], older.upper()) is getattr(holding[0], current.upper())
    assert nb02.TEMPERATURE_095 is nb02.TEMPERATURE_AT_TARGET


@pytest.mark.parametrize("name", sorted(registry.notebook_modules()))
def test_a_missing_name_of_a_notebooks_module_says_what_it_holds(name):
    module = registry.notebook_modules()[name]
    declared = [attribute for attribute in dir(module)
                if any(getattr(module, attribute) is exercise for exercise in module.EXERCISES)]
    with pytest.raises(AttributeError) as raised:
        module.NO_SUCH_EXERCISE
    said = str(raised.value)
    assert said.startswith(f"module 'lmpolicy.exercises.{name}' has no attribute 'NO_SUCH_EXERCISE': its exercises "
                           "are "), said
    assert sorted(said.split(" are ", 1)[1].split(", ")) == sorted(declared), said
    assert not hasattr(module, "temperature_095")  # only an exercise's name is renamed, in capitals
