"""Formgrader's grading page with the network off: a written answer's formulas are typeset by the installed MathJax;
and a manual grade typed into that page, then flagged by a re-grade, is what the report calls "re-check".

The instructor's `make instructor` serves a graded tiny course kept under test-artifacts/ (the course must lie
inside the server's root), which formgrader opens as nbgrader's "Formgrader (local)" command does
(`/formgrader?path=<the course folder>`). Every request that does not go to the server is aborted, as on a
closed network. The grading page of the one submission must show its written answer's formulas typeset by
MathJax (loaded from jupyter-server-mathjax's /static/jupyter_server_mathjax/), with no LaTeX left raw.

The second test grades that answer by hand on the same page, re-grades the class, and checks that formgrader
(the highlighted score, the "Resolve" button) and the report ("re-check in formgrader") agree, before and after
the grader clicks Resolve. It runs after the first (file order) and changes the course's grades.
"""
from __future__ import annotations

import re
import shutil
from urllib.parse import urlparse

import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.course import load_config, load_outcomes
from lmpolicy_grader.class_grading.report import exercise_rows, student_summaries
from lmpolicy_grader.class_grading.status import Status
from tests.browser.conftest import ROOT, _serve
from tests.lmpolicy_grader import tiny_course
from tests.lmpolicy_grader.scenarios.test_feedback_offline import WRITTEN

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

COURSE = "test-artifacts/formgrader-offline-course"  # relative to the server's root, as the lab command sends it


@pytest.fixture(scope="module")
def graded_course():
    """The tiny course, released, with one student whose written answer holds formulas, graded."""
    root = ROOT / COURSE
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    tiny_course.make_course(root)
    release(root)
    tiny_course.submit(root, "ada", tiny_course.replace_answer(tiny_course.source_notebook(), "ex3__manual", WRITTEN))
    grade_class(root, workers=1, log=lambda _: None)
    return root


@pytest.fixture(scope="module")
def instructor_server(tmp_path_factory):
    """A `make instructor` of this module's own: opening another course in formgrader changes the server's
    course (and formgrader keeps the gradebook it opened first), so no other test shares it."""
    yield from _serve("instructor", tmp_path_factory.mktemp("formgrader-offline-server"))


MANUAL = "ex3__manual"


def _submission_id(root) -> str:
    config = load_config(root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        return gradebook.find_submission_notebook(tiny_course.NOTEBOOK, "ch11", "ada").id


def test_a_formula_in_formgrader_renders_with_the_network_off(chromium, graded_course, instructor_server,
                                                              artifacts_dir):
    server_host = urlparse(instructor_server.base_url).netloc
    context = chromium.new_context(viewport={"width": 1200, "height": 1400})
    blocked, mathjax_loaded = [], []

    def closed_network(route):
        url = urlparse(route.request.url)
        if url.scheme in ("http", "https") and url.netloc != server_host:
            blocked.append(route.request.url)
            return route.abort()
        if "/static/jupyter_server_mathjax/" in url.path:
            mathjax_loaded.append(url.path)
        return route.continue_()

    context.route(re.compile(r".*"), closed_network)
    try:
        page = context.new_page()
        page.goto(instructor_server.url(f"/formgrader?path={COURSE}"))  # "Formgrader (local)" in that folder
        page.wait_for_url(re.compile(r"/formgrader/manage_assignments"), timeout=60_000)
        page.goto(instructor_server.url(f"/formgrader/submissions/{_submission_id(graded_course)}/?index=0"))
        page.wait_for_selector("span.MathJax", timeout=60_000)  # MathJax typeset a formula
        # a function, not an expression: the page's policy refuses the eval that runs an expression string
        page.wait_for_function("() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0", timeout=60_000)
        rendered = page.locator("span.MathJax").count()
        text = page.evaluate("document.body.innerText")
        page.screenshot(path=str(artifacts_dir / "formgrader-offline.png"), full_page=True)
    finally:
        context.close()
    assert rendered == 2, f"{rendered} formulas typeset"  # both formulas of the written answer
    assert "\\frac" not in text and "$x^2" not in text, "raw LaTeX left on the grading page"
    assert mathjax_loaded and all(p.startswith("/static/jupyter_server_mathjax/") for p in mathjax_loaded)
    assert blocked == [], "the grading page asked the outside network for something"


def _ada(root):
    """(the written exercise's report row, ada's summary) as the report reads them from the gradebook."""
    rows = exercise_rows(root, load_outcomes(root))
    return next(r for r in rows if r.exercise == "ex3"), student_summaries(rows)["ada"]


def _open_grading_page(page, url: str) -> None:
    """Open the grading page and wait until it is ready for the grader's hand: its grades loaded (their inputs and
    buttons wired) and MathJax's start-up ended. At that end formgrader focuses the first input and scrolls to it
    for half a second, which a click made meanwhile can race (CI saw a click on Resolve send no grade)."""
    page.goto(url)
    page.wait_for_function("() => window.formgrader && formgrader.grades && formgrader.grades.loaded "
                           "&& window.MathJax && MathJax.loaded === true && MathJax.Hub.queue.pending === 0 "
                           "&& !$('body, html').is(':animated')", timeout=60_000)


def _saved(page, action) -> None:
    """Do ``action`` on the grading page and wait until formgrader's grade API has answered that it stored the grade."""
    with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT",
                              timeout=30_000) as answer:
        action()
    response = answer.value
    assert response.ok, f"formgrader did not store the grade: {response.status} {response.text()[:500]}"


