"""The feedback page a student gets back meets WCAG 2.1 AA, measured in Chromium on a real graded submission.

One student's notebook 01, as they hand it in: run top to bottom in their own kernel (so it carries their outputs),
with the corpus's softmax that reduces without keepdim (its check reports the error) and a sequence_logprob that
sums over every dimension (its check fails), and a good written answer; released, graded and given feedback as
`make grade` does. Its feedback page, opened from disk at 1280x800:

- axe-core (test_accessibility's helper) with the WCAG 2.0/2.1 A and AA rules finds nothing anywhere on the page;
- <html lang>, one h1 and it first, no heading level skipped; the list of scored parts names each part
  ("Exercise 11.1(a): its check cell") and each link leads to a cell of the page;
- every region that scrolls is reached by Tab, has a name, shows its focus, and scrolls with the arrow keys.

Screenshots: test-artifacts/feedback-accessibility/.
"""
from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.examples_course import as_handed_in, with_answers, written_answers
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.status import Status
from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS
from tests.browser.conftest import emptied
from tests.browser.test_accessibility import LAPTOP, axe_check
from tests.lmpolicy_grader.class_grading.test_examples_course import _course
from tests.notebooks.notebook_tools import STUDENT_CELL_TIMEOUT, kernel_env

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

NOTEBOOK = "01_policy_softmax"
STUDENT = "two-mistakes"
MISTAKES = ("reduces without keepdim=True", "sums over every dimension")  # the corpus's words for them
PARTS = ["Exercise 01.softmax: its check cell", "Exercise 11.1(a): its check cell",
         "Exercise 11.1(b): your written answer"]


@pytest.fixture(scope="module")
def feedback(tmp_path_factory, repo_root):
    """The feedback page of the submission above (before the browser starts: the student's kernel runs here)."""
    root = _course(tmp_path_factory.mktemp("feedback-accessibility"), repo_root,
                   [repo_root / "source" / "ch11" / f"{NOTEBOOK}.ipynb"])
    release(root)
    handed_in = as_handed_in(nbformat.read(root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4),
                             nbformat.read(root / "release" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4),
                             written_answers(NOTEBOOK, "good"))
    mistakes = [w for w in WRONG_ANSWERS if w.notebook == NOTEBOOK and w.why.startswith(MISTAKES)]
    notebook = with_answers(handed_in, mistakes)
    folder = root / "submitted" / STUDENT / "ch11"
    folder.mkdir(parents=True)
    path = folder / f"{NOTEBOOK}.ipynb"
    nbformat.write(notebook, path)  # saved, then run (as jupyter_server runs it: its kernel knows the notebook)
    NotebookClient(notebook, kernel_name="python3", timeout=STUDENT_CELL_TIMEOUT, allow_errors=True,
                   resources={"metadata": {"path": str(folder)}}).execute(
        env={**kernel_env(grader=False, progress_file=root / "progress.json"), "LMPOLICY_STUDENT_ID": STUDENT,
             "JPY_SESSION_NAME": str(path)})
    nbformat.write(notebook, path)  # with its outputs: what the student hands in
    outcomes = grade_class(root, workers=1, feedback=True, log=lambda _: None)
    assert [(o.student, o.status) for o in outcomes] == [(STUDENT, Status.GRADED)], outcomes
    return root / "feedback" / STUDENT / "ch11" / f"{NOTEBOOK}.html"


@pytest.fixture(scope="module")
def shots(artifacts_dir):
    return emptied(artifacts_dir / "feedback-accessibility")


def open_feedback(chromium, feedback):
    """The page as the student sees it, its formulas typeset. The context lets axe in: Playwright adds it as an
    inline script, which the page's own Content-Security-Policy refuses."""
    context = chromium.new_context(viewport=LAPTOP, bypass_csp=True)
    page = context.new_page()
    page.goto(feedback.as_uri())
    page.wait_for_function("() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 "
                           "&& document.querySelectorAll('span.MathJax').length > 0", timeout=60_000)
    return context, page


