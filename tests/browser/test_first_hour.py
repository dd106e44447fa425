"""A student's first hour in JupyterLab (issue 36, item 4 and the progress bars of item 6), tried in Chromium at
1280x800 with the file browser open, in a student's `make lab`:

- Run All on a release notebook with a wrong answer stops at its check; JupyterLab alone leaves the view on the
  notebook's last, unrun cell. The kernel brings the failing check into view (``lmpolicy.notebook.in_view``): its ✗
  lines are on screen when the run has stopped.
- Validate runs in a subprocess of the student's server (``lmpolicy.notebook.validator``): while its button reads
  "Validating...", the lab's server still answers (nbgrader's handler held the server's one thread), and the
  course's lab extension says beside it which cell runs (``lmpolicy.notebook.validation_progress``).
- A long cell's progress bars: Run All scrolls to the last cell as it starts; the training cell, far above it, is
  brought into view when its first bar starts. Notebook 08's four runs (their labels as the notebook gives them)
  show bars of one width, each label on one line (``lmpolicy.tinylm.runs.lay_out_notebook_bar``).

Screenshots are saved under test-artifacts/first-hour/.
"""
import nbformat
import pytest

from tests.browser.conftest import STUDENT_COPY, STUDENT_WORK
from tests.browser.notebook_page import (RUN_TIMEOUT_MS, cell, cell_index, open_in_lab, replace_cell_code,
                                         wait_until_run)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

WRONG_SOFTMAX = ("def softmax(logits, dim=-1):\n"
                 "    return torch.exp(logits) / torch.exp(logits).sum()  # the whole tensor's sum, not along dim\n")
# notebook 08's runs as its cells label them (sections 5 and 6): the longest label has a hyphen
RUN_LABELS = ("REINFORCE, beta = 0.02", "REINFORCE, beta = 0", "rejection-sampling FT", "SFT on more worked examples")
FILLER = "\n\n".join(f"Line {i} of prose the student reads while the notebook runs." for i in range(40))


@pytest.fixture(scope="module")
def shots(artifacts_dir):
    folder = artifacts_dir / "first-hour"
    folder.mkdir(exist_ok=True)
    return folder


def in_view(page, index: int, part: str = ".jp-Cell-outputWrapper") -> float:
    """How many pixels of cell ``index``'s ``part`` the notebook's scrolled view shows (0: none)."""
    return cell(page, index).locator(part).first.evaluate("""node => {
        const view = node.closest('.jp-WindowedPanel-outer').getBoundingClientRect();
        const box = node.getBoundingClientRect();
        return Math.max(0, Math.min(box.bottom, view.bottom) - Math.max(box.top, view.top));
    }""")


def test_run_all_stopped_by_a_check_shows_the_check(lab_server, student_copy, page, shots, run_all):
    """Notebook 01 with a wrong softmax: Run All stops at the softmax's check, and that check's ✗ lines are what
    the student sees, not the last cell."""
    notebook = student_copy / "01_policy_softmax.ipynb"
    answer, check = cell_index(notebook, "nb01_softmax__answer"), cell_index(notebook, "nb01_softmax__tests")
    cells = nbformat.read(notebook, as_version=4).cells
    last, after = len(cells) - 1, next(i for i in range(check + 1, len(cells)) if cells[i].cell_type == "code")
    open_in_lab(page, lab_server, f"{STUDENT_COPY}/{notebook.name}")
    replace_cell_code(page, answer, WRONG_SOFTMAX)
    run_all(page, "first-hour")  # retried until the cells are queued
    check_output = cell(page, check).locator(".jp-OutputArea")
    try:
        check_output.get_by_text("\u2717").first.wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    finally:
        page.screenshot(path=str(shots / "run-all-check-output.png"))
    wait_until_run(page, RUN_TIMEOUT_MS)
    page.wait_for_timeout(1_500)  # the script waits for JupyterLab's own scroll, then settles
    page.screenshot(path=str(shots / "run-all-stopped-at-check.png"))

    assert in_view(page, check) >= 40, "the failing check's output is out of view: the student sees no ✗"
    assert "jp-mod-active" in cell(page, check).get_attribute("class"), "the active cell is not the failing check"
    assert "jp-mod-active" not in cell(page, last).get_attribute("class")
    said = page.locator("#lmpolicy-run-stopped[role=status]").text_content()
    assert said.startswith(f"The run stopped at cell {check + 1}: \u2717 Check failed: softmax("), said
    assert cell(page, check).locator(".jp-OutputArea-output", has_text="\u2717").first.is_visible()
    # the script shows nothing of itself: no empty output row under the check
    scripts = cell(page, check).locator(".jp-OutputArea-child:has(.jp-RenderedJavaScript)")
    # (the check's own page script, which looks for an answer edited since it ran, hides itself too)
    assert scripts.count() >= 1 and not any(scripts.nth(i).is_visible() for i in range(scripts.count()))
    # the cells after the check were cancelled, not run
    assert cell(page, after).locator(".jp-InputPrompt").first.text_content().strip() == "[ ]:"