def test_a_manual_grade_flagged_by_a_regrade_reads_re_check_in_formgrader_and_the_report(
        chromium, graded_course, instructor_server, artifacts_dir):
    from playwright.sync_api import expect

    context = chromium.new_context(viewport={"width": 1200, "height": 1400})
    try:
        page = context.new_page()
        page.goto(instructor_server.url(f"/formgrader?path={COURSE}"))
        page.wait_for_url(re.compile(r"/formgrader/manage_assignments"), timeout=60_000)
        grading_page = instructor_server.url(f"/formgrader/submissions/{_submission_id(graded_course)}/?index=0")
        _open_grading_page(page, grading_page)
        score = page.locator(f"input.score#{MANUAL}")
        panel = score.locator("xpath=ancestor::div[contains(@class, 'nbgrader_cell')]")
        resolve = panel.locator("button.mark-graded")
        assert "needs_manual_grade" in score.get_attribute("class")  # not graded yet: highlighted
        assert _ada(graded_course)[0].status == Status.PENDING

        _saved(page, lambda: (score.fill("1.5"), score.press("Tab")))  # the grader types a score
        # the page redraws the score once its script has read the answer, a moment after the response arrives here
        expect(score).not_to_have_class(re.compile(r"\bneeds_manual_grade\b"))
        row, summary = _ada(graded_course)
        assert (row.status, row.score, summary.status) == (Status.GRADED, 1.5, Status.COMPLETE)

        grade_class(graded_course, workers=1, log=lambda _: None)  # the class graded again, same submission
        _open_grading_page(page, grading_page)
        resolve.wait_for(state="visible", timeout=30_000)  # formgrader: kept score, flagged, "Resolve"
        assert score.input_value() == "1.5" and "needs_manual_grade" in score.get_attribute("class")
        panel.screenshot(path=str(artifacts_dir / "formgrader-recheck.png"))
        row, summary = _ada(graded_course)
        assert (row.status, row.score, row.waiting, row.recheck) == (Status.PENDING, 1.5, 0, 1)
        assert summary.open() == "1 manual grade(s) to re-check in formgrader"

        _saved(page, resolve.click)  # the grader checks the answer and keeps the score
        resolve.wait_for(state="hidden", timeout=30_000)
        row, summary = _ada(graded_course)
        assert (row.status, row.score, row.recheck, summary.status) == (Status.GRADED, 1.5, 0, Status.COMPLETE)
    except Exception:
        page.screenshot(path=str(artifacts_dir / "formgrader-recheck-failed.png"), full_page=True)
        raise
    finally:
        context.close()
