"""Every source notebook runs top to bottom in a fresh kernel, as a student runs it and under the grader."""
import json

import pytest

from .conftest import NOTEBOOK08, NOTEBOOK08_GROUP
from .notebook_tools import GRADER_CELL_TIMEOUT, NOTEBOOK_NAMES, SOURCE_DIR, STUDENT_CELL_TIMEOUT, execute, read

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not NOTEBOOK_NAMES, reason="no source notebooks yet")]


# notebook 08's student run is made once and shared with its figures test (conftest.py)
AS_A_STUDENT = [pytest.param(name, marks=pytest.mark.xdist_group(NOTEBOOK08_GROUP)) if name == NOTEBOOK08 else name
                for name in NOTEBOOK_NAMES]


@pytest.mark.parametrize("name", AS_A_STUDENT)
def test_source_notebook_runs_as_a_student_runs_it(name, tmp_path, request):
    if name == NOTEBOOK08:
        _, progress_file, _ = request.getfixturevalue("notebook08_as_a_student")
    else:
        progress_file = tmp_path / "progress.json"
        execute(read(SOURCE_DIR / f"{name}.ipynb"), grader=False, progress_file=progress_file,
                timeout=STUDENT_CELL_TIMEOUT)
    if 'checks.done("' in (SOURCE_DIR / f"{name}.ipynb").read_text():
        assert json.loads(progress_file.read_text())["done"], "passing visible checks must record progress"


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_source_notebook_runs_under_the_grader_within_the_cell_limit(name, tmp_path):
    progress_file = tmp_path / "progress.json"
    execute(read(SOURCE_DIR / f"{name}.ipynb"), grader=True, progress_file=progress_file,
            timeout=GRADER_CELL_TIMEOUT)
    assert not progress_file.exists(), "nothing may be written to the progress file under the grader"
