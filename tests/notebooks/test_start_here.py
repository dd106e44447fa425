"""notebooks/00_start_here.ipynb runs and shows the student's progress table."""
import json

import pytest

from lmpolicy import progress

from .notebook_tools import ROOT, execute, read

START_HERE = ROOT / "notebooks" / "00_start_here.ipynb"


def test_start_here_is_committed_without_outputs():
    for cell in read(START_HERE).cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.slow
def test_start_here_shows_what_is_done_and_what_is_not(tmp_path):
    progress_file = tmp_path / "progress.json"
    progress_file.write_text(json.dumps({"version": 1, "done": {"ex11_3b": "2026-01-01T00:00:00+00:00"}}))
    nb = execute(read(START_HERE), grader=False, progress_file=progress_file)
    html = "".join(output.get("data", {}).get("text/html", "") for cell in nb.cells if cell.cell_type == "code"
                   for output in cell.outputs)
    assert html.count("<tr>") == len(progress.EXERCISES) + 1
    assert "<td>11.3(b)</td><td>the token-level gradient, with and without baseline</td><td>04_two_mdp_views</td><td>done</td>" in html
    assert html.count("<td>done</td>") == 1