@pytest.fixture
def bars_notebook(lab_server, student_copy):
    """A notebook of the student's work folder whose two long cells train four tiny runs labelled as notebook 08's,
    with prose between them and below, so that the last cell is far below each training."""
    runs = [f"reinforce.train(replace(tiny, beta={label.rsplit('= ', 1)[1]}), model, label={label!r})"
            for label in RUN_LABELS[:2]]
    runs.append(f"reinforce.train(replace(tiny, method='rft', beta=0.0), model, label={RUN_LABELS[2]!r})")
    later_run = ("result = sft.train(replace(sft.SFTRecipe(), max_updates=2, eval_every_updates=2, n_examples=512, "
                 f"heldout_measured=50, stop_at_target=False), model, label={RUN_LABELS[3]!r})")
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Training runs\n\n" + FILLER),
        nbformat.v4.new_code_cell("from dataclasses import replace\n\nimport torch\n\n"
                                  "from lmpolicy.tinylm import reinforce, sft\n"
                                  "from lmpolicy.tinylm.model import load_pretrained\n\n"
                                  "torch.set_num_threads(1)\nmodel = load_pretrained()\n"
                                  "tiny = replace(reinforce.Recipe(), max_updates=2, eval_every_updates=2, "
                                  "prompts_per_update=16, heldout_measured=50, stop_at_target=False)"),
        nbformat.v4.new_markdown_cell("## The runs\n\n" + FILLER),
        nbformat.v4.new_code_cell("\n".join(runs)),
        nbformat.v4.new_markdown_cell("## Another run\n\n" + FILLER),
        nbformat.v4.new_code_cell(later_run),
        nbformat.v4.new_markdown_cell("## After the runs\n\n" + FILLER),
        nbformat.v4.new_code_cell('print("the end")'),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    path = student_copy.parent / "first_hour_bars.ipynb"
    nbformat.write(notebook, path)
    yield path
    path.unlink(missing_ok=True)  # the lab's work folder holds the course's notebooks only (test_lab_server)


