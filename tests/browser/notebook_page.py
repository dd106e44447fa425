"""What a test does to a notebook open in JupyterLab, as a student would: open it, select and run a cell, Run All,
type code into a cell, read a cell's output, save; and the waits each of these needs on a busy 2-core machine.

Each wait names the sign it waits for: a prompt's execution count, the status bar's kernel state, a clean tab.
"""
import re

import nbformat
import pytest

RUN_TIMEOUT_MS = 120_000  # kernel start, torch's import and a notebook's cells on a busy 2-core machine


def wait_for_kernel_idle(page, timeout_ms: int) -> None:
    """Wait until the status bar says the notebook's kernel is connected and idle ("Python 3 (ipykernel) | Idle").

    The toolbar's execution indicator is no such sign: it reads "idle" from the moment the notebook opens,
    before any kernel exists, and a cell run then is dropped without a word (CI saw an empty output).
    """
    page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).wait_for(timeout=timeout_ms)


def wait_until_run(page, timeout_ms: int) -> None:
    """Wait until no cell of the notebook is queued or running ([*]) and its kernel is idle."""
    from playwright.sync_api import expect

    expect(page.locator(".jp-Notebook .jp-InputPrompt", has_text="[*]")).to_have_count(0, timeout=timeout_ms)
    wait_for_kernel_idle(page, timeout_ms)


def shown_text(locator) -> str:
    """The text a locator's element shows, the cells out of view included.

    JupyterLab's default windowing mode skips the rendering of the cells out of view (CSS content-visibility),
    and the rendered text (innerText) of a skipped cell is empty: render every cell for the read.
    """
    return locator.evaluate("""element => {
        const everything = document.createElement("style");
        everything.textContent = ".jp-Notebook * { content-visibility: visible !important; }";
        document.head.append(everything);
        try { return element.innerText; } finally { everything.remove(); }
    }""")


def save_notebook(page, timeout_ms: int) -> None:
    """Ctrl+S once the notebook's cells have run, and wait until its tab is clean (the file on disk is the page).

    An output that arrives after the save marks the notebook dirty again: Run All goes on past the cell a
    test waited for (CI saw the tab dirty 5 s after Ctrl+S), so wait for the queued cells first, then save
    again if an output still came in after the save.
    """
    from playwright.sync_api import expect

    wait_until_run(page, timeout_ms)
    dirty = page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty")
    for _ in range(3):
        page.keyboard.press("Control+S")
        try:
            expect(dirty).to_have_count(0, timeout=10_000)
            return
        except AssertionError:
            continue
    pytest.fail("the notebook's tab stayed dirty after three Ctrl+S, 10 s apart")


def run_all_cells(page, name: str, artifacts_dir, attempts: int = 4) -> None:
    """Run > Run All Cells, repeated until the code cells are really queued.

    While the kernel is still connecting, JupyterLab can drop the request without a message (the
    cells keep their empty prompt), so check that the first code cell's prompt became [*] or [n].
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect

    prompt = page.locator(".jp-CodeCell .jp-InputPrompt").first
    for attempt in range(attempts):
        try:
            page.keyboard.press("Escape")  # close whatever menu, pop-up or dialog may be in the way
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click(timeout=15_000)
            page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click(timeout=15_000)
            expect(prompt).to_have_text(re.compile(r"\[(\*|\d+)\]"), timeout=10_000)
            return
        except (AssertionError, PlaywrightTimeout):
            page.screenshot(path=str(artifacts_dir / f"{name}-run-all-attempt-{attempt + 1}.png"))
    pytest.fail(f"Run All Cells did not start the code cells of {name} after {attempts} tries "
                f"(screenshots in test-artifacts/)")


def cell(page, index: int):
    """The notebook's cell ``index`` on the page (cells count from 0, as in the .ipynb file)."""
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


