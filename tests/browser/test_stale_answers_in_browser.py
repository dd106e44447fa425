"""Stale answers and unsaved written answers (issue 36, items 2 and 6), tried as a student would in JupyterLab in
Chromium at 1280x800, in a student's `make lab`, on a copy of notebook 01 of its own:

- Exercise 11.1(a), in a fresh kernel: the numbers typed and run, then their cell edited so that it raises
  (`token_probs_86.product()`) and run, then the function's cell run, and only then the first check of the kernel:
  the check says the answers are left from an earlier run and names the error, instead of judging them
  (``lmpolicy.notebook.answer_runs``, watching from the kernel's start: ``lmpolicy.notebook.student_kernels``);
- the numbers run with a wrong main contributor, then corrected without running the cell, and the check run: it says
  the answer cell changed since it ran and to run it, and its ✗ lines follow as about that run (JupyterLab's
  ``jp-mod-dirty``); the cell run, and the check passes;
- the numbers edited again without running the cell, and the check run: no ✓ shows, the same line says the code
  that ran passed and the edit is not checked, and the progress record holds the pass of the code that ran, which
  the start page shows as changed since it passed once the edit is saved;
- Exercise 11.1(b): a written answer typed into its cell and `mark_done` run at once, without saving: it reads the
  answer as typed (``lmpolicy.notebook.save_request`` has JupyterLab save first), and the file holds it.

Screenshots are saved under test-artifacts/stale-answers/.
"""
import json
import re
import shutil
import time

import nbformat
import pytest

from lmpolicy.notebook import progress
from tests.browser.conftest import ROOT, STUDENT_WORK, emptied
from tests.browser.notebook_page import (RUN_TIMEOUT_MS, cell, cell_index, open_in_lab, output_of,
                                         replace_cell_code, run_cell, save_notebook, shown_text)
from tests.verdicts import one_line

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

NOTEBOOK = "01_policy_softmax.ipynb"
COPY = f"{STUDENT_WORK}/stale-answers"  # relative to the course folder, where `make lab` serves from
SEQUENCE_LOGPROB = "def sequence_logprob(token_probs):\n    return torch.log(token_probs).sum(dim=-1)\n"
NUMBERS = ("prob_86 = math.prod(token_probs_86.tolist())\nlogprob_86 = math.log(prob_86)\n"
           "main_contributor = '6'\n")
WRONG = NUMBERS.replace("math.log(prob_86)", "math.log10(prob_86)")  # the visible checks find it
RAISES = "prob_86 = token_probs_86.product()\nlogprob_86 = math.log(prob_86)\nmain_contributor = '6'\n"
WRITTEN = "The <eos> token: its probability is the largest, so its log is the smallest in size."


def prompt_count(page, index: int) -> int:
    """The execution count cell ``index``'s prompt shows."""
    return int(re.search(r"\[(\d+)\]", cell(page, index).locator(".jp-InputPrompt").first.text_content()).group(1))


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


def test_a_check_says_its_answer_cell_raised_or_changed_and_mark_done_reads_the_unsaved_answer(
        lab_server, notebook, page, shots):
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
        # in the fresh kernel: the numbers run, their cell edited so that it raises and run, the function's cell
        # run after it, and only then the kernel's first check
        for index, code in ((numbers, NUMBERS), (numbers, RAISES), (function, SEQUENCE_LOGPROB)):
            replace_cell_code(page, index, code)
            run_cell(page, index)
        run_cell(page, check)
        said = one_line(output_of(page, check, "left from an earlier run", shots / "1-check-after-the-cell-raised.png"))
        cell(page, check).locator(".jp-OutputArea").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "1-window-after-the-cell-raised.png"))
        assert re.search(r"\u2717 Not checked: prob_86, logprob_86 and main_contributor are left from an earlier run: "
                         r"their cell \(In \[\d+\]\) raised AttributeError: 'Tensor' object has no attribute 'product' "
                         r"the last time it ran\. Fix that cell and run it again, then this check\.", said), said
        assert "passed" not in said and "chapter" not in said and "Traceback" not in said, said

        # a wrong answer run, then corrected without running its cell: the check's ✗ lines are about the run before
        replace_cell_code(page, numbers, WRONG)
        run_cell(page, numbers)
        ran = prompt_count(page, numbers)
        replace_cell_code(page, numbers, NUMBERS)
        run_cell(page, check)
        said = one_line(output_of(page, check, "what it found follows", shots / "2-check-after-a-fix-not-run.png"))
        assert said.startswith(f"\u2717 Not checked: your answer cell (In [{ran}]) changed since it ran: run it "
                               "(Shift+Enter), then this check. It judged prob_86, logprob_86 and main_contributor as "
                               "that cell left them: what it found follows, about that run, not your edit."), said
        assert "\u2717 Check failed: exp(logprob_86) does not give prob_86 back" in said, said

        run_cell(page, numbers)  # as the line says: the cell, then the check
        ran = prompt_count(page, numbers)
        run_cell(page, check)
        output_of(page, check, "passed the visible checks", shots / "3-check-passed.png")

        # the answer edited and not run: no tick under it, the line says what passed and that the edit is not checked
        replace_cell_code(page, numbers, WRONG)
        run_cell(page, check)
        output_of(page, check, "your edit is not checked", shots / "4-check-after-an-edit-not-run.png")
        page.screenshot(path=str(shots / "4-window-after-an-edit-not-run.png"))
        shown = " ".join(shown_text(cell(page, check).locator(".jp-OutputArea")).split())
        assert shown == (f"\u2717 Not checked: your answer cell (In [{ran}]) changed since it ran: run it "
                         "(Shift+Enter), then this check. It judged prob_86, logprob_86 and main_contributor as that "
                         "cell left them, and they passed; your edit is not checked."), shown
        assert cell(page, check).locator(".lmpolicy-edited-since-run[role=status]").count() == 1  # said, not only shown
        # the record holds the pass of the code that ran, as the line says (the start page shows it changed once
        # the edit is saved)
        record = json.loads(lab_server.progress_file.read_text())
        numbers_id = nbformat.read(notebook, as_version=4).cells[numbers].id
        assert [(run["state"], run["answer"].get(numbers_id)) for run in record["checks"]["ex11_1a"].values()] == [
            ("passed", progress.fingerprint(NUMBERS))], record
        save_notebook(page, RUN_TIMEOUT_MS)  # Ctrl+S: the start page reads the edit as saved
        (state,) = [state for state in progress.item_states(NOTEBOOK.removesuffix(".ipynb"), record, notebook)
                    if state.item.exercise.key == "ex11_1a" and not state.item.written]
        assert (state.done, state.status) == (False, progress.SAVED_OTHER_STATUS), state

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
