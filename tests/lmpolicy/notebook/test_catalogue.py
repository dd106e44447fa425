"""lmpolicy.notebook.catalogue: the exercises read from the notebooks; adding one touches its notebook only."""
import shutil
import subprocess
import sys

import nbformat
import pytest

from lmpolicy.notebook import catalogue, progress

SOURCE = catalogue.source_folder()


@pytest.mark.parametrize("key, label", [
    ("ex11_1a", "Exercise 11.1(a)"), ("ex11_10", "Exercise 11.10"), ("task2", "Lab Task 2"),
    ("task1b", "Lab Task 1b"), ("nb02_top_k", "Exercise 02.top-k"), ("nb03_four_reasons", "Exercise 03.four-reasons"),
])
def test_a_label_follows_from_the_key(key, label):
    assert catalogue.label(key) == label


@pytest.mark.parametrize("key", ["softmax", "ex12_1a", "nb2_top_k", "task_2", "nb02_Top"])
def test_a_key_of_no_known_form_is_refused_with_the_forms(key):
    with pytest.raises(ValueError, match=r"none of the known forms \(ex11_<n><part>, task<k>, nb<NN>_<name>\)"):
        catalogue.label(key)


def test_an_exercises_points_are_its_graded_cells_points():
    chapter = catalogue.Chapter.read(SOURCE)
    nb = nbformat.read(SOURCE / "02_temperature.ipynb", as_version=4)
    cells = [c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id", "")
             .startswith("ex11_2c__") and c.metadata["nbgrader"].get("grade")]
    assert len(cells) == 2  # a written derivation and a numerical check
    assert chapter.by_key()["ex11_2c"].points == sum(float(c["points"]) for c in cells)


MIN_P_ANSWER = "def min_p_filter(logits, p_base):\n    ### BEGIN SOLUTION\n    return logits\n    ### END SOLUTION\n"
MIN_P_TESTS = ("from lmpolicy.notebook import checks\nchecks.done(\"nb02_min_p\")\n"
               "### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS\n")


def add_min_p(path, points=2):
    """What a TA writes into notebook 02 to add an exercise: an answer cell and a test cell, nothing else."""
    nb = nbformat.read(path, as_version=4)
    answer = nbformat.v4.new_code_cell(MIN_P_ANSWER, metadata={"nbgrader": {
        "grade": False, "solution": True, "locked": False, "grade_id": "nb02_min_p__answer", "schema_version": 3,
        "task": False}})
    tests = nbformat.v4.new_code_cell(MIN_P_TESTS, metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": "nb02_min_p__tests", "points": points,
        "schema_version": 3, "task": False}})
    nb.cells[-2:-2] = [answer, tests]
    nbformat.write(nb, path)


def check(folder, *names):
    return subprocess.run([sys.executable, "-m", "lmpolicy.notebook.catalogue", "check", "--folder", str(folder), *names],
                          capture_output=True, text=True, timeout=60)


