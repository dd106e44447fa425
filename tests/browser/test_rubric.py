"""Written answers graded with the rubric in formgrader, in Chromium: by key and by click, identical answers once,
one taken out of its group and graded on its own; then the gradebook (nbgrader's Gradebook API), formgrader's own
grading page, the report and the feedback all hold the same manual scores and comments.

A class of five handed in notebook 05 (tests/lmpolicy_grader/rubric/written_class.py): ``ada`` the corpus's good
answers, ``bo`` the same answers wrapped otherwise with another case (so one group with ada's), ``cy`` the partial
answers, ``dee`` nothing (the release's text), ``mallory`` a written answer made of active markup. The same class's
rubric page and formgrader's grading page pass axe (WCAG 2.0/2.1 A and AA) in the course's markup, nbgrader's own
violations printed and written beside the screenshots, and every stop Tab reaches on the rubric page shows its
focus. Screenshots and axe results: test-artifacts/rubric/.
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
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


# axe on the whole page, each violating node sorted by whose markup it is: a student's (their written answer, inside
# ``students``, shown as they wrote it, sanitized), the course's (inside ``ours`` and not inside ``theirs``), or
# nbgrader's, with formgrader's own styles and scripts.
AXE_BY_ORIGIN_JS = """
async ([tags, ours, theirs, students]) => {
  const results = await axe.run(document, {runOnly: {type: 'tag', values: tags}, elementRef: true,
                                           resultTypes: ['violations']});
  const found = {course: [], nbgrader: [], students: []};
  for (const violation of results.violations) for (const node of violation.nodes) {
    const element = node.element, inside = (selector) => element && element.closest && element.closest(selector);
    const origin = inside(students) ? 'students' : inside(ours) && !inside(theirs) ? 'course' : 'nbgrader';
    found[origin].push({rule: violation.id, impact: node.impact, target: node.target.join(' '),
                        html: node.html.slice(0, 160), why: (node.failureSummary || '').slice(0, 240)});
  }
  return found;
}
"""
# On formgrader's grading page the course's markup is the notebook's own (its prose, the outputs) and the link to
# the rubric page the course adds; a Markdown cell in a graded panel is a student's written answer (ch11 has no task
# cells); the rest (navigation, score boxes, panels, the code's colours, and the pilcrow link nbconvert's Markdown
# renderer puts after each heading) is nbgrader's.
COURSE_ON_FORMGRADER = ".text_cell_render, .output_subarea, a.rubric-link"
STUDENTS_ON_FORMGRADER = ".nbgrader_cell .text_cell_render"
NBCONVERTS_IN_THE_COURSES = "a.anchor-link"
STUDENTS_ON_THE_RUBRIC_PAGE = ".answer"
# The focus of the element Tab reached, and whether it is seen: an outline, or the box shadow bootstrap draws
# around a focused form field.
FOCUS_SHOWN_JS = """() => {
  const el = document.activeElement, style = getComputedStyle(el);
  const outline = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0;
  return {what: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className ? '.' + el.className : ''),
          text: (el.textContent || '').trim().slice(0, 40), shown: outline || style.boxShadow !== 'none',
          in_body: el !== document.body};
}"""


def _axe_by_origin(page, name: str, shots, ours: str, students: str) -> dict:
    """axe (test_accessibility's copy and WCAG tags) on ``page``: {"course": [...], "nbgrader": [...],
    "students": [...]}, written to test-artifacts/rubric/<name>-axe.json and printed by rule."""
    import json

    from tests.browser.test_accessibility import AXE, WCAG_AA

    page.add_script_tag(path=str(AXE))
    found = page.evaluate(AXE_BY_ORIGIN_JS, [WCAG_AA, ours, NBCONVERTS_IN_THE_COURSES, students])
    (shots / f"{name}-axe.json").write_text(json.dumps(found, indent=1, ensure_ascii=False))
    by_rule = {origin: dict(sorted(Counter(v["rule"] for v in found[origin]).items())) for origin in found}
    print(f"\n{name}: axe found {len(found['course'])} violation(s) in the course's markup {by_rule['course']} and "
          f"{len(found['nbgrader'])} in nbgrader's {by_rule['nbgrader']}; {len(found['students'])} in the students' "
          f"written answers {by_rule['students']}")
    return found


def test_the_rubric_page_and_formgraders_grading_page_pass_axe_in_the_courses_markup_and_show_the_focus(
        chromium, graded_class, instructor_server, shots):
    """The pages of a grader grading written answers: the rubric page (all of it the course's but the answer shown)
    and formgrader's grading page around it (the course's markup in it); then the rubric page by Tab alone, its
    focus always seen. A student's written answer is theirs, sanitized: what axe finds in it is printed, not
    asserted (mallory's, its active markup taken out, leaves an <img> with no words)."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1100}, bypass_csp=True)  # axe is inlined
    page = context.new_page()
    try:
        page.goto(instructor_server.url(f"/formgrader?path={COURSE}"))
        page.wait_for_url(re.compile(r"/formgrader/manage_assignments"), timeout=60_000)
        _open_rubric(page, instructor_server)
        rubric = _axe_by_origin(page, "rubric-page", shots, "html", STUDENTS_ON_THE_RUBRIC_PAGE)  # all the course's
        page.screenshot(path=str(shots / "rubric-page-audited.png"))
        with _gradebook(graded_class) as gradebook:
            submission_id = gradebook.find_submission_notebook(NOTEBOOK, "ch11", "cy").id
        page.goto(instructor_server.url(f"/formgrader/submissions/{submission_id}/?index=0"))
        page.wait_for_function("() => window.formgrader && formgrader.grades && formgrader.grades.loaded "
                               "&& window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0", timeout=60_000)
        page.screenshot(path=str(shots / "formgrader-grading-page.png"))
        formgrader = _axe_by_origin(page, "formgrader-grading-page", shots, COURSE_ON_FORMGRADER,
                                    STUDENTS_ON_FORMGRADER)

        _open_rubric(page, instructor_server)
        stops = page.evaluate("() => document.querySelectorAll("
                              "'a[href], button, textarea, summary, [tabindex]:not([tabindex=\"-1\"])').length")
        reached = []
        for _ in range(stops):  # once round the page (hidden ones are skipped: fewer stops than that)
            page.keyboard.press("Tab")
            focused = page.evaluate(FOCUS_SHOWN_JS)
            if "apply" in focused["what"] and not any("apply" in r["what"] for r in reached):
                page.screenshot(path=str(shots / "rubric-focus-on-an-item.png"))
            reached.append(focused)
    finally:
        context.close()
    assert rubric["course"] == [], rubric["course"]
    assert formgrader["course"] == [], formgrader["course"]
    assert any("apply" in r["what"] for r in reached) and any(r["what"].startswith("textarea#note") for r in reached)
    assert [r for r in reached if r["in_body"] and not r["shown"]] == [], reached
