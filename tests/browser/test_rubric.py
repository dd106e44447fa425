"""Written answers graded with the rubric in formgrader, in Chromium: by key and by click, identical answers once,
one taken out of its group and graded on its own; then the gradebook (nbgrader's Gradebook API), formgrader's own
grading page, the report and the feedback all hold the same manual scores and comments.

A class of five handed in notebook 05 (tests/lmpolicy_grader/rubric/written_class.py): ``ada`` the corpus's good
answers, ``bo`` the same answers wrapped otherwise with another case (so one group with ada's), ``cy`` the partial
answers, ``dee`` nothing (the release's text), ``mallory`` a written answer made of active markup. Screenshots:
test-artifacts/rubric/.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lmpolicy_grader.class_grading.course import load_config, load_outcomes
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.report import exercise_rows
from lmpolicy_grader.rubric.answer_groups import answer_groups
from tests.browser.conftest import ROOT, _serve, emptied
from tests.lmpolicy_grader.rubric.written_class import NOTEBOOK, make_class, written_cells

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

COURSE = "test-artifacts/rubric-course"  # inside the server's root, as formgrader needs
KINDS = {"ada": "good", "bo": "good_rewrapped", "cy": "partial", "dee": "blank", "mallory": "partial"}
CELL = "ex11_5a__manual"  # 3 points, three items
HOSTILE = ('Stationary point. <img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'
           '<a href="javascript:window.__pwned = 3">see</a>')


@pytest.fixture(scope="module")
def graded_class():
    root = make_class(ROOT / COURSE, KINDS)
    path = root / "submitted" / "mallory" / "ch11" / f"{NOTEBOOK}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CELL).source = HOSTILE
    nbformat.write(notebook, path)
    grade_class(root, workers=2, log=lambda _: None)
    return root


@pytest.fixture(scope="module")
def instructor_server(tmp_path_factory):
    """A `make instructor` of this module's own (formgrader keeps the course it opened first)."""
    yield from _serve("instructor", tmp_path_factory.mktemp("rubric-server"))


@pytest.fixture(scope="module")
def shots(artifacts_dir) -> Path:
    return emptied(artifacts_dir / "rubric")


def _gradebook(root):
    from nbgrader.api import Gradebook
    config = load_config(root)
    return Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id)


def _manual(root, student: str, cell: str = CELL) -> tuple:
    """(manual score, needs manual grade, manual comment) of ``student``'s ``cell``, from nbgrader's Gradebook API."""
    with _gradebook(root) as gradebook:
        submission = gradebook.find_submission_notebook(NOTEBOOK, "ch11", student)
        grade = next(g for g in submission.grades if g.name == cell)
        comment = next(c for c in submission.comments if c.name == cell)
        return grade.manual_score, grade.needs_manual_grade, comment.manual_comment or ""


def test_identical_answers_make_one_group_and_different_grades_keep_them_apart(graded_class):
    cells = written_cells()

    def groups():
        with _gradebook(graded_class) as gradebook:
            return [(group.cell, [m.student for m in group.members]) for group in answer_groups(
                gradebook, NOTEBOOK, "ch11", cells,
                lambda student: graded_class / "autograded" / student / "ch11" / f"{NOTEBOOK}.ipynb")]

    found = groups()
    # ada's and bo's answers differ only in whitespace and case: one group per cell; every other answer its own
    assert [students for cell, students in found if cell == CELL] == [["ada", "bo"], ["cy"], ["dee"], ["mallory"]]
    assert [cell for cell, _ in found] == sorted((cell for cell, _ in found), key=cells.index)
    assert len(found) == len(cells) * 3 + 1  # mallory's other answers are cy's (both partial): grouped too


def _open_rubric(page, server) -> None:
    page.goto(server.url(f"/formgrader/rubric/ch11/{NOTEBOOK}/"))
    page.wait_for_function("() => document.documentElement.getAttribute('data-rubric-ready') === 'true' "
                           "&& window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0", timeout=60_000)


