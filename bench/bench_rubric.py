"""Grading written answers by hand in Chromium: the rubric page against formgrader as shipped (run from the repository
root; about 5 minutes on 2 cores):

    .venv/bin/python bench/bench_rubric.py [--students 20] [--notebook 05_tilted_optimum]

A class of N students hands in the notebook (tests/lmpolicy_grader/rubric/written_class.py), each with written
answers of one kind, in this proportion (of 10): 2 good, 1 good wrapped otherwise with another case (the same
answer to the rubric), 2 partial, 3 in the student's own words (each unique), 1 wrong, 1 blank. It is autograded
once; the graded course is copied, and a grader (this script, driving Chromium through Playwright) grades every
written answer of the notebook by hand, once in each copy, with the same judgement per answer: a good answer every
rubric item (full marks), a partial one or one in the student's own words the first item, a wrong or blank one 0.

- **formgrader as shipped**, at its most frugal: one question across the class, by keyboard. The grader opens the
  first submission (1 click), clicks the question's score box (1 click), types the score, presses Ctrl+. (formgrader's
  "same input of the next submission", which saves), and so on to the last submission; then the next question. No
  comment is typed (the student learns only the score) and the mark scheme is read elsewhere (not counted).
- **the rubric page**: the grader opens it (1 click, from formgrader's breadcrumb), and for each group of identical
  answers presses the items' keys (or 0 for no credit), then n for the next answer. The score and a comment listing
  every item met and missed are written for every member of the group.

Counted: the grader's clicks and keystrokes (a chord such as Ctrl+. or Shift+2 is one keystroke), per answer;
measured: the browser's time from the first page to the last grade stored (page loads, formgrader's saves, the API's
writes: machine time, no human reading in it). Estimated: a grader's operating time by the keystroke-level model
(Card, Moran and Newell: 0.28 s a keystroke, 1.1 s to point plus 0.2 s to click, 1.35 s to decide each score), reading
the answers excluded, which both ways share except that the rubric reads each group once. At the end, both
gradebooks are read back (nbgrader's Gradebook API): every answer must hold the score its judgement gives.
"""
from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lmpolicy_grader.class_grading.course import load_config  # noqa: E402
from lmpolicy_grader.class_grading.grading import grade_class  # noqa: E402
from lmpolicy_grader.rubric.mark_scheme import rubrics  # noqa: E402
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, _serve  # noqa: E402
from tests.lmpolicy_grader.rubric.written_class import make_class, written_cells  # noqa: E402

PROPORTION = ("good", "partial", "own", "good_rewrapped", "wrong", "own", "good", "blank", "partial", "own")
KEYSTROKE, POINT_AND_CLICK, DECIDE = 0.28, 1.1 + 0.2, 1.35  # seconds (keystroke-level model)
COURSE = "test-artifacts/bench-rubric-course"


@dataclass
class Args:
    students: int = 20
    notebook: str = "05_tilted_optimum"
    workers: int = 2
    regrade: bool = True
    """False: use the class graded by the last run (test-artifacts/bench-rubric-course-graded) if it has this size."""


@dataclass
class Tally:
    clicks: int = 0
    keystrokes: int = 0
    decisions: int = 0
    seconds: float = 0.0

    def grader_seconds(self) -> float:
        return self.keystrokes * KEYSTROKE + self.clicks * POINT_AND_CLICK + self.decisions * DECIDE


def _kind_items(kind: str, items: int) -> list[int]:
    """The rubric items (1-based) the judgement gives an answer of ``kind``."""
    return list(range(1, items + 1)) if kind.startswith("good") else [1] if kind in ("partial", "own") else []


def _score(kind: str, points: list[float]) -> float:
    return sum(points[i - 1] for i in _kind_items(kind, len(points)))


def _open_formgrader(page, server, course: str) -> None:
    page.goto(server.url(f"/formgrader?path={course}"))
    page.wait_for_url(re.compile(r"/formgrader/manage_assignments"), timeout=60_000)


