"""notebooks/kl_placement.ipynb: committed without outputs, and runs top to bottom in its quick mode."""
import re

import pytest

from .notebook_tools import ROOT, execute, read
from .test_figures_described import alts

NOTEBOOK = ROOT / "notebooks" / "kl_placement.ipynb"


def test_committed_without_outputs():
    for cell in read(NOTEBOOK).cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.slow
def test_runs_top_to_bottom_in_quick_mode_and_draws_its_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("LMPOLICY_QUICK", "1")
    nb = execute(read(NOTEBOOK), grader=False, progress_file=tmp_path / "progress.json", timeout=300)
    outputs = [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    pictures = [alt for cell in nb.cells if cell.cell_type == "code" for alt in alts(cell)]
    # the one-position check, the runs over updates, the reward-KL plane: each with words that say its numbers
    assert len(pictures) == 3 and all(pictures), pictures
    assert all(re.search(r"\d\.\d{3}", alt) for alt in pictures[1:]), pictures
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "quick mode" in text
    for placement in ("k1-reward", "k1-loss", "k2-loss", "k3-loss", "k3-reward"):
        assert placement in text  # the table of where each run ended
