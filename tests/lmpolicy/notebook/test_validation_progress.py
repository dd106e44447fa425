"""What Validate is doing while it runs (lmpolicy.notebook.validation_progress): the validation's subprocess reports
each code cell as it starts, the server reads the reports, and the lab extension that shows them is served fresh
wherever a student's or a hub's server runs. The page's side is driven in Chromium by
tests/browser/test_first_hour.py::test_the_lab_answers_while_validate_runs_and_says_which_cell_runs."""
import hashlib
import json
import shutil
import subprocess
import sys

import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

from lmpolicy.notebook.validation_progress import LABEXTENSIONS, PREFIX, Validation

pytestmark = pytest.mark.slow
NOTEBOOK = "01_policy_softmax.ipynb"


@pytest.fixture(scope="module")
def reported(tmp_path_factory, repo_root):
    """The subprocess of the Validate button run on notebook 01 as released: its progress lines and its answer."""
    root = tmp_path_factory.mktemp("validate")
    (root / "ch11").mkdir()
    shutil.copy(repo_root / "release" / "ch11" / NOTEBOOK, root / "ch11")
    shutil.copy(repo_root / "nbgrader_config.py", root)
    printed = subprocess.run([sys.executable, "-m", "lmpolicy.notebook.validator", str(root), f"ch11/{NOTEBOOK}"],
                             cwd=root, capture_output=True, text=True, check=True).stdout.splitlines()
    progress = [json.loads(line[len(PREFIX):]) for line in printed if line.startswith(PREFIX)]
    nb = nbformat.read(root / "ch11" / NOTEBOOK, as_version=4)
    return progress, json.loads(printed[-1]), nb


def test_each_code_cell_is_reported_once_in_order_as_it_starts(reported):
    progress, answer, nb = reported
    code_cells = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert progress[0] == {"cell": 0, "of": len(code_cells), "what": "a fresh kernel started"}
    assert [p["cell"] for p in progress[1:]] == list(range(1, len(code_cells) + 1))
    assert {p["of"] for p in progress} == {len(code_cells)}
    assert answer["success"] is True and answer["value"]["failed"]  # the release's answers are not written


def test_a_graded_cell_is_named_by_its_exercise_and_any_other_by_its_section_in_plain_words(reported):
    progress, _, nb = reported
    code_cells = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    named = {(c.metadata.get("nbgrader") or {}).get("grade_id"): p["what"] for c, p in zip(code_cells, progress[1:])}
    assert named["nb01_softmax__answer"] == "Exercise 01.softmax, the answer cell"
    assert named["nb01_softmax__tests"] == "Exercise 01.softmax, the check cell"
    assert named["ex11_1a__tests"] == "Exercise 11.1(a), the check cell"
    plain = [p["what"] for c, p in zip(code_cells, progress[1:]) if "nbgrader" not in c.metadata]
    assert plain and all(what.startswith("in \u201c") and not set("$`*\\") & set(what) for what in plain), plain


def test_the_server_reads_progress_lines_and_nothing_else():
    running = Validation("ch11/01.ipynb")
    assert running.as_reply() == {"path": "ch11/01.ipynb", "cell": 0, "of": 0, "what": "starting a kernel",
                                  "running": True, "seconds": 0}
    assert not running.read('{"success": true}')
    assert not running.read(PREFIX + "not json")
    assert not running.read(PREFIX + '{"cell": 3}')  # no "of", no "what"
    assert running.read(PREFIX + '{"cell": 3, "of": 15, "what": "Exercise 11.1(a), the check cell"}')
    assert (running.cell, running.of, running.what) == (3, 15, "Exercise 11.1(a), the check cell")


def test_the_lab_extension_is_one_script_named_by_its_content():
    """The script's name holds its content's hash: JupyterLab serves an extension's static files as never changing,
    so a browser would keep an edited script under an unchanged name. Rename it as this test says after an edit."""
    (extension,) = LABEXTENSIONS.iterdir()
    build = json.loads((extension / "package.json").read_text())["jupyterlab"]["_build"]
    (script,) = (extension / "static").iterdir()
    named = f"static/remoteEntry.{hashlib.sha256(script.read_bytes()).hexdigest()[:16]}.js"
    assert (f"static/{script.name}", build["load"]) == (named, named), f"name the script {named}, and load it so"
    assert build["extension"] == "./extension"


@pytest.mark.parametrize("role", ["jupyter-config/student", "deploy/singleuser/student"])
def test_a_students_server_loads_the_lab_extension_and_the_progress_handler(repo_root, role):
    config = PyFileConfigLoader("jupyter_server_config.py", path=str(repo_root / role)).load_config()
    assert str(LABEXTENSIONS) in config.LabApp.extra_labextensions_path
    extensions = json.loads((repo_root / role / "jupyter_server_config.json").read_text())
    assert extensions["ServerApp"]["jpserver_extensions"]["lmpolicy.notebook.validator"] is True
