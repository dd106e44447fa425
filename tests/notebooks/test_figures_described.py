"""Every figure a notebook draws (an assignment notebook, or one under notebooks/: the optional study, the demos, the
start page) reaches the student with a text alternative that says its numbers.

A figure is shown by ``lmpolicy.notebook.figure.show`` (an ``<img>`` whose ``alt`` is the description the cell
computes from what it drew) or by ``lmpolicy.tinylm.runs_figure.plot_runs``, never by ``plt.show()`` or the
inline backend, whose ``image/png`` JupyterLab shows with no ``alt``. Notebook 08's first sections (the checkpoint's
mistakes, the temperature panel) are run here as a student runs them; its training runs' figures are read from the
run ``conftest.notebook08_as_a_student`` shares with the execution test.
"""
import re

import pytest

from lmpolicy.tinylm.model import CHECKPOINT_PATH
from tests.lmpolicy.notebook.test_figure import Images

from .conftest import NOTEBOOK08, NOTEBOOK08_GROUP
from .notebook_tools import ROOT, SOURCE_DIR, SOURCE_NOTEBOOKS, execute, read

# what makes a matplotlib figure in a cell, and what shows one with its words
MAKES_A_FIGURE = re.compile(r"\bplt\.(subplots|figure|subplot)\(")
SHOWS_IT_DESCRIBED = re.compile(r"\bshow\(fig,")
# every notebook a student opens: the assignment's, and the course's own under notebooks/
STUDENTS_NOTEBOOKS = [*SOURCE_NOTEBOOKS, *sorted((ROOT / "notebooks").glob("*.ipynb"))]


def alts(cell) -> list[str]:
    """The text alternatives of the pictures a cell's outputs show (``None`` for a picture with none)."""
    found = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "image/png" in data or "image/svg+xml" in data:
            found.append(None)  # JupyterLab renders these with no alt
        if "text/html" in data:
            found += [image.get("alt") for image in Images(data["text/html"]).images]
    return found


@pytest.mark.parametrize("path", STUDENTS_NOTEBOOKS, ids=lambda path: path.stem)
def test_no_figure_is_shown_without_its_words(path):
    for index, cell in enumerate(read(path).cells):
        if cell.cell_type != "code":
            continue
        assert "plt.show(" not in cell.source, f"cell {index}: plt.show() gives the figure no text alternative"
        if MAKES_A_FIGURE.search(cell.source):
            assert SHOWS_IT_DESCRIBED.search(cell.source), f"cell {index} makes a figure and never shows it described"


@pytest.fixture(scope="module")
def first_sections(tmp_path_factory):
    """Notebook 08 up to its temperature panel (section 1 and 2's figures), run in a fresh kernel."""
    nb = read(SOURCE_DIR / f"{NOTEBOOK08}.ipynb")
    last = next(i for i, c in enumerate(nb.cells) if "panel = temperature_panel(" in c.source)
    nb.cells = nb.cells[:last + 1]
    return execute(nb, grader=False, progress_file=tmp_path_factory.mktemp("figures") / "progress.json",
                   timeout=300)


def printed(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.mark.slow
@pytest.mark.skipif(not CHECKPOINT_PATH.exists(), reason="needs the shipped checkpoint")
def test_the_checkpoints_figures_say_the_numbers_the_cells_print(first_sections):
    figures = [c for c in first_sections.cells if c.cell_type == "code" and alts(c)]
    assert len(figures) == 2 and all(len(alts(c)) == 1 and alts(c)[0] for c in figures), [alts(c) for c in figures]
    mistakes, panel = figures
    (words,) = alts(mistakes)
    rows = {}  # the held-out table the cell prints: problems with ..., n, greedy, wrong, ...
    for line in printed(mistakes).splitlines():
        match = re.match(r"(.+?)\s+(\d+)\s+([01]\.\d{3})\s+(\d+)\s", line)
        if match and not match.group(1).endswith(", all"):
            rows[match.group(1)] = (int(match.group(2)), int(match.group(4)))
    assert len(rows) == 4, printed(mistakes)
    assert f"the {sum(wrong for _, wrong in rows.values())} wrong greedy answers to the 1,000 held-out" in words
    for group, (n, _) in rows.items():
        assert re.search(re.escape(group) + r" [01]\.\d{3} \(n = " + str(n) + r"\)", words), (group, words)
    (words,) = alts(panel)
    for line in printed(panel).splitlines()[1:]:  # T, k1 ± se, k3 ± se, exact, tokens
        T, k1, _, _, k3, _, _, exact, _ = line.split()
        assert f"T = {float(T):g}: k1 {k1} ± " in words and f"k3 {k3} ± " in words and f"exact {exact}" in words


@pytest.mark.slow
@pytest.mark.xdist_group(NOTEBOOK08_GROUP)
@pytest.mark.skipif(not CHECKPOINT_PATH.exists(), reason="needs the shipped checkpoint")
def test_the_training_runs_figures_say_where_each_run_ends(notebook08_as_a_student):
    nb, _, figures = notebook08_as_a_student
    plotted = [c for c in nb.cells if c.cell_type == "code" and "plot_runs(" in c.source]
    assert [len(alts(c)) for c in plotted] == [1, 1]
    for cell, runs in zip(plotted, (["main"], ["main", "no leash", "rft", "sft"])):
        (words,) = alts(cell)
        for name in runs:
            h = figures[name]
            assert (f"{h['label']} (" in words and f"ends after {h['answers'][-1]:,.0f} answers at greedy "
                    f"{h['greedy'][-1]:.3f}, sampled {h['sampled'][-1]:.3f}, KL {h['kl'][-1]:.3f} nats") in words, \
                (name, words)
