"""A feedback file opened from disk with the network off: its formulas are typeset by the installed MathJax."""
from __future__ import annotations

import re

import pytest

from tests.lmpolicy_grader.scenarios.test_feedback_offline import grade_written_answer

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]


def test_a_formula_in_the_feedback_renders_with_the_network_off(chromium, tmp_path_factory):
    feedback = grade_written_answer(tmp_path_factory)
    context = chromium.new_context(offline=True)
    blocked = []
    context.route(re.compile(r"^https?://"), lambda route: (blocked.append(route.request.url), route.abort()))
    try:
        page = context.new_page()
        page.goto(feedback.as_uri())
        page.wait_for_selector("span.MathJax", timeout=60_000)  # MathJax typeset a formula
        rendered = page.locator("span.MathJax").count()
        raw = page.evaluate("document.body.innerText.includes('\\\\frac')")
    finally:
        context.close()
    assert (rendered, raw) == (2, False)  # both formulas of the written answer typeset, no raw LaTeX left
    assert not any("mathjax" in url.lower() for url in blocked), blocked
