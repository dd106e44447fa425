"""The feedback pages a student gets back meet WCAG 2.1 AA, measured in Chromium on real graded submissions.

One student hands in every notebook of ch11, each run top to bottom in their own kernel (so it carries their outputs),
then released, graded and given feedback as `make grade` does:

- notebook 01 with the corpus's softmax that reduces without keepdim (its check reports the error) and a
  sequence_logprob that sums over every dimension (its check fails), and a good written answer;
- notebooks 02 to 07 with the reference's answers and the good written answers: their equations, tables, long
  printed outputs and written answers;
- notebook 08 as released, run unfinished: its training stops at the first piece not written, in seconds, where the
  whole training takes minutes. So its page has no figure; nor would a finished one: each figure of notebook 08
  (a PNG of more than 100 kB) is cut from the feedback by OutputsAsHandedIn's cap on a cell's handed-in outputs.

Each feedback page, opened from disk at 1280x800 (the page has one look, light):

- axe-core (test_accessibility's helper) with the WCAG 2.0/2.1 A and AA rules finds nothing anywhere on the page;
- <html lang>, one h1 and it first, no heading level skipped; the list of scored parts names each part
  ("Exercise 11.1(a): its check cell") and each link leads to a cell of the page;
- (notebook 01) every region that scrolls is reached by Tab, has a name, shows its focus, and scrolls with the arrow
  keys; on the other pages axe's scrollable-region-focusable rule checks that each is reached by the keyboard.

Screenshots: test-artifacts/feedback-accessibility/.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

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
from tests.notebooks.notebook_tools import NOTEBOOK_NAMES, STUDENT_CELL_TIMEOUT, kernel_env

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

NOTEBOOK = "01_policy_softmax"
UNFINISHED = "08_tinylm_reinforce"  # handed in as released: its training would take minutes
STUDENT = "two-mistakes"
MISTAKES = ("reduces without keepdim=True", "sums over every dimension")  # the corpus's words for them
PARTS = ["Exercise 01.softmax: its check cell", "Exercise 11.1(a): its check cell",
         "Exercise 11.1(b): your written answer"]
# what the page's list calls a part: its exercise (or lab task) and what the cell is (or the grader's comment on it),
# never a bare "Test cell"
PART_NAME = re.compile(r"^(Exercise|Lab Task) [^:]+: (its check cell|your answer|your written answer|the task)"
                       r"( \(\d+ of \d+\))?(: the grader's comment)?$")


def handed_in(root, name: str) -> nbformat.NotebookNode:
    """What the student hands in of notebook ``name``, before they run it."""
    released = nbformat.read(root / "release" / "ch11" / f"{name}.ipynb", as_version=4)
    if name == UNFINISHED:
        return released
    notebook = as_handed_in(nbformat.read(root / "source" / "ch11" / f"{name}.ipynb", as_version=4), released,
                            written_answers(name, "good"))
    if name == NOTEBOOK:
        notebook = with_answers(notebook, [w for w in WRONG_ANSWERS
                                           if w.notebook == NOTEBOOK and w.why.startswith(MISTAKES)])
    return notebook


def run_as_the_student(root, name: str) -> None:
    """Notebook ``name`` saved as handed in, run top to bottom in the student's kernel, and saved with its outputs."""
    folder = root / "submitted" / STUDENT / "ch11"
    notebook, path = handed_in(root, name), folder / f"{name}.ipynb"
    nbformat.write(notebook, path)  # saved, then run (as jupyter_server runs it: its kernel knows the notebook)
    NotebookClient(notebook, kernel_name="python3", timeout=STUDENT_CELL_TIMEOUT, allow_errors=True,
                   resources={"metadata": {"path": str(folder)}}).execute(
        env={**kernel_env(grader=False, progress_file=root / "progress.json"), "LMPOLICY_STUDENT_ID": STUDENT,
             "JPY_SESSION_NAME": str(path)})
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def feedback(tmp_path_factory, repo_root):
    """{notebook: its feedback page} of the submissions above (before the browser starts: the student's kernels run
    here, two notebooks at a time, as two open tabs do; their progress file takes one writer at a time)."""
    root = _course(tmp_path_factory.mktemp("feedback-accessibility"), repo_root,
                   [repo_root / "source" / "ch11" / f"{name}.ipynb" for name in NOTEBOOK_NAMES])
    release(root)
    (root / "submitted" / STUDENT / "ch11").mkdir(parents=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda name: run_as_the_student(root, name), NOTEBOOK_NAMES))
    outcomes = grade_class(root, workers=2, feedback=True, log=lambda _: None)
    assert [(o.student, o.status) for o in outcomes] == [(STUDENT, Status.GRADED)] * len(NOTEBOOK_NAMES), outcomes
    return {name: root / "feedback" / STUDENT / "ch11" / f"{name}.html" for name in NOTEBOOK_NAMES}


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


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_each_feedback_page_passes_axe_with_one_h1_first_and_links_that_say_where_they_go(name, feedback, chromium,
                                                                                          shots):
    context, page = open_feedback(chromium, feedback[name])
    try:
        page.screenshot(path=str(shots / f"feedback-{name}.png"), full_page=True)
        found = axe_check(page, f"feedback-{name}", shots)
        outline = page.evaluate(OUTLINE_JS)
    finally:
        context.close()
    assert found["course"] + found["lab"] == []  # the whole page is the course's: nothing of JupyterLab here
    assert outline["lang"] == "en"
    levels = outline["levels"]
    assert levels[0] == 1 and levels.count(1) == 1, levels
    assert all(later <= earlier + 1 for earlier, later in zip(levels, levels[1:])), levels  # no level skipped
    if name == NOTEBOOK:
        assert outline["parts"] == PARTS
    assert outline["parts"] and [part for part in outline["parts"] if not PART_NAME.match(part)] == []
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
    context, page = open_feedback(chromium, feedback[NOTEBOOK])
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