def _gradebook(root):
    from nbgrader.api import Gradebook
    config = load_config(root)
    return Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id)


READY = ("window.formgrader && formgrader.grades && formgrader.grades.loaded && formgrader.comments "
         "&& formgrader.comments.loaded")


def _grading_page_ready(page) -> None:
    page.wait_for_function(f"() => {READY}", timeout=120_000)


def _arrive(page, url_pattern: str, ready: str) -> None:
    """Wait until formgrader's navigation (a redirect, then the page) ends at ``url_pattern`` and ``ready`` holds."""
    from playwright.sync_api import Error

    deadline = time.monotonic() + 300
    while True:
        try:
            page.wait_for_url(re.compile(url_pattern), timeout=120_000)
            page.wait_for_function(ready, timeout=120_000)
            return
        except Error as error:  # the page navigated again while we waited (formgrader's redirect)
            if time.monotonic() > deadline or not re.search(r"ERR_ABORTED|context was destroyed|navigat", str(error)):
                raise


def stock(page, server, root: Path, notebook: str, kinds: dict, points: dict) -> Tally:
    tally = Tally()
    with _gradebook(root) as gradebook:
        ids = sorted(s.id for s in gradebook.notebook_submissions(notebook, "ch11"))  # formgrader's order
        students = {s.id: s.student.id for s in gradebook.notebook_submissions(notebook, "ch11")}
    started = time.perf_counter()
    for cell, cell_points in points.items():
        page.goto(server.url(f"/formgrader/submissions/{ids[0]}/?index=0"))  # the first submission, from the list
        tally.clicks += 1
        _grading_page_ready(page)
        page.locator(f"input.score#{cell}").click()
        tally.clicks += 1
        for number, submission in enumerate(ids):
            score = f"{_score(kinds[students[submission]], cell_points):g}"
            score_box = page.locator(f"input.score#{cell}")
            score_box.press_sequentially(score)
            tally.keystrokes += len(score)
            tally.decisions += 1
            with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT"):
                page.keyboard.press("Control+Period")  # saves, then opens the next submission at the same input
            tally.keystrokes += 1
            if number + 1 < len(ids):
                _arrive(page, re.escape(ids[number + 1]),
                        f"() => {READY} && document.activeElement && document.activeElement.id === {cell!r}")
            else:  # past the last submission formgrader goes back to the notebook's list of submissions
                _arrive(page, rf"/formgrader/gradebook/ch11/{notebook}", "() => true")
    tally.seconds = time.perf_counter() - started
    return tally


def rubric(page, server, notebook: str, kinds: dict, points: dict) -> Tally:
    tally = Tally()
    started = time.perf_counter()
    page.goto(server.url(f"/formgrader/rubric/ch11/{notebook}/"))
    tally.clicks += 1
    page.wait_for_function("() => document.documentElement.getAttribute('data-rubric-ready') === 'true'",
                           timeout=60_000)
    total = int(re.search(r"of (\d+) ", page.locator("#position").inner_text()).group(1))
    for _ in range(total):
        cell = page.locator("section.answer-group:not([hidden])").get_attribute("data-cell")
        members = page.locator("#members a").all_inner_texts()
        kind = kinds[members[0]]
        items = _kind_items(kind, len(points[cell]))
        for item in items or [0]:
            page.keyboard.press(str(item))
            tally.keystrokes += 1
        tally.decisions += 1
        page.wait_for_function(
            "(text) => document.getElementById('saved').textContent === text",
            arg=f"saved for {len(members)} student(s): {_score(kind, points[cell]):g} points", timeout=60_000)
        page.keyboard.press("n")
        tally.keystrokes += 1
    tally.seconds = time.perf_counter() - started
    return tally


