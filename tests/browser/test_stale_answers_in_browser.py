"""Stale answers and unsaved written answers (issue 36, items 2 and 6), tried as a student would in JupyterLab in
Chromium at 1280x800, in a student's `make lab`, on a copy of notebook 01 of its own:

- Exercise 11.1(a): the function and the numbers typed and run, and the check passed; then the numbers' cell edited
  so that it raises (`token_probs_86.product()`), run, and the check run again: the check says the answers are left
  from an earlier run and names the error, instead of passing them again (``lmpolicy.notebook.answer_runs``);
- the answer cell run again and then edited without running it: the check adds one line saying that cell was edited
  after it ran (JupyterLab's ``jp-mod-dirty``);
- Exercise 11.1(b): a written answer typed into its cell and `mark_done` run at once, without saving: it reads the
  answer as typed (``lmpolicy.notebook.save_request`` has JupyterLab save first), and the file holds it.

Screenshots are saved under test-artifacts/stale-answers/.
"""
import re
import shutil
import time

import nbformat
import pytest

from tests.browser.conftest import ROOT, STUDENT_WORK, emptied
from tests.browser.notebook_page import (RUN_TIMEOUT_MS, cell, cell_index, open_in_lab, output_of, replace_cell_code,
                                         run_cell)
from tests.verdicts import one_line

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

NOTEBOOK = "01_policy_softmax.ipynb"
COPY = f"{STUDENT_WORK}/stale-answers"  # relative to the course folder, where `make lab` serves from
SEQUENCE_LOGPROB = "def sequence_logprob(token_probs):\n    return torch.log(token_probs).sum(dim=-1)\n"
NUMBERS = ("prob_86 = math.prod(token_probs_86.tolist())\nlogprob_86 = math.log(prob_86)\n"
           "main_contributor = '6'\n")
RAISES = "prob_86 = token_probs_86.product()\nlogprob_86 = math.log(prob_86)\nmain_contributor = '6'\n"
WRITTEN = "The <eos> token: its probability is the largest, so its log is the smallest in size."


@pytest.fixture(scope="module")
def shots(artifacts_dir):
    return emptied(artifacts_dir / "stale-answers")


@pytest.fixture
def notebook(student_copy):
    """The student's notebook 01 copied to a folder of its own: mark_done saves it, and the other tests' copy stays
    as they expect it."""
    folder = emptied(ROOT / COPY)
    shutil.copy(student_copy / NOTEBOOK, folder / NOTEBOOK)
    return folder / NOTEBOOK


def test_a_check_says_its_answer_cell_raised_and_mark_done_reads_the_unsaved_answer(lab_server, notebook, page,
                                                                                    shots):
    started = time.monotonic()
    setup, parameters, function, numbers, check = (
        cell_index(notebook, grade_id) for grade_id in ("nb01_softmax__setup", "ex11_1a__parameters",
                                                        "ex11_1a__sequence_logprob", "ex11_1a__numbers",
                                                        "ex11_1a__tests"))
    written = cell_index(notebook, "ex11_1b__manual")
    mark_done = written + 1
    assert "mark_done" in nbformat.read(notebook, as_version=4).cells[mark_done].source
    open_in_lab(page, lab_server, f"{COPY}/{NOTEBOOK}")
    try:
        for index in (setup, parameters):
            run_cell(page, index)
        for index, code in ((function, SEQUENCE_LOGPROB), (numbers, NUMBERS)):
            replace_cell_code(page, index, code)
            run_cell(page, index)
        run_cell(page, check)
        output_of(page, check, "passed the visible checks", shots / "1-check-passed.png")

        # the answer cell edited so that it raises, run, and the check run again
        replace_cell_code(page, numbers, RAISES)
        run_cell(page, numbers)
        run_cell(page, check)
        said = one_line(output_of(page, check, "left from an earlier run", shots / "2-check-after-the-cell-raised.png"))
        cell(page, check).locator(".jp-OutputArea").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "2-window-after-the-cell-raised.png"))
        assert re.search(r"\u2717 Not checked: prob_86, logprob_86 and main_contributor are left from an earlier run: "
                         r"their cell \(In \[\d+\]\) raised AttributeError: 'Tensor' object has no attribute 'product' "
                         r"the last time it ran\. Fix that cell and run it again, then this check\.", said), said
        assert "passed" not in said and "chapter" not in said and "Traceback" not in said, said

        # the answer cell run, then edited and not run: the check judges what ran (a pass), and says the cell was
        # edited
        replace_cell_code(page, numbers, NUMBERS)
        run_cell(page, numbers)
        replace_cell_code(page, numbers, NUMBERS.replace("'6'", "'8'"))
        run_cell(page, check)
        said = one_line(output_of(page, check, "was edited after it ran", shots / "3-check-after-an-edit.png"))
        assert "passed the visible checks" in said, said
        assert re.search(r"\u2717 prob_86, logprob_86, main_contributor: the cell \[\d+\] that set them was edited "
                         r"after it ran, so this check judges what it ran then\. Run that cell \(Shift\+Enter\), then "
                         r"this check\.", said), said

        # a written answer typed in, and mark_done run at once, the notebook unsaved
        answer = cell(page, written)
        answer.scroll_into_view_if_needed()
        answer.dblclick()  # a rendered markdown cell opens for editing
        answer.locator(".cm-content").click()
        page.keyboard.press("Control+A")
        page.keyboard.insert_text(WRITTEN)
        page.keyboard.press("Escape")
        assert page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count() == 1, "the notebook is not unsaved"
        run_cell(page, mark_done)
        said = one_line(output_of(page, mark_done, "graded by hand", shots / "4-mark-done-unsaved.png"))
        page.screenshot(path=str(shots / "4-window-mark-done.png"))
        assert said.startswith("\u270e Exercise 11.1(b): written (graded by hand): your answer is in its cell (saved "
                               "just now)"), said
        cells = nbformat.read(notebook, as_version=4).cells
        assert cells[written].source == WRITTEN, "the file does not hold the answer as typed"
    except Exception:
        page.screenshot(path=str(shots / "failed.png"))
        raise
    print(f"stale answers and mark_done in the browser: {time.monotonic() - started:.1f} s")
