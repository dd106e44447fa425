"""The feedback page's filters (FeedbackHTMLExporter): what each scored part is called, the notebook's headings under
the page's h1, and code colours of at least 4.5:1. The page itself is measured in Chromium by
tests/browser/test_feedback_accessibility.py."""
from __future__ import annotations

import re

import nbformat
import pytest

from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.nbgrader_plugins.feedback_exporter import (CODE_STYLE, FeedbackHTMLExporter, code_colours,
                                                                demote_headings, part_names)


def _cell(kind: str, grade_id: str, **nbgrader):
    cell = nbformat.v4.new_markdown_cell("text") if kind == "markdown" else nbformat.v4.new_code_cell("x = 1")
    cell.metadata["nbgrader"] = {"grade_id": grade_id, **nbgrader}
    return cell


def test_each_scored_or_answered_cell_is_named_by_its_exercise_and_what_it_is():
    nb = nbformat.v4.new_notebook(cells=[
        _cell("code", "ex11_1a__parameters", locked=True),
        _cell("code", "ex11_1a__answer", solution=True),
        _cell("code", "ex11_1a__tests", grade=True, points=3),
        _cell("markdown", "ex11_1b__manual", solution=True, grade=True, points=2),
        _cell("code", "task4__tests_one", grade=True, points=1),
        _cell("code", "task4__tests_two", grade=True, points=1),
        _cell("markdown", "task5__task", task=True, points=1),
        _cell("code", "double__tests", grade=True, points=1),  # a grade id of none of the chapter's forms
    ])
    assert part_names(nb) == {
        "ex11_1a__answer": "Exercise 11.1(a): your answer",
        "ex11_1a__tests": "Exercise 11.1(a): its check cell",
        "ex11_1b__manual": "Exercise 11.1(b): your written answer",
        "task4__tests_one": "Lab Task 4: its check cell (1 of 2)",
        "task4__tests_two": "Lab Task 4: its check cell (2 of 2)",
        "task5__task": "Lab Task 5: the task",
        "double__tests": "Cell double__tests: its check cell",
    }  # the locked parameters cell has no name of its own


def test_headings_go_one_level_down_and_nothing_else_changes():
    html = ('<h1 class="x">Title<a class="anchor-link" href="#t">¶</a></h1><p title="<h1>">a &lt;h2&gt; b</p>'
            "<H2>Part</H2><h5>e</h5><h6>f</h6><hr/><header>not a heading</header>")
    assert demote_headings(html) == (
        '<h2 class="x">Title<a class="anchor-link" href="#t">¶</a></h2><p title="<h1>">a &lt;h2&gt; b</p>'
        "<h3>Part</h3><h6>e</h6><h6>f</h6><hr/><header>not a heading</header>")


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.mark.parametrize("background", ["ffffff", "f5f5f5"])  # the code's white, and bootstrap's grey <pre>
def test_every_colour_of_the_code_style_is_at_least_4_5_to_1(background):
    css = code_colours(".highlight")
    colours = {re.sub(r"^([0-9a-f])([0-9a-f])([0-9a-f])$", r"\1\1\2\2\3\3", c.lower())
               for c in re.findall(r"\.highlight \.\w+ \{[^}]*?(?<!-)color: #([0-9A-Fa-f]{3,6})", css)}
    assert len(colours) >= 5, css  # the style's token colours, read from its CSS
    lighter = _luminance(background)
    ratios = {c: (lighter + 0.05) / (_luminance(c) + 0.05) for c in colours}
    assert min(ratios.values()) >= 4.5, (CODE_STYLE, sorted(ratios.items(), key=lambda item: item[1])[:3])


def test_the_feedback_page_is_one_document_with_one_h1(repo_root):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Notebook 1\n\n## Part"),
                                         _cell("code", "ex11_1a__tests", grade=True, points=3, score=3.0),
                                         _cell("code", "<b>x__tests", grade=True, points=1, score=0.0)])
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    resources = {"nbgrader": {"notebook": "01_x", "score": 3.0, "max_score": 3.0, "late_penalty": 0}}
    from nbgrader.converters import GenerateFeedback
    config = GenerateFeedback(config=load_config(repo_root)).config  # the course's, with nbgrader's feedback paths
    exporter = FeedbackHTMLExporter(config=config)
    html, _ = exporter.from_notebook_node(nb, resources)
    assert html.count("<html") == html.count("<body") == html.count("<main") == 1 and '<html lang="en">' in html
    assert re.findall(r"<(h[1-6])\b", html) == ["h1", "h2", "h3"]
    assert '<a href="#ex11_1a__tests">Exercise 11.1(a): its check cell</a>' in html
    assert "Cell &lt;b&gt;x__tests: its check cell" in html and "<b>x" not in html  # a grade id is text
    assert re.search(r'tabindex="0" role="group"\s+aria-label="Exercise 11.1\(a\): its check cell, code"', html)