def check(root: Path, notebook: str, kinds: dict, points: dict, comments: bool) -> int:
    """How many answers hold a score other than their judgement's (or, with ``comments``, no rubric comment)."""
    wrong = 0
    with _gradebook(root) as gradebook:
        for submission in gradebook.notebook_submissions(notebook, "ch11"):
            kind = kinds[submission.student.id]
            grades = {g.name: g for g in submission.grades}
            notes = {c.name: c.manual_comment or "" for c in submission.comments}
            for cell, cell_points in points.items():
                grade = grades[cell]
                if grade.manual_score != _score(kind, cell_points) or grade.needs_manual_grade:
                    wrong += 1
                elif comments and not notes[cell].startswith("Rubric: "):
                    wrong += 1
    return wrong


def main(args: Args) -> None:
    from playwright.sync_api import sync_playwright

    kinds = {f"s{number:02d}": PROPORTION[number % len(PROPORTION)] for number in range(args.students)}
    graded = REPO / (COURSE + "-graded")  # kept ungraded by hand: each run grades copies of it
    if args.regrade or sorted(p.name for p in (graded / "autograded").glob("*")) != sorted(kinds):
        make_class(graded, kinds, args.notebook)
        print(f"grading a class of {args.students} (notebook {args.notebook}) ...", flush=True)
        started = time.perf_counter()
        grade_class(graded, workers=args.workers, feedback=False, log=lambda _: None)
        print(f"  autograded in {time.perf_counter() - started:.0f} s", flush=True)
    stock_root, rubric_root = REPO / COURSE, REPO / (COURSE + "-rubric")
    for root in (stock_root, rubric_root):
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(graded, root)
    found = rubrics(stock_root / "source" / "ch11" / f"{args.notebook}.ipynb")
    points = {cell: [item.points for item in found[cell].items] for cell in written_cells(args.notebook)}
    answers = args.students * len(points)

    tallies = {}
    for name, root in (("rubric", rubric_root), ("formgrader as shipped", stock_root)):
        server_gen = _serve("instructor", Path(tempfile.mkdtemp(prefix="bench-rubric-")))
        server = next(server_gen)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1100})
                _open_formgrader(page, server, str(root.relative_to(REPO)))
                print(f"grading {answers} written answers: {name} ...", flush=True)
                if name == "rubric":
                    tallies[name] = rubric(page, server, args.notebook, kinds, points)
                else:
                    tallies[name] = stock(page, server, root, args.notebook, kinds, points)
                browser.close()
        finally:
            for _ in server_gen:
                pass
    wrong = {"formgrader as shipped": check(stock_root, args.notebook, kinds, points, comments=False),
             "rubric": check(rubric_root, args.notebook, kinds, points, comments=True)}

    a, b = tallies["formgrader as shipped"], tallies["rubric"]
    print(f"\n{args.students} students x {len(points)} written answers of {args.notebook} = {answers} answers; "
          f"the rubric graded them as {b.decisions} groups of identical answers")
    rows = [
        ("clicks", a.clicks, b.clicks),
        ("keystrokes", a.keystrokes, b.keystrokes),
        ("clicks per answer", a.clicks / answers, b.clicks / answers),
        ("keystrokes per answer", a.keystrokes / answers, b.keystrokes / answers),
        ("keystrokes per score decided", a.keystrokes / a.decisions, b.keystrokes / b.decisions),
        ("scores decided", a.decisions, b.decisions),
        ("comments written to students", 0, answers),
        ("browser time, s", a.seconds, b.seconds),
        ("browser time per answer, s", a.seconds / answers, b.seconds / answers),
        ("grader's operating time (KLM estimate), s", a.grader_seconds(), b.grader_seconds()),
        ("answers stored otherwise than judged", wrong["formgrader as shipped"], wrong["rubric"]),
    ]
    print(f"{'':44} {'formgrader as shipped':>22} {'rubric':>10} {'shipped / rubric':>17}")
    for label, stock_value, rubric_value in rows:
        ratio = f"{stock_value / rubric_value:.2f}x" if rubric_value and stock_value else "-"
        print(f"{label:44} {stock_value:>22.4g} {rubric_value:>10.4g} {ratio:>17}")


if __name__ == "__main__":
    main(tyro.cli(Args))