OUTLINE_JS = """() => ({
  lang: document.documentElement.lang,
  levels: [...document.querySelectorAll('h1, h2, h3, h4, h5, h6')].map(h => Number(h.tagName[1])),
  parts: [...document.querySelectorAll('header nav a')].map(a => a.textContent.trim()),
  leads_nowhere: [...document.querySelectorAll('a[href^="#"]')]
    .filter(a => a.offsetParent !== null && !document.getElementById(decodeURIComponent(a.hash.slice(1))))
    .map(a => a.outerHTML.slice(0, 120)),
})"""


def test_the_feedback_page_passes_axe_with_one_h1_first_and_links_that_say_where_they_go(feedback, chromium, shots):
    context, page = open_feedback(chromium, feedback)
    try:
        page.screenshot(path=str(shots / "feedback-light.png"), full_page=True)
        found = axe_check(page, "feedback-light", shots)
        outline = page.evaluate(OUTLINE_JS)
    finally:
        context.close()
    assert found["course"] + found["lab"] == []  # the whole page is the course's: nothing of JupyterLab here
    assert outline["lang"] == "en"
    levels = outline["levels"]
    assert levels[0] == 1 and levels.count(1) == 1, levels
    assert all(later <= earlier + 1 for earlier, later in zip(levels, levels[1:])), levels  # no level skipped
    assert outline["parts"] == PARTS
    assert outline["leads_nowhere"] == []


# Mark every element that scrolls (its content wider or taller than its box, and overflow auto or scroll).
SCROLLING_JS = """() => {
  const scrolls = el => {
    const style = getComputedStyle(el);
    return (el.scrollWidth > el.clientWidth + 1 && /auto|scroll/.test(style.overflowX))
        || (el.scrollHeight > el.clientHeight + 1 && /auto|scroll/.test(style.overflowY));
  };
  const found = [...document.body.querySelectorAll('*')].filter(scrolls);
  found.forEach((el, i) => { el.dataset.scrollRegion = String(i); });
  return found.map(el => el.scrollWidth > el.clientWidth + 1);  // for each, whether it scrolls sideways
}"""
FOCUSED_JS = """() => {
  const el = document.activeElement, style = getComputedStyle(el);
  return {region: el.dataset.scrollRegion ?? null, name: el.getAttribute('aria-label'),
          visible_focus: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0,
          scroll_left: el.scrollLeft};
}"""


def test_tab_reaches_every_scrolling_region_which_is_named_and_scrolls_by_the_arrow_keys(feedback, chromium, shots):
    context, page = open_feedback(chromium, feedback)
    try:
        regions = page.evaluate(SCROLLING_JS)
        stops = page.evaluate("() => document.querySelectorAll('a[href], [tabindex]').length")
        reached = {}
        for _ in range(stops + 2):  # once round the page
            page.keyboard.press("Tab")
            focused = page.evaluate(FOCUSED_JS)
            if focused["region"] is not None:
                reached.setdefault(focused["region"], focused)
        first = next((str(i) for i, sideways in enumerate(regions) if sideways and str(i) in reached), None)
        if first is not None:
            page.focus(f'[data-scroll-region="{first}"]')
            page.keyboard.press("ArrowRight")
            page.keyboard.press("ArrowRight")
            page.wait_for_timeout(300)  # the smooth scroll
            moved = page.evaluate(FOCUSED_JS)
            page.screenshot(path=str(shots / "feedback-scrolling-region-focused.png"))
    finally:
        context.close()
    assert any(regions)  # the progress summary's long lines, at least
    assert sorted(reached, key=int) == [str(i) for i in range(len(regions))], (regions, reached)
    assert all(state["name"] and state["visible_focus"] for state in reached.values()), reached
    assert moved["region"] == first and moved["scroll_left"] > 0, moved
