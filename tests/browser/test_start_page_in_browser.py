"""The start page as a student meets it in JupyterLab: opened after a check passed, after a kernel restart and a
check run before its answer, and after the check failed, it shows at its top who the student is and their
progress as of that moment, on the first screen, in the checks' own words; a restart takes no tick away."""
import json
import re
import urllib.request

import nbformat
import pytest

from tests.browser.conftest import STUDENT_COPY, STUDENT_WORK
from tests.notebooks.test_start_here import STABLE, UNSHIFTED
from tests.browser.notebook_page import (RUN_TIMEOUT_MS, active_cell, cell, cell_index, open_in_lab, output_of, replace_cell_code,
                                         run_cell, save_notebook, wait_for_kernel_idle)

START_PAGE = f"{STUDENT_WORK}/00_start_here.ipynb"
NOTEBOOK = f"{STUDENT_COPY}/01_policy_softmax.ipynb"


def restart_kernel_of(lab_server, path: str) -> None:
    """Restart the kernel of the notebook at ``path`` through the server, as Kernel > Restart Kernel does."""
    def call(method, url):
        request = urllib.request.Request(lab_server.base_url + url, method=method, data=b"" if method == "POST" else None,
                                          headers={"Authorization": f"token {lab_server.token}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read() or b"null")

    (kernel,) = [s["kernel"]["id"] for s in call("GET", "/api/sessions") if s["path"] == path]
    call("POST", f"/api/kernels/{kernel}/restart")


def start_page_row(page, lab_server, notebook: str, screenshot) -> str:
    """Open the start page (a fresh load, as a student opens it) and read its overview's row of ``notebook``; the
    overview must be on the first screen."""
    from playwright.sync_api import expect

    page.goto(lab_server.url(f"/lab/tree/{START_PAGE}") + "&reset")  # alone: the helpers count cells page-wide
    shown = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    overview = shown.locator(".jp-OutputArea-output table.lmpolicy-overview")
    overview.wait_for(timeout=RUN_TIMEOUT_MS)
    expect(shown.locator(".jp-OutputArea-output .lmpolicy-who")).to_be_visible()
    wait_for_kernel_idle(page, RUN_TIMEOUT_MS)
    page.wait_for_timeout(1_000)
    # opened and its kernel connected, the page is not marked unsaved: JupyterLab finds the kernel's language
    # already in it (lmpolicy.notebook.served_notebooks)
    expect(page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty")).to_have_count(0)
    page.screenshot(path=str(screenshot))
    view = shown.locator(".jp-WindowedPanel-outer").bounding_box()
    box = overview.bounding_box()
    assert box["y"] + box["height"] <= view["y"] + view["height"], (box, view)  # on the first screen
    assert overview.locator("caption").count() == 1 and overview.locator('th[scope="col"]').count() == 4
    return overview.locator("tr", has_text=notebook).inner_text()


def answer_and_check(page, lab_server, above: list[int], answer: int, check: int, code: str, says: str, screenshot):
    """As a student: open notebook 01 (its kernel reconnected if running), run the set-up cells ``above`` top to
    bottom, write ``code`` in the answer cell, run it, step down to its check with Shift+Enter, wait for the check's
    output to say ``says``, and save."""
    open_in_lab(page, lab_server, NOTEBOOK)
    for index in above:
        run_cell(page, index)
    replace_cell_code(page, answer, code)
    run_cell(page, answer)
    run_cell(page, check, step_down=True)
    output_of(page, check, says, screenshot)
    save_notebook(page, RUN_TIMEOUT_MS)


@pytest.mark.browser
def test_the_start_page_shows_a_pass_a_restart_keeps_and_a_failure_in_the_checks_words(lab_server, chromium,
                                                                                         student_copy, artifacts_dir):
    shots = artifacts_dir / "start-page"
    shots.mkdir(exist_ok=True)
    answer = cell_index(student_copy / "01_policy_softmax.ipynb", "nb01_softmax__answer")
    check = cell_index(student_copy / "01_policy_softmax.ipynb", "nb01_softmax__tests")
    cells = nbformat.read(student_copy / "01_policy_softmax.ipynb", as_version=4).cells
    above = [i for i, c in enumerate(cells[:answer]) if c.cell_type == "code"]
    page = chromium.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(60_000)
    try:
        # the softmax written, run, its check run (Shift+Enter from the answer) and passed, the notebook saved
        answer_and_check(page, lab_server, above, answer, check, STABLE, "passed the visible checks",
                         shots / "1-check-passed.png")
        passed = start_page_row(page, lab_server, "01_policy_softmax", shots / "2-start-page-after-the-pass.png")
        assert re.search(r"\b1 of 3\b", passed) and "Exercise 01.softmax" not in passed, passed

        # the kernel restarted; the student runs the check first: "Not defined yet", and the tick stays
        open_in_lab(page, lab_server, NOTEBOOK)  # the same kernel, reconnected
        restart_kernel_of(lab_server, NOTEBOOK)
        wait_for_kernel_idle(page, RUN_TIMEOUT_MS)
        check_cell = cell(page, check)
        check_cell.scroll_into_view_if_needed()
        page.wait_for_timeout(1_000)  # the notebook lays its cells out as they come into view
        check_cell.scroll_into_view_if_needed()
        # a click on the check selects it, as a student clicks it after a restart
        check_cell.locator(".jp-Cell-inputArea").first.click()
        page.keyboard.press("Escape")
        assert active_cell(page) == check, active_cell(page)
        page.keyboard.press("Shift+Enter")
        said = output_of(page, check, "Not defined yet", shots / "3-check-after-restart.png")
        assert "NameError" not in said and "Traceback" not in said, said
        kept = start_page_row(page, lab_server, "01_policy_softmax", shots / "4-start-page-after-the-restart.png")
        assert re.search(r"\b1 of 3\b", kept) and "Exercise 01.softmax" not in kept, kept

        # a softmax without the max shift, run and checked: the start page says what the check said
        answer_and_check(page, lab_server, above, answer, check, UNSHIFTED, "Check failed",  # after the restart
                         shots / "5-check-failed.png")
        failed = start_page_row(page, lab_server, "01_policy_softmax", shots / "6-start-page-after-the-failure.png")
        assert re.search(r"\b0 of 3\b", failed), failed
        assert "Exercise 01.softmax visible check: Check failed: softmax(" in failed and "NameError" not in failed, failed
    except Exception:
        page.screenshot(path=str(shots / "failed.png"))
        raise
    finally:
        page.close()
