"""The two demo notebooks: committed without outputs, quiet under the grader, and with figures that
fit a laptop's output area (848 px: JupyterLab at 1280 px with the file browser open) in a readable font.

Under nbgrader (NBGRADER_EXECUTION set) a demo cell must print its one-line note, build no widget
(no comm to a front end that is not there) and finish quickly.
"""
import os
import time

import nbformat
import pytest
from nbclient import NotebookClient

from matplotlib.text import Text

from lmpolicy.demos.base import GRADER_NOTE
from lmpolicy.demos.kl_estimators import KLEstimatorDemo
from lmpolicy.demos.tilting import TiltingDemo

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


def demo_figures():
    tilting, kl_demo = TiltingDemo(scenario="blind_spot", show_temperature=True), KLEstimatorDemo(x=-1.0)
    tilting.widget, kl_demo.widget
    kl_demo.draw(2000)  # every text the histograms can show, the markers of estimates beyond the range too
    return {"tilting": tilting._figure, "kl curves": kl_demo._curves_figure, "kl histograms": kl_demo._histogram_figure}


def test_figures_fit_a_laptop_and_their_text_is_at_least_12_px():
    # JupyterLab at 1280 px with the file browser open leaves an output area of 848 px
    for name, image in demo_figures().items():
        width, _ = image.canvas.get_width_height()
        assert width <= 848 - 16, f"{name} is {width} px wide"  # room for a vertical scroll bar
        # pixel for pixel, and in a narrower output area shrunk in proportion (not cut off)
        assert image.widget.layout.width == f"{width}px" and image.widget.layout.height == "auto", name
        texts = [text for text in image.figure.findobj(Text) if text.get_visible() and text.get_text()]
        assert len(texts) >= 8, name
        smallest = min(text.get_fontsize() * image.figure.dpi / 72 for text in texts)
        assert smallest >= 12, f"{name}: a {smallest:.1f} px text"


def test_a_figure_too_wide_for_a_laptop_is_refused():
    from lmpolicy.demos.figure_widget import FigureImage

    with pytest.raises(ValueError, match="a demo figure must fit 832 px, got 9.5 in at 96 dpi = 912 px"):
        FigureImage(width=9.5, height=3.0)
