"""A student's feedback loop in a real JupyterLab (`make lab`) in headless Chromium.

In the student's copy of notebook 01: step down to the softmax check with Shift+Enter and run it
before its answer cell, and read which cell to run first; type the softmax that forgets to subtract the
maximum (a pitfall of the wrong-answer corpus), run the notebook, and read a short message naming the
mistake right under the check, with no traceback, in the notebook and in nbgrader's Validate dialog;
type a correct softmax, see ✓; and see the start page's count of done items go up by one; run the answer
cell again with the wrong code and see the tick go; write 11.1(b)'s answer, save, and see it counted.
Screenshots of each step are saved under test-artifacts/feedback-*.png.
"""
import re
import shutil

import pytest

from tests.browser.conftest import STUDENT_WORK
from tests.browser.notebook_page import (RUN_TIMEOUT_MS, cell, cell_index, open_in_lab, output_of, replace_cell_code,
                                         run_cell, save_notebook, select, wait_until_run)
from tests.verdicts import one_line

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

MAX_MESSAGE_LINES = 8
NOTEBOOK = "01_policy_softmax"
ANSWER, CHECK = "nb01_softmax__answer", "nb01_softmax__tests"
WRITTEN = "ex11_1b__manual"
START_COPY = "test-artifacts/browser-notebooks/00_start_here.ipynb"
# A correct softmax, written for this test: shift by the largest logit along `dim`, then normalise.
CORRECT_SOFTMAX = '''def softmax(logits, dim=-1):
    shifted = logits - logits.amax(dim=dim, keepdim=True)
    numerators = torch.exp(shifted)
    return numerators / numerators.sum(dim=dim, keepdim=True)
'''


def the_pitfall():
    from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS, Kind

    (wrong,) = [w for w in WRONG_ANSWERS if w.cell == ANSWER and w.kind == Kind.PITFALL
                and w.names == "subtract the maximum"]
    return wrong


def start_page_row(page, label: str) -> str:
    """The text of the start page table's row whose first cell is ``label``.

    Read as text content, not as rendered text: JupyterLab skips the rendering of cells out of view
    (its default windowing mode, content-visibility), and CI read such a row's rendered text as empty.
    """
    row = page.locator(".jp-OutputArea-output tr", has=page.locator("td", has_text=re.compile(f"^{re.escape(label)}$")))
    row.first.wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    return " ".join(td.text_content() for td in row.first.locator("td").all())


def read_start_page(page, lab_server, run_all, repo_root) -> tuple[str, str]:
    """Run a fresh copy of the student's start page (the one `make lab` put beside their ch11/) to its end
    and read its table.

    A copy, so that the student's own page keeps what `make lab` filled in; fresh each time, so that
    no row of an earlier read is on the page before this run's table.
    """
    (repo_root / START_COPY).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(repo_root / STUDENT_WORK / "00_start_here.ipynb", repo_root / START_COPY)
    open_in_lab(page, lab_server, START_COPY)
    run_all(page, "00_start_here")
    wait_until_run(page, RUN_TIMEOUT_MS)
    return start_page_row(page, f"notebook {NOTEBOOK}"), start_page_row(page, "course total")


def items_done(row: str) -> int:
    return int(re.search(r"(\d+) of \d+ items done", row).group(1))