def test_progress_bars_in_view_one_width_labels_on_one_line(lab_server, bars_notebook, page, shots, run_all):
    open_in_lab(page, lab_server, f"{STUDENT_WORK}/{bars_notebook.name}")
    run_all(page, "first-hour")  # retried until the cells are queued
    bars = cell(page, 3).locator(".widget-hprogress")
    bars.first.wait_for(timeout=RUN_TIMEOUT_MS)
    # the script waits for JupyterLab's own scroll to the last cell, then brings the bar in: on a loaded machine
    # that takes a while, so look again for up to 15 s
    training_in_view = in_view(page, 3)
    for _ in range(60):
        if training_in_view >= 40:
            break
        page.wait_for_timeout(250)
        training_in_view = in_view(page, 3)
    page.screenshot(path=str(shots / "training-started.png"))  # asserted last, after the bars' layout

    wait_until_run(page, RUN_TIMEOUT_MS)
    page.wait_for_timeout(1_000)
    page.screenshot(path=str(shots / "training-ended.png"))
    later_training_in_view = in_view(page, 5)  # the second long cell, below the first: the view followed it
    from playwright.sync_api import expect

    bars = page.locator(".jp-Notebook .widget-hprogress")
    expect(bars).to_have_count(len(RUN_LABELS))
    # every cell laid out for the measure (JupyterLab skips the layout of cells out of view: content-visibility)
    page.add_style_tag(content=".jp-Notebook * { content-visibility: visible !important; }")
    cell(page, 3).locator(".jp-OutputArea").screenshot(path=str(shots / "progress-bars.png"))
    widths = bars.evaluate_all("nodes => nodes.map(n => Math.round(n.getBoundingClientRect().width))")
    assert len(set(widths)) == 1, f"the bars differ in width: {widths}"
    labels = page.locator(".jp-Notebook .widget-hbox > .widget-html:first-child")
    shown = labels.evaluate_all("""nodes => nodes.map(n => {
        const text = n.querySelector('.widget-html-content');
        const range = document.createRange();
        range.selectNodeContents(text);
        return {text: text.textContent.replace(/\\u2007/g, ' '), lines: range.getClientRects().length};
    })""")
    assert [label["text"].split(":")[0].strip() for label in shown] == list(RUN_LABELS)
    assert all(label["lines"] == 1 for label in shown), f"a label wraps: {shown}"
    assert training_in_view >= 40, "the training cell's progress bar was out of view while it ran"
    assert later_training_in_view >= 40, "the second training cell's progress bar was out of view while it ran"


# every text the course's Validate status takes, in order (the page keeps them: a poll from here would miss some)
RECORD_STATUS = """() => {
  window.validateStatus = [];
  new MutationObserver(() => {
    const heard = document.querySelector('.lmpolicy-validation-progress [role=status]');
    const text = heard ? heard.textContent : null;
    if (window.validateStatus[window.validateStatus.length - 1] !== text) window.validateStatus.push(text);
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def test_the_lab_answers_while_validate_runs_and_says_which_cell_runs(lab_server, student_copy, page, shots):
    """Notebook 01 as released: Validate runs it from the top; meanwhile the server answers another request (the
    button still reads "Validating..." when the answer comes), a status beside the button says which of the
    notebook's code cells runs (its screen-reader status changing with the cell), it is gone when the dialog
    lists the failing checks."""
    import re

    from playwright.sync_api import expect

    notebook = student_copy / "01_policy_softmax.ipynb"
    code_cells = sum(c.cell_type == "code" and bool(c.source.strip()) for c in nbformat.read(notebook, as_version=4).cells)
    open_in_lab(page, lab_server, f"{STUDENT_COPY}/{notebook.name}")
    page.evaluate(RECORD_STATUS)
    button = page.locator(".validate-button").first
    button.click()
    expect(button).to_contain_text("Validating...", timeout=30_000)
    status, _, _ = lab_server.get("/api/contents/" + STUDENT_COPY)
    still_validating = button.text_content()
    shown = page.locator(".lmpolicy-validation-progress")
    expect(shown).to_contain_text(re.compile(rf"\d+ s · cell \d+ of {code_cells}"), timeout=30_000)
    page.screenshot(path=str(shots / "validating.png"))
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=RUN_TIMEOUT_MS * 2)
    page.screenshot(path=str(shots / "validated.png"))
    assert status == 200
    assert "Validating..." in still_validating, "the server answered only once Validate had finished"
    expect(dialog).to_contain_text("Exercise 11.1(a)")
    expect(shown).to_have_count(0)
    heard = [text for text in page.evaluate("window.validateStatus") if text]
    places = [int(m.group(1)) for m in (re.search(rf"cell (\d+) of {code_cells}\b", t) for t in heard) if m]
    assert heard[0] == "Validating: starting a fresh kernel", heard
    assert places and places == sorted(places) and len(set(places)) == len(places), heard  # each cell heard once