def cell_index(notebook_path, grade_id: str) -> int:
    """The index of the cell with nbgrader's ``grade_id`` in the notebook file."""
    cells = nbformat.read(notebook_path, as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def open_in_lab(page, lab_server, path: str):
    """Open the notebook at ``path`` (relative to the server's root) and wait for its kernel.

    ?reset opens a clean workspace, so only this notebook is open."""
    page.goto(lab_server.url(f"/lab/tree/{path}") + "&reset")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=RUN_TIMEOUT_MS)
    wait_for_kernel_idle(page, RUN_TIMEOUT_MS)


def replace_cell_code(page, index: int, code: str) -> None:
    """Select all of a code cell's text and put ``code`` in its place (no auto-indent, no auto-brackets)."""
    editor = cell(page, index).locator(".cm-content")
    editor.scroll_into_view_if_needed()
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(code)
    page.keyboard.press("Escape")  # back to command mode, so Run All takes the new text


def output_of(page, index: int, contains: str, screenshot):
    """The text of cell ``index``'s output once it holds ``contains``; a screenshot of the output saved."""
    from playwright.sync_api import expect

    output = cell(page, index).locator(".jp-OutputArea")
    expect(output).to_contain_text(contains, timeout=RUN_TIMEOUT_MS)
    output.scroll_into_view_if_needed()
    output.screenshot(path=str(screenshot))
    return output.text_content()


def active_cell(page) -> int:
    """The index of the notebook's active cell."""
    return page.locator(".jp-Notebook .jp-Cell").evaluate_all(
        "(cells) => cells.findIndex(c => c.classList.contains('jp-mod-active'))")


def select(page, index: int, step_down: bool) -> None:
    """Make cell ``index`` the active one: a click on its prompt, or with ``step_down`` from the keyboard, Shift+Enter
    over the markdown cells between, as a student steps from an answer to its check (as the check's first line
    tells them)."""
    if step_down:
        for _ in range(3):
            page.wait_for_function("() => document.querySelector('.jp-Notebook .jp-Cell.jp-mod-active') !== null")
            if (now := active_cell(page)) >= index:
                break
            assert "jp-MarkdownCell" in cell(page, now).get_attribute("class"), f"cell {now} between is not markdown"
            before = cell(page, now).element_handle()
            page.keyboard.press("Shift+Enter")  # a markdown cell between (the hint): rendered, and on to the next
            page.wait_for_function("(before) => document.querySelector('.jp-Notebook .jp-Cell.jp-mod-active') !== before",
                                   arg=before, timeout=5_000)
    else:
        prompt = cell(page, index).locator(".jp-InputPrompt").first
        prompt.scroll_into_view_if_needed()
        prompt.click()
    assert active_cell(page) == index, f"cell {index} could not be selected: cell {active_cell(page)} is"


def run_cell(page, index: int, step_down: bool = False, attempts: int = 4) -> None:
    """Select cell ``index`` (``step_down``: from the keyboard, see ``select``) and run it with Shift+Enter; wait until
    it has run.

    Shift+Enter is repeated until the cell is really queued: while the kernel is still connecting JupyterLab can
    drop the request without a word (the prompt stays as it was), as run_all_cells says. A repeat selects the cell
    by its prompt: the dropped Shift+Enter has already moved the selection past it."""
    from playwright.sync_api import expect

    prompt = cell(page, index).locator(".jp-InputPrompt").first
    before = prompt.text_content().strip()  # its text even out of view
    ran_or_dropped = re.compile(r"\[(\d+| )\]")
    for attempt in range(attempts):
        wait_for_kernel_idle(page, RUN_TIMEOUT_MS)
        select(page, index, step_down=step_down and attempt == 0)
        page.keyboard.press("Shift+Enter")
        try:
            expect(prompt).not_to_have_text(before, timeout=10_000)
        except AssertionError:
            continue  # never queued
        # queued ([*]) and then either run ([n]) or dropped back to its old prompt: CI saw a first run after the
        # kernel's start go [ ] -> [*] -> [ ] with the status bar idle
        expect(prompt).to_have_text(ran_or_dropped, timeout=RUN_TIMEOUT_MS)
        if re.fullmatch(r"\[\d+\]:?", prompt.text_content().strip()):
            return
    pytest.fail(f"Shift+Enter did not run cell {index} after {attempts} tries (its prompt stayed {before!r})")
