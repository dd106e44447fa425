"""Feedback formulas render without internet: the feedback HTML loads the installed MathJax, never a CDN's.

The browser half (the formulas typeset with the network off) is tests/browser/test_feedback_offline.py.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class

from .. import tiny_course

pytestmark = pytest.mark.slow

WRITTEN = r"Because $x^2 = x \cdot x$ and $$\frac{d}{dx} x^2 = 2x,$$ a product of two numbers of the same sign."


@pytest.fixture(scope="module")
def feedback(tmp_path_factory) -> Path:
    return grade_written_answer(tmp_path_factory)


def grade_written_answer(tmp_path_factory) -> Path:
    """The feedback HTML of one tiny-course student whose written answer holds formulas."""
    root = tiny_course.make_course(tmp_path_factory.mktemp("feedback-offline"))
    release(root)
    notebook = tiny_course.source_notebook()
    tiny_course.replace_answer(notebook, "ex3__manual", WRITTEN)
    tiny_course.submit(root, "ada", notebook)
    grade_class(root, workers=1, log=lambda _: None)
    return root / "feedback" / "ada" / "ch11" / f"{tiny_course.NOTEBOOK}.html"


def test_feedback_loads_mathjax_from_the_installed_package_not_a_cdn(feedback):
    text = feedback.read_text()
    assert not re.search(r"https?://[^\"'\s]*mathjax", text, re.IGNORECASE), "a CDN address for MathJax"
    file_urls = re.findall(r"\"(file://[^\"]*MathJax\.js)\"", text)
    assert len(file_urls) == 1
    script = Path(url2pathname(urlparse(file_urls[0]).path))
    assert script.is_file() and "MathJax" in script.read_text()[:2000]
    assert (script.parent / "config" / "TeX-AMS-MML_HTMLorMML-full.js").is_file()  # the configuration it asks for
