"""The two demo notebooks: committed without outputs, and quiet under the grader.

Under nbgrader (NBGRADER_EXECUTION set) a demo cell must print its one-line note, build no widget
(no comm to a front end that is not there) and finish quickly.
"""
import os
import time

import nbformat
import pytest
from nbclient import NotebookClient

from lmpolicy.demos.base import GRADER_NOTE

DEMO_NOTEBOOKS = ("demo_tilting", "demo_kl_estimators")


@pytest.mark.parametrize("name", DEMO_NOTEBOOKS)
def test_committed_without_outputs(repo_root, name):
    notebook = nbformat.read(repo_root / "notebooks" / f"{name}.ipynb", as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name} has outputs"


@pytest.mark.parametrize("name", DEMO_NOTEBOOKS)
def test_under_the_grader_the_demo_cell_only_prints_a_note(repo_root, name, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    notebook = nbformat.read(repo_root / "notebooks" / f"{name}.ipynb", as_version=4)
    start = time.perf_counter()
    NotebookClient(notebook, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(repo_root / "notebooks")}}).execute(
                       env=dict(os.environ))
    elapsed = time.perf_counter() - start
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    texts = [output.get("text", "") for output in outputs]
    assert [text.strip() for text in texts] == [GRADER_NOTE], outputs
    assert not any("application/vnd.jupyter.widget-view+json" in output.get("data", {}) for output in outputs)
    assert not notebook.metadata.get("widgets"), "a widget was built under the grader"
    assert elapsed < 30, f"{name} took {elapsed:.1f} s under the grader"