def test_a_pitfall_gets_a_short_message_then_a_correct_answer_a_tick_and_the_count_goes_up(
        lab_server, chromium, student_copy, artifacts_dir, repo_root, run_all):
    from playwright.sync_api import expect

    notebook_path = student_copy / f"{NOTEBOOK}.ipynb"
    answer, check = cell_index(notebook_path, ANSWER), cell_index(notebook_path, CHECK)
    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    try:
        before_notebook, before_course = read_start_page(page, lab_server, run_all, repo_root)
        page.screenshot(path=str(artifacts_dir / "feedback-start-page-before.png"))
        # a student's lab has no instructor menu and no course list that cannot load
        assert "Nbgrader" not in page.locator(".lm-MenuBar").inner_text()
        assert page.get_by_text("Error fetching courses").count() == 0

        open_in_lab(page, lab_server, f"{student_copy.relative_to(repo_root)}/{NOTEBOOK}.ipynb")
        # the check run first, in a fresh kernel (as after a restart): it says which cell to run. As its first line
        # says, the student steps down to it with Shift+Enter, here from the hint above it
        heading = cell(page, check).locator(".cm-content")
        expect(heading).to_contain_text("Checks of Exercise 01.softmax: run with Shift+Enter from your answer")
        select(page, check - 1, step_down=False)
        select(page, check, step_down=True)
        page.keyboard.press("Shift+Enter")
        early = output_of(page, check, "Not defined yet", artifacts_dir / "feedback-not-run-yet.png")
        assert "softmax is defined in Exercise 01.softmax's answer cell, which has not run in this kernel: run it first." \
            in one_line(early), early
        pitfall = the_pitfall()
        replace_cell_code(page, answer, pitfall.source)
        run_all(page, NOTEBOOK)  # stops at the first failing cell: the softmax check
        shown = output_of(page, check, "Check failed", artifacts_dir / "feedback-pitfall.png")
        cell(page, check).screenshot(path=str(artifacts_dir / "feedback-pitfall-cell.png"))  # as the student sees it
        lines = [line for line in shown.strip().splitlines() if line.strip()]
        assert len(lines) <= MAX_MESSAGE_LINES, f"the message has {len(lines)} lines:\n{shown}"
        assert pitfall.names in one_line(shown), f"the message does not say {pitfall.names!r}:\n{shown}"
        assert "Traceback" not in shown and "checks.py" not in shown and "site-packages" not in shown, shown
        # nbgrader's Validate button runs the saved notebook and shows the same short message
        save_notebook(page, RUN_TIMEOUT_MS)  # saved
        page.get_by_role("button", name="Validate").click()
        dialog = page.locator(".jp-Dialog", has_text="Validation Results")
        expect(dialog).to_contain_text("Check failed: " + shown.split("Check failed: ", 1)[1].splitlines()[0],
                                       timeout=RUN_TIMEOUT_MS)
        dialog.screenshot(path=str(artifacts_dir / "feedback-validate.png"))
        assert "Traceback" not in dialog.inner_text()
        dialog.get_by_role("button", name="Ok").click()

        replace_cell_code(page, answer, CORRECT_SOFTMAX)
        run_all(page, NOTEBOOK)  # now passes the softmax check, stops at 11.1(a)'s stub
        passed = output_of(page, check, "\u2713 Exercise 01.softmax passed the visible checks", artifacts_dir / "feedback-passed.png")
        assert "Check failed" not in passed
        save_notebook(page, RUN_TIMEOUT_MS)  # a pass counts for the answer as saved (a saved answer that differs would not)

        after_notebook, after_course = read_start_page(page, lab_server, run_all, repo_root)
        page.screenshot(path=str(artifacts_dir / "feedback-start-page-after.png"))
        assert items_done(after_notebook) == items_done(before_notebook) + 1, (before_notebook, after_notebook)
        assert items_done(after_course) == items_done(before_course) + 1, (before_course, after_course)
        softmax_row = page.locator(".jp-OutputArea-output tr", has_text="a numerically stable softmax")
        expect(softmax_row).to_contain_text("passed")
        softmax_row.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts_dir / "feedback-start-page-passed-row.png"))

        # the answer run again with other code: the tick goes until the check passes on it
        open_in_lab(page, lab_server, f"{student_copy.relative_to(repo_root)}/{NOTEBOOK}.ipynb")
        replace_cell_code(page, answer, pitfall.source)
        run_cell(page, answer)  # just the answer cell, until its prompt shows a new count (the reopened page showed the saved one)
        changed_notebook, _ = read_start_page(page, lab_server, run_all, repo_root)
        assert items_done(changed_notebook) == items_done(before_notebook), (before_notebook, changed_notebook)
        expect(softmax_row).to_contain_text("changed since its check passed: run the check")
        softmax_row.scroll_into_view_if_needed()  # the screenshot shows the row itself, not the page's end
        page.screenshot(path=str(artifacts_dir / "feedback-start-page-changed.png"))

        # a written answer counts once its saved cell holds the student's text (no tick to set by hand)
        open_in_lab(page, lab_server, f"{student_copy.relative_to(repo_root)}/{NOTEBOOK}.ipynb")
        written = page.locator(".jp-Notebook .jp-Cell").nth(cell_index(notebook_path, WRITTEN))
        written.scroll_into_view_if_needed()
        written.dblclick()  # a rendered Markdown cell opens its editor on a double click
        written.locator(".cm-content").click()
        page.keyboard.press("Control+A")
        page.keyboard.insert_text("By the chain rule the probability is a product, so its log is a sum of logs.")
        page.keyboard.press("Shift+Enter")
        save_notebook(page, RUN_TIMEOUT_MS)
        written_notebook, _ = read_start_page(page, lab_server, run_all, repo_root)
        # in, for the instructor to grade: counted as written, never as done
        assert items_done(written_notebook) == items_done(before_notebook), (before_notebook, written_notebook)
        assert "1 written (graded by hand)" in written_notebook, written_notebook
        expect(page.locator(".jp-OutputArea-output tr", has_text="a response's log-prob is a sum")).to_contain_text(
            "written (graded by hand)")
    finally:
        page.screenshot(path=str(artifacts_dir / "feedback-last-page.png"))
        page.close()
