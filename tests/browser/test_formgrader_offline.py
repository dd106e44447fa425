"""Formgrader's grading page with the network off: a written answer's formulas are typeset by the installed MathJax.

The instructor's `make instructor` serves a graded tiny course kept under test-artifacts/ (the course must lie
inside the server's root), which formgrader opens as nbgrader's "Formgrader (local)" command does
(`/formgrader?path=<the course folder>`). Every request that does not go to the server is aborted, as on a
closed network. The grading page of the one submission must show its written answer's formulas typeset by
MathJax (loaded from jupyter-server-mathjax's /static/jupyter_server_mathjax/), with no LaTeX left raw.
"""
from __future__ import annotations

import re
import shutil
from urllib.parse import urlparse

import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.grading import grade_class, load_config
from tests.browser.conftest import ROOT, _serve
from tests.lmpolicy_grader import tiny_course
from tests.lmpolicy_grader.test_feedback_offline import WRITTEN

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
        page.wait_for_function("window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0", timeout=60_000)
        rendered = page.locator("span.MathJax").count()
        text = page.evaluate("document.body.innerText")
        page.screenshot(path=str(artifacts_dir / "formgrader-offline.png"), full_page=True)
    finally:
        context.close()
    assert rendered == 2, f"{rendered} formulas typeset"  # both formulas of the written answer
    assert "\\frac" not in text and "$x^2" not in text, "raw LaTeX left on the grading page"
    assert mathjax_loaded and all(p.startswith("/static/jupyter_server_mathjax/") for p in mathjax_loaded)
    assert blocked == [], "the grading page asked the outside network for something"