def test_adding_an_exercise_touches_its_notebook_only(tmp_path, monkeypatch):
    folder = tmp_path / "source" / "ch11"
    shutil.copytree(SOURCE, folder)
    before = catalogue.Chapter.read(folder)
    add_min_p(folder / "02_temperature.ipynb")

    found = check(folder, "02_temperature")
    assert found.returncode == 1
    assert "02_temperature: exercise nb02_min_p has no title" in found.stdout
    assert "02_temperature: the header table is out of date: run `python -m lmpolicy.notebook.catalogue write-headers " \
           "02_temperature`" in found.stdout
    assert "02_temperature: the check cell nb02_min_p__tests does not start with its heading: run " \
           "`python -m lmpolicy.notebook.catalogue write-headers 02_temperature`" in found.stdout

    nb = nbformat.read(folder / "02_temperature.ipynb", as_version=4)  # the title, written once
    nb.cells[0].metadata["lmpolicy"]["exercises"]["nb02_min_p"] = "the min-p filter, `min_p_filter`"
    nbformat.write(nb, folder / "02_temperature.ipynb")
    subprocess.run([sys.executable, "-m", "lmpolicy.notebook.catalogue", "write-headers", "--folder", str(folder),
                    "02_temperature"], check=True, capture_output=True, timeout=60)
    assert check(folder, "02_temperature").returncode == 0
    tests = next(c for c in nbformat.read(folder / "02_temperature.ipynb", as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("grade_id") == "nb02_min_p__tests")
    assert tests.source == "# Checks of Exercise 02.min-p: run with Shift+Enter from your answer\n" + MIN_P_TESTS

    header = nbformat.read(folder / "02_temperature.ipynb", as_version=4).cells[0].source
    old_total = sum(e.points for e in before.of("02_temperature"))
    assert f"**{old_total + 2:g} points**" in header
    assert "| Exercise 02.min-p | the min-p filter, `min_p_filter` | 2 (autograded) |" in header
    # the student's side reads it from the same notebook: progress, its table and its summary
    monkeypatch.setattr(progress, "course_root", lambda: tmp_path)
    assert progress.exercise("nb02_min_p").label == "Exercise 02.min-p"
    assert progress.chapter().points == before.points + 2


def test_check_names_a_graded_cell_without_points_and_a_key_of_no_known_form(tmp_path):
    folder = tmp_path / "ch11"
    shutil.copytree(SOURCE, folder)
    add_min_p(folder / "02_temperature.ipynb", points=0)
    nb = nbformat.read(folder / "02_temperature.ipynb", as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "nb02_min_p__answer") \
        .metadata["nbgrader"]["grade_id"] = "minp__answer"
    nbformat.write(nb, folder / "02_temperature.ipynb")
    found = catalogue.problems(folder, ["02_temperature"])
    assert "02_temperature: graded cell nb02_min_p__tests has no points (its cell metadata, nbgrader.points)" in found
    assert any(line.startswith("02_temperature: grade_id 'minp__answer': exercise key 'minp' has none of the "
                               "known forms") for line in found), found


def test_an_exercise_named_for_another_notebook_is_named_as_such(tmp_path):
    folder = tmp_path / "ch11"
    shutil.copytree(SOURCE, folder)
    nb = nbformat.read(folder / "01_policy_softmax.ipynb", as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id", "").startswith("nb01_softmax__"):
            meta["grade_id"] = meta["grade_id"].replace("nb01_", "nb02_")
    nbformat.write(nb, folder / "01_policy_softmax.ipynb")
    found = catalogue.problems(folder, ["01_policy_softmax"])
    assert "01_policy_softmax: exercise nb02_softmax is named for notebook 02; in 01_policy_softmax its key " \
           "starts nb01_" in found


def test_a_check_cells_heading_is_replaced_not_stacked_and_its_code_kept():
    old = ("# Checks of Exercise 11.1(a): run with Shift+Enter from your answer (a click opens the code)\n"
           "from lmpolicy.notebook import checks\n")
    assert catalogue.with_check_heading(old, "ex11_1a") == (
        "# Checks of Exercise 11.1(a): run with Shift+Enter from your answer\n"
        "from lmpolicy.notebook import checks\n")
    assert catalogue.with_check_heading(catalogue.with_check_heading(old, "ex11_1a"), "ex11_1a") == \
        catalogue.with_check_heading(old, "ex11_1a")


def test_pytest_k_selects_a_notebook_and_its_exercises():
    nb = nbformat.read(SOURCE / "02_temperature.ipynb", as_version=4)
    keys = list(dict.fromkeys(c.metadata["nbgrader"]["grade_id"].split("__")[0] for c in nb.cells
                              if c.metadata.get("nbgrader", {}).get("grade")))
    printed = subprocess.run([sys.executable, "-m", "lmpolicy.notebook.catalogue", "pytest-k", "02_temperature"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert printed.split(" or ")[0] == "02_temperature" and sorted(printed.split(" or ")[1:]) == sorted(keys)