def test_a_grader_grades_with_the_rubric_by_key_and_click_and_every_view_agrees(
        chromium, graded_class, instructor_server, shots):
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)  # a save on a busy 2-core machine can take longer than the default 5 s
    context = chromium.new_context(viewport={"width": 1400, "height": 1100})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    saved = page.locator("#saved")
    try:
        page.goto(instructor_server.url(f"/formgrader?path={COURSE}"))
        page.wait_for_url(re.compile(r"/formgrader/manage_assignments"), timeout=60_000)
        _open_rubric(page, instructor_server)
        expect(page.locator("#members a")).to_have_text(["ada", "bo"])  # the first group: ada's and bo's answer
        rubric = page.locator(f"section.rubric[data-cell='{CELL}']")
        expect(rubric).to_be_visible()
        page.screenshot(path=str(shots / "rubric-page.png"))

        for key in "123":  # every item, by key
            page.keyboard.press(key)
        expect(saved).to_have_text("saved for 2 student(s): 3 points")
        page.keyboard.press("n")
        expect(page.locator("#members a")).to_have_text(["cy"])
        rubric.locator("li.item").nth(0).locator(".words").click()  # item 1 by click
        expect(saved).to_have_text("saved for 1 student(s): 1 points")
        page.keyboard.press("Shift+Digit2")  # half of item 2
        expect(saved).to_have_text("saved for 1 student(s): 1.5 points")
        page.keyboard.press("ArrowRight")
        expect(page.locator("#members a")).to_have_text(["dee"])
        page.keyboard.press("0")  # no credit
        expect(saved).to_have_text("saved for 1 student(s): 0 points")
        page.keyboard.press("n")
        expect(page.locator("#members a")).to_have_text(["mallory"])
        page.screenshot(path=str(shots / "rubric-hostile-answer.png"))
        assert page.evaluate("window.__pwned") is None
        shown = page.locator("section.answer-group:not([hidden]) .answer")
        assert "Stationary point." in shown.inner_text()
        assert shown.locator("img[onerror], script, a[href^='javascript']").count() == 0

        page.keyboard.press("p")
        page.keyboard.press("p")
        page.keyboard.press("p")
        expect(page.locator("#members a")).to_have_text(["ada", "bo"])
        page.locator("#members li", has_text="bo").locator("button.alone").click()  # reopened on its own
        expect(page.locator("#members a")).to_have_text(["bo"])
        page.keyboard.press("3")  # bo's answer without item 3
        expect(saved).to_have_text("saved for 1 student(s): 2 points")
        page.screenshot(path=str(shots / "rubric-graded.png"))
        assert errors == []

        ada, bo, cy, dee = (_manual(graded_class, student) for student in ("ada", "bo", "cy", "dee"))
        assert (ada[0], ada[1]) == (3, False) and ada[2].startswith("Rubric: 3 of 3 points\n\n- \u2713 1 of 1: the Lagrangian")
        assert (bo[0], bo[1]) == (2, False) and bo[2].startswith("Rubric: 2 of 3 points")
        assert "\n- \u2717 0 of 1: global maximum" in bo[2]
        assert cy[0] == 1.5 and "\n- \u00bd 0.5 of 1: solving" in cy[2]
        assert dee[0] == 0 and dee[2].count("\u2717") == 3
        assert _manual(graded_class, "ada", "ex11_5c__manual")[:2] == (None, True)  # the other cells untouched

        _open_rubric(page, instructor_server)  # opened again: ada's and bo's grades differ, so two groups now
        page.keyboard.press("p")  # the first group needing a grade is shown first; go back to the graded ones
        page.keyboard.press("p")
        page.keyboard.press("p")
        page.keyboard.press("p")
        page.keyboard.press("p")
        expect(page.locator("#members a")).to_have_text(["ada"])
        expect(rubric.locator("li.item[data-applied='1']")).to_have_count(3)  # read back from the comment
        expect(page.locator("#score")).to_have_text("3")

        with _gradebook(graded_class) as gradebook:  # formgrader's own grading page shows the same
            submission_id = gradebook.find_submission_notebook(NOTEBOOK, "ch11", "bo").id
        page.goto(instructor_server.url(f"/formgrader/submissions/{submission_id}/?index=0"))
        page.wait_for_function("() => window.formgrader && formgrader.grades && formgrader.grades.loaded "
                               "&& formgrader.comments && formgrader.comments.loaded", timeout=60_000)
        assert page.locator(f"input.score#{CELL}").input_value() == "2"
        assert page.locator(f"textarea#{CELL}-comment").input_value().startswith("Rubric: 2 of 3 points")
        page.locator(f"input.score#{CELL}").locator("xpath=ancestor::div[contains(@class, 'nbgrader_cell')]").screenshot(
            path=str(shots / "formgrader-shows-the-rubric-grade.png"))
    finally:
        context.close()

    rows = {(r.student, r.exercise): r for r in exercise_rows(graded_class, load_outcomes(graded_class))}
    ada_row, bo_row = rows[("ada", "ex11_5a")], rows[("bo", "ex11_5a")]
    assert (ada_row.waiting, bo_row.waiting) == (0, 0)
    assert (ada_row.score, bo_row.score) == (ada_row.max_score, bo_row.max_score - 1)

    subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "generate_feedback", "ch11", "--force",
                    "--student", "bo"], cwd=graded_class, check=True, capture_output=True)
    feedback = graded_class / "feedback" / "bo" / "ch11" / f"{NOTEBOOK}.html"
    html = feedback.read_text()
    assert "Rubric: 2 of 3 points" in html and "global maximum" in html
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = context.new_page()
        page.goto(feedback.as_uri())
        page.get_by_text("Rubric: 2 of 3 points").first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "feedback-shows-the-rubric.png"))
        text = page.locator("body").inner_text()
        assert "Rubric: 2 of 3 points" in text and "2.0 / 3.0" in text
    finally:
        context.close()
