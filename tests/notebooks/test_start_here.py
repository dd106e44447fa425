"""notebooks/00_start_here.ipynb runs, links to the student's copy and shows the progress table."""
import json
import re
import shutil

import nbformat
import pytest

from lmpolicy import progress

from .notebook_tools import ROOT, RELEASE_DIR, execute, grade_id, read

START_HERE = ROOT / "notebooks" / "00_start_here.ipynb"


def test_start_here_is_committed_without_outputs():
    for cell in read(START_HERE).cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_start_here_links_every_notebook_of_the_students_copy():
    text = "\n".join(cell.source for cell in read(START_HERE).cells if cell.cell_type == "markdown")
    links = re.findall(r"\]\((\.\./work/ch11/[^)]+\.ipynb)\)", text)
    assert sorted(links) == [f"../work/ch11/{path.name}" for path in sorted(RELEASE_DIR.glob("*.ipynb"))]
    assert "copy that folder" not in text.lower()


@pytest.mark.slow
def test_start_here_shows_each_graded_item_with_its_state_and_the_totals(tmp_path, monkeypatch):
    copy = tmp_path / "work" / "ch11"
    shutil.copytree(RELEASE_DIR, copy)
    monkeypatch.setenv("LMPOLICY_WORK_DIR", str(copy))
    # the student wrote 11.1(b) and ran the visible check of 11.3(b), which passed
    nb01 = nbformat.read(copy / "01_policy_softmax.ipynb", as_version=4)
    next(c for c in nb01.cells if grade_id(c) == "ex11_1b__manual").source = "By the chain rule, ..."
    nbformat.write(nb01, copy / "01_policy_softmax.ipynb")
    check = next(c for c in read(copy / "04_two_mdp_views.ipynb").cells if grade_id(c) == "ex11_3b__tests")
    failing = next(c for c in read(copy / "02_temperature.ipynb").cells if grade_id(c) == "task2__tests")
    progress_file = tmp_path / "progress.json"
    progress_file.write_text(json.dumps({"version": 2, "done": {"ex11_3b": "2026-01-01T00:00:00+00:00"}, "checks": {
        "ex11_3b": {progress.fingerprint(check.source): {"state": "passed", "at": "2026-01-01T00:00:00+00:00"}},
        "task2": {progress.fingerprint(failing.source): {"state": "failing", "at": "2026-01-01T00:00:00+00:00", "reason": "returned NaN"}}}}))

    nb = execute(read(START_HERE), grader=False, progress_file=progress_file)
    html = "".join(output.get("data", {}).get("text/html", "") for cell in nb.cells if cell.cell_type == "code"
                   for output in cell.outputs).replace(' style="text-align:left"', "")
    grade_cells = sum(1 for path in RELEASE_DIR.glob("*.ipynb") for c in read(path).cells
                      if c.metadata.get("nbgrader", {}).get("grade"))
    assert html.count("<tr>") + html.count("<tr ") == 1 + grade_cells + len(progress.NOTEBOOKS) + 1  # header, items, totals
    assert ("<td>11.3(b)</td><td>the token-level gradient, with and without baseline</td><td>visible check</td>"
            "<td>3</td><td>passed</td>") in html
    assert "<td>11.1(b)</td><td>the log-prob is a sum (proof)</td><td>written answer</td><td>2</td><td>answered</td>" in html
    assert "<td>Lab Task 2</td><td>sample_with_temperature</td><td>visible check</td><td>3</td><td>failing: returned NaN</td>" in html
    assert html.count("<td>passed</td>") == 1 and html.count("<td>answered</td>") == 1
    assert "<td>notebook 01_policy_softmax</td><td></td><td>1 of 3 items done</td><td>2 of 7</td>" in html
    assert re.search(r"<td>course total</td><td></td><td>2 of \d+ items done</td><td>5 of \d+</td>", html)
