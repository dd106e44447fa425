"""lmpolicy_grader.completeness: what `make check-notebook` says first, one line per thing an exercise lacks."""
from __future__ import annotations

import shutil
import subprocess
import sys

import nbformat

from lmpolicy.notebook import catalogue
from lmpolicy_grader import completeness
from lmpolicy_grader.corpus import wrong_answers, written_answers

NB = "01_policy_softmax"


def _copy(tmp_path):
    """The course's source folder copied (a notebook's header counts the chapter's notebooks)."""
    for path in catalogue.source_folder().glob("*.ipynb"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / f"{NB}.ipynb"


def _edit_cell(path, grade_id, edit):
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    cell.source = edit(cell.source)
    nbformat.write(notebook, path)


def test_a_complete_notebook_has_nothing_missing_and_the_command_says_so():
    assert completeness.problems(NB) == []
    done = subprocess.run([sys.executable, "-m", "lmpolicy_grader.completeness", NB], capture_output=True, text=True)
    assert done.returncode == 0 and "every exercise is complete" in done.stdout


def test_a_check_cell_with_its_checks_written_out_is_named_with_the_line_count(tmp_path):
    path = _copy(tmp_path)
    _edit_cell(path, "nb01_softmax__tests",
               lambda source: source.replace("nb01.SOFTMAX.check(softmax)",
                                             "import torch\nprobs = softmax(torch.zeros(3))\nassert probs.sum() == 1\n"
                                             "nb01.SOFTMAX.check(softmax)"))
    found = completeness.problems(NB, tmp_path)
    assert found == [f"{NB} nb01_softmax__tests: the visible part has 6 lines; it is its heading, "
                     "`from lmpolicy.exercises import nb01` and `nb01.<EXERCISE>.check(<the student's names>)`"]


def test_a_check_cell_calling_another_exercises_declaration_or_no_hidden_test_is_named(tmp_path):
    path = _copy(tmp_path)
    _edit_cell(path, "nb01_softmax__tests", lambda source: source.replace("nb01.SOFTMAX.check", "nb01.SEQUENCE_LOGPROB.check")
               .replace("hidden.softmax(softmax)", "hidden.no_such_test(softmax)"))
    found = completeness.problems(NB, tmp_path)
    assert f"{NB} nb01_softmax__tests: nb01.SEQUENCE_LOGPROB is not the declaration of nb01_softmax in " \
           "lmpolicy.exercises.nb01" in found
    assert f"{NB} nb01_softmax__tests: lmpolicy_grader.hidden_tests.nb01 has no function no_such_test" in found
    assert len(found) == 2, found


def test_an_exercise_without_typical_wrong_answers_or_example_written_answers_is_named(monkeypatch):
    monkeypatch.setattr(completeness, "WRONG_ANSWERS",
                        [answer for answer in wrong_answers.WRONG_ANSWERS if answer.exercise != "ex11_1a"])
    monkeypatch.setattr(completeness, "WRITTEN_ANSWERS",
                        [answer for answer in written_answers.WRITTEN_ANSWERS if answer.cell != "ex11_1b__manual"])
    assert completeness.problems(NB) == [
        f"{NB} ex11_1a: no typical wrong answer of kind pitfall in lib/lmpolicy_grader/corpus/wrong_answers/nb01.py",
        f"{NB} ex11_1b__manual: no example written answers (good, partial, wrong) in "
        "lib/lmpolicy_grader/corpus/written_answers.py"]


def test_a_notebook_without_a_module_of_declarations_is_named_first(tmp_path):
    shutil.copy(catalogue.source_folder() / f"{NB}.ipynb", tmp_path / "09_min_p.ipynb")
    found = completeness.problems("09_min_p", tmp_path)
    assert "09_min_p: no module lib/lmpolicy/exercises/nb09.py declaring its exercises" in found
