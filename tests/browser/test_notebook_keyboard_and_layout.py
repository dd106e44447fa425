"""The released notebooks as a student meets them in JupyterLab (Chromium, 1280x800, the file browser open):

- ArrowDown steps through every cell of notebook 02 in order, the check cells included, in command mode, and from
  the last line of an answer in edit mode; each check cell shows its code, a heading and one call;
- no display equation of notebook 05 is wider than its cell.

Screenshots are saved under test-artifacts/keyboard-and-layout/.
"""
import re
import time

import nbformat
import pytest

from tests.browser.conftest import LAPTOP, emptied
from tests.browser.notebook_page import active_cell, cell, cell_index, open_in_lab, select

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

CHECK_LINES = 3  # the heading, the import, the call


@pytest.fixture(scope="module")
def shots(artifacts_dir):
    return emptied(artifacts_dir / "keyboard-and-layout")


def check_cells(notebook: nbformat.NotebookNode) -> list[int]:
    return [i for i, c in enumerate(notebook.cells) if c.cell_type == "code"
            and c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]


def edit_mode(page) -> bool:
    return page.locator(".jp-Notebook.jp-mod-editMode").count() == 1


def press_down(page) -> None:
    """ArrowDown, then wait until JupyterLab has moved the active cell or the cursor (one frame is enough; two to
    be safe on a busy machine)."""
    page.keyboard.press("ArrowDown")
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def test_arrow_down_reaches_every_check_cell_and_each_shows_its_three_lines(lab_server, chromium, student_copy,
                                                                           repo_root, shots):
    from playwright.sync_api import expect

    path = student_copy / "02_temperature.ipynb"
    notebook = nbformat.read(path, as_version=4)
    checks = check_cells(notebook)
    assert len(checks) == 5, checks
    page = chromium.new_page(viewport=LAPTOP)
    page.set_default_timeout(60_000)
    try:
        open_in_lab(page, lab_server, str(path.relative_to(repo_root)))
        # command mode: from the first cell, one cell per ArrowDown, none skipped
        select(page, 0, step_down=False)
        visited = [active_cell(page)]
        for _ in range(len(notebook.cells) - 1):
            press_down(page)
            visited.append(active_cell(page))
        assert visited == list(range(len(notebook.cells))), f"ArrowDown went {visited}"
        assert not edit_mode(page)

        # each check cell shows its code, as many lines as the released cell has
        for index in checks:
            lines = notebook.cells[index].source.splitlines()
            assert len(lines) == CHECK_LINES and lines[0].startswith("# Checks of "), lines
            check = cell(page, index)
            check.scroll_into_view_if_needed()
            assert check.locator(".jp-InputPlaceholder").count() == 0, f"cell {index} is collapsed"
            # the editor draws its lines once the cell is in view
            expect(check.locator(".cm-content")).to_contain_text(lines[-1])
            shown = [line.strip("\n") for line in check.locator(".cm-content .cm-line").all_inner_texts()]
            while shown and not shown[-1]:  # the source's final newline: an empty last line
                shown.pop()
            assert shown == lines, f"check cell {index} shows {shown}"

        # edit mode, from the last line of Exercise 11.2(b)'s answer: down through the hint into the check's code
        answer, check = cell_index(path, "ex11_2b__answer"), cell_index(path, "ex11_2b__tests")
        select(page, answer, step_down=False)
        page.keyboard.press("Enter")
        page.keyboard.press("Control+End")
        assert edit_mode(page) and active_cell(page) == answer
        path_taken = [answer]
        for _ in range(60):  # the hint's source lines between, one ArrowDown each
            press_down(page)
            if active_cell(page) != path_taken[-1]:
                path_taken.append(active_cell(page))
            if active_cell(page) >= check:
                break
        assert path_taken == list(range(answer, check + 1)), f"ArrowDown in edit mode went {path_taken}"
        assert edit_mode(page), "ArrowDown reached the check cell but left edit mode"
        focused = page.evaluate("() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')]"
                                ".indexOf(document.activeElement.closest('.jp-Cell'))")
        assert focused == check, f"the cursor is in cell {focused}, not in the check cell {check}"
        page.screenshot(path=str(shots / "1-edit-mode-at-the-check.png"))
    except Exception:
        page.screenshot(path=str(shots / "arrow-down-failed.png"))
        raise
    finally:
        page.close()


DISPLAY_MATH = re.compile(r"\$\$.+?\$\$", re.S)
MEASURE = """() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].flatMap((cell, index) =>
    [...cell.querySelectorAll('.jp-RenderedMarkdown mjx-container[display="true"]')].map(container => ({
        index,
        math: (container.querySelector('mjx-math') || container).getBoundingClientRect().width,
        cell: cell.querySelector('.jp-RenderedMarkdown').clientWidth,
        text: (container.querySelector('mjx-assistive-mml') || container).textContent.slice(0, 50),
    })))"""


def test_no_display_equation_of_notebook_05_is_wider_than_its_cell(lab_server, chromium, student_copy, repo_root,
                                                                  shots):
    path = student_copy / "05_tilted_optimum.ipynb"
    notebook = nbformat.read(path, as_version=4)
    expected = sum(len(DISPLAY_MATH.findall(c.source)) for c in notebook.cells if c.cell_type == "markdown")
    assert expected >= 9, expected
    started = time.monotonic()
    page = chromium.new_page(viewport=LAPTOP)
    page.set_default_timeout(60_000)
    try:
        page.goto(lab_server.url(f"/lab/tree/{path.relative_to(repo_root)}") + "&reset")
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=120_000)
        assert page.locator(".jp-DirListing").is_visible(), "the file browser is not open"
        # every cell rendered (JupyterLab skips the rendering of cells out of view), then MathJax's typesetting
        page.add_style_tag(content=".jp-Notebook * { content-visibility: visible !important; }")
        page.wait_for_function(f"() => document.querySelectorAll("
                               f"'.jp-RenderedMarkdown mjx-container[display=\"true\"] mjx-math').length >= {expected}",
                               timeout=120_000)
        shown = page.evaluate(MEASURE)
        assert len(shown) == expected, shown
        wide = [equation for equation in shown if equation["math"] > equation["cell"] + 0.5]
        widest = max(shown, key=lambda equation: equation["math"] / equation["cell"])
        cell(page, widest["index"]).scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "2-notebook-05-widest-equation.png"))
        assert not wide, f"display equations wider than their cell: {wide}"
    finally:
        page.close()
    print(f"notebook 05's {expected} display equations measured in {time.monotonic() - started:.1f} s")
