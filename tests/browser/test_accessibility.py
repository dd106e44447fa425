"""WCAG 2.1 AA for the course's own content, measured as the student sees it: the start page and both demos,
opened from the student's work folder in `make lab`'s JupyterLab in Chromium, in the light and the dark theme.

axe-core (npm, a dev dependency: installed for the tests, never for the student) runs on the whole page with
the WCAG 2.0/2.1 A and AA rules. A violation counts as the course's when its node is course content: a rendered
Markdown cell or a cell's output (the start page's tables, the demos' widgets); every other node is JupyterLab's
own (its toolbar, file browser, code editor colours) and is listed in the test's output, not asserted.

Then each demo is worked with the keyboard alone (Tab, Shift+Tab, arrows, Enter, Space): every step changes the
plot's text alternative and the live readout, focus stays visible, and JupyterLab keeps the demo's keys (an
ArrowDown in the scenario menu changes the scenario, not the notebook's cell). Every assignment notebook, as the
student first opens it (their copy of the release, unrun), is checked the same way in both themes (opened once, the
theme switched in the page, the colour rules alone in the second), and one of notebook 08's figures, drawn by the
library in the student's kernel, must reach the page as an <img> whose alt names its runs. Screenshots go to
test-artifacts/accessibility/.
"""
import json
import re
import time
import urllib.request

import nbformat
import pytest

from tests.browser.conftest import LAPTOP, ROOT, STUDENT_COPY, STUDENT_WORK
from tests.browser.notebook_page import RUN_TIMEOUT_MS, active_cell, run_all_cells, wait_for_kernel_idle, wait_until_run

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# The WCAG AA rules whose verdict depends on colours: all that a theme changes on a page checked whole in another theme
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
UPDATE_TIMEOUT_MS = 30_000
THEMES = ("JupyterLab Light", "JupyterLab Dark")

# Run axe and sort each violating node: the course's (inside rendered Markdown or a cell's output) or JupyterLab's.
AXE_JS = """
async (runOnly) => {
  const results = await axe.run(document, {runOnly, elementRef: true, resultTypes: ['violations']});
  const course = [], lab = [];
  for (const violation of results.violations) for (const node of violation.nodes) {
    const element = node.element;
    const ours = element && element.closest &&
      element.closest('.jp-Notebook .jp-MarkdownOutput, .jp-Notebook .jp-OutputArea-output');
    (ours ? course : lab).push({rule: violation.id, impact: node.impact, target: node.target.join(' '),
                                html: node.html.slice(0, 160), why: (node.failureSummary || '').slice(0, 240)});
  }
  return {course, lab};
}
"""


@pytest.fixture(scope="module")
def shots(artifacts_dir):
    folder = artifacts_dir / "accessibility"
    folder.mkdir(exist_ok=True)
    return folder


# JupyterLab's body has no height (its shell is positioned absolutely) and hides its overflow, which axe takes for a
# box clipping the whole notebook: its color-contrast rule then skips every text of the notebook as invisible. With
# its overflow visible the body looks the same, and axe measures the notebook's text.
BODY_SHOWN = "body { overflow: visible !important; }"


def axe_check(page, name: str, shots, rules: list[str] | None = None) -> dict:
    """axe on the whole page, with the WCAG 2.1 AA rules or only ``rules`` (the notebook's text measured by
    color-contrast too, ``BODY_SHOWN``); the counts and every node written to
    test-artifacts/accessibility/<name>-axe.json."""
    if not AXE.exists():
        pytest.fail(f"axe-core is missing at {AXE}: run `npm install` (package.json lists it as a dev dependency)")
    if not page.evaluate("() => !!window.axe"):  # once per page load
        page.add_script_tag(path=str(AXE))
        # render every cell, the ones out of view included (JupyterLab's windowing skips them), for the whole page
        page.add_style_tag(content=".jp-Notebook * { content-visibility: visible !important; }")
    if not page.evaluate("(css) => [...document.querySelectorAll('style')].some(s => "
                                        "s.textContent === css)", BODY_SHOWN):
        page.add_style_tag(content=BODY_SHOWN)
    found = page.evaluate(AXE_JS, {"type": "rule", "values": rules} if rules else {"type": "tag", "values": WCAG_AA})
    (shots / f"{name}-axe.json").write_text(json.dumps(found, indent=1, ensure_ascii=False))
    lab_rules = sorted({f"{v['rule']} ({v['target'][:60]})" for v in found["lab"]})
    print(f"\n{name}: axe found {len(found['course'])} violation(s) in the course's content and "
          f"{len(found['lab'])} in JupyterLab's own nodes: " + "; ".join(lab_rules))
    return found


def set_theme(page, theme: str) -> None:
    """Settings > Theme > ``theme``, as a student picks it, and wait until the page wears it."""
    page.keyboard.press("Escape")
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Theme$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(theme)}$")).click()
    light = "true" if theme == "JupyterLab Light" else "false"
    # JupyterLab marks the body once the theme's stylesheet has loaded, then lifts the splash it covered the page
    # with meanwhile (a fade of 200 ms): only then does the page show, and axe measure, the theme's colours
    page.wait_for_function(f"document.body.dataset.jpThemeLight === '{light}'", timeout=UPDATE_TIMEOUT_MS)
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=UPDATE_TIMEOUT_MS)
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def open_from_work(page, lab_server, name: str) -> None:
    page.goto(lab_server.url(f"/lab/tree/{STUDENT_WORK}/{name}.ipynb") + "&reset")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=RUN_TIMEOUT_MS)
    wait_for_kernel_idle(page, RUN_TIMEOUT_MS)


def run_until(page, selector: str, text: str, attempts: int = 3) -> None:
    """Run > Run All Cells until an element ``selector`` holding exactly ``text`` is on the page, then wait for the
    run's end. (Read as attached, not visible: the run ends with the view at the notebook's foot.)"""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(attempts):
        page.keyboard.press("Escape")
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click()
        try:
            page.locator(selector, has_text=re.compile(f"^{re.escape(text)}$")).first.wait_for(
                state="attached", timeout=RUN_TIMEOUT_MS // 2)
            wait_until_run(page, RUN_TIMEOUT_MS)
            return
        except PlaywrightTimeout:
            continue
    pytest.fail(f"Run All Cells never showed {text!r}")


def test_the_start_page_has_no_violation_in_the_courses_content(lab_server, chromium, shots):
    page = chromium.new_page(viewport=LAPTOP)
    page.set_default_timeout(60_000)
    try:
        page.goto(lab_server.url("/"))  # the printed URL: the student's start page, unrun
        page.locator(".jp-OutputArea-output table.lmpolicy-overview").wait_for(timeout=RUN_TIMEOUT_MS)
        wait_for_kernel_idle(page, RUN_TIMEOUT_MS)
        results = {}
        for theme in THEMES:
            set_theme(page, theme)
            page.screenshot(path=str(shots / f"start-page-{theme.split()[-1].lower()}.png"))
            results[theme] = axe_check(page, f"start-page-{theme.split()[-1].lower()}", shots)
        run_until(page, ".jp-OutputArea-output td", "course total")  # the whole table too, as after a run (not saved)
        results["run"] = axe_check(page, "start-page-run", shots)
    finally:
        set_theme(page, THEMES[0])
        page.close()
    assert {theme: found["course"] for theme, found in results.items()} == {theme: [] for theme in results}


def open_demo(page, lab_server, name: str, demo_class: str, shots):
    """The student's copy of the demo notebook, run; returns the demo's box once its script named its controls."""
    open_from_work(page, lab_server, name)
    run_all_cells(page, name + "-a11y", shots)
    demo = page.locator(f".jp-OutputArea .{demo_class}")
    demo.wait_for(timeout=RUN_TIMEOUT_MS)
    wait_until_run(page, RUN_TIMEOUT_MS)
    if page.locator(".jp-OutputArea", has_text="Error displaying widget").count():  # ipywidgets' start-up race
        run_all_cells(page, name + "-a11y-again", shots)
        wait_until_run(page, RUN_TIMEOUT_MS)
    # by selector, not by handle: the widget's view may be drawn again meanwhile
    page.wait_for_function("(selector) => [...document.querySelectorAll(selector)].some(demo => "
                           "demo.dataset.lmpolicyAccessible === 'yes' && demo.querySelector('img[alt]'))",
                           arg=f".jp-OutputArea .{demo_class}", timeout=RUN_TIMEOUT_MS)
    return demo


def state_of(demo) -> dict:
    """What a screen reader gets from the demo: the focused element's name and value, the pictures' text
    alternatives, the live readout, and whether focus is visible."""
    return demo.evaluate("""(demo) => {
        const focused = document.activeElement;
        const style = focused ? getComputedStyle(focused) : null;
        return {
          inside: demo.contains(focused),
          name: focused && (focused.getAttribute('aria-label')
                            || (focused.labels && focused.labels[0] && focused.labels[0].textContent.trim())
                            || focused.textContent.trim()),
          value: focused && focused.getAttribute('aria-valuetext'),
          pressed: focused && focused.getAttribute('aria-pressed'),
          visible_focus: !!style && ((style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0)
                                     || style.boxShadow !== 'none'),
          alts: [...demo.querySelectorAll('img')].map(img => img.alt),
          live: [...demo.querySelectorAll('[aria-live=polite]')].map(el => el.textContent.trim()),
          tree: (demo.querySelector('svg[role=img]') || {getAttribute: () => null}).getAttribute('aria-label'),
        };
    }""")


def tab_to(page, demo, predicate, what: str, backwards: bool = False, presses: int = 30) -> dict:
    """Press Tab (Shift+Tab) until the focused element satisfies ``predicate(state)``."""
    for _ in range(presses):
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
        state = state_of(demo)
        if state["inside"] and predicate(state):
            return state
    pytest.fail(f"{presses} presses of Tab never reached {what}")


def changed(page, demo, before: dict, keys: tuple = ("alts", "live")) -> dict:
    """The demo's state once each of ``keys`` differs from ``before`` (the kernel answered the key press)."""
    for _ in range(UPDATE_TIMEOUT_MS // 250):
        state = state_of(demo)
        if all(state[key] != before[key] for key in keys):
            return state
        page.wait_for_timeout(250)
    pytest.fail(f"{keys} did not change: {before}")


def enter_demo(page, demo) -> None:
    """Put the keyboard's focus just before the demo (the cell holding it), as Tab from the notebook does."""
    demo.evaluate("(demo) => { demo.closest('.jp-Cell').scrollIntoView(); "
                  "const start = document.createElement('span'); start.tabIndex = 0; "
                  "demo.parentElement.insertBefore(start, demo); start.focus(); }")


def test_the_tilting_demo_passes_axe_and_works_by_keyboard_alone(lab_server, chromium, shots):
    page = chromium.new_page(viewport=LAPTOP)
    page.set_default_timeout(60_000)
    try:
        demo = open_demo(page, lab_server, "demo_tilting", "lmpolicy-tilting-demo", shots)
        first = state_of(demo)
        assert all(alt.startswith("Left, bar chart of each response's probability") for alt in first["alts"]), first
        assert first["live"] and first["live"][0].startswith("β = 1, T = 1"), first
        assert first["tree"].startswith("Token tree. start: V = 0.892"), first
        found = {}
        for theme in THEMES:
            set_theme(page, theme)
            demo.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"tilting-{theme.split()[-1].lower()}.png"))
            found[theme] = axe_check(page, f"tilting-{theme.split()[-1].lower()}", shots)
        set_theme(page, THEMES[0])

        # keyboard alone: Tab to beta's handle; it says its name and its real value (not log10 of it)
        enter_demo(page, demo)
        menu = tab_to(page, demo, lambda s: s["name"] == "scenario", "the scenario menu")
        beta = tab_to(page, demo, lambda s: (s["name"] or "").startswith("β, the weight"), "β's slider")
        assert beta["value"] == "β = 1.00" and beta["visible_focus"], beta  # as its readout shows it
        page.keyboard.press("ArrowLeft")
        smaller = changed(page, demo, beta)
        assert smaller["value"] == "β = 0.933" and smaller["live"][0].startswith("β = 0.933"), smaller
        for _ in range(10):  # ten steps of 2 ** 0.1: beta halves
            page.keyboard.press("ArrowLeft")
        page.wait_for_function("() => document.querySelector('.lmpolicy-tilting-demo [aria-live=polite]')"
                               ".textContent.startsWith('β = 0.467')", timeout=UPDATE_TIMEOUT_MS)
        # Tab to the checkbox, Space ticks it: the bars and the table show pi_ref at T
        box = tab_to(page, demo, lambda s: s["name"] == "show pi_ref at temperature T in the bars", "the checkbox")
        assert box["visible_focus"], box
        page.keyboard.press("Space")
        changed(page, demo, box, keys=("alts",))
        assert "pi_ref at T = 1:" in state_of(demo)["alts"][0]
        # back to the scenario menu; ArrowDown picks the next scenario and JupyterLab stays on this cell
        cell_before = active_cell(page)
        tab_to(page, demo, lambda s: s["name"] == "scenario", "the scenario menu", backwards=True)
        page.keyboard.press("ArrowDown")
        after = changed(page, demo, menu, keys=("tree",))
        assert after["inside"] and active_cell(page) == cell_before, ("ArrowDown left the demo", after, cell_before,
                                                                      active_cell(page), page.evaluate(
            "() => document.activeElement.outerHTML.slice(0, 200)"))
        page.screenshot(path=str(shots / "tilting-after-keyboard.png"))
    finally:
        page.close()
    assert {theme: f["course"] for theme, f in found.items()} == {theme: [] for theme in found}


def test_the_kl_demo_passes_axe_and_works_by_keyboard_alone(lab_server, chromium, shots):
    page = chromium.new_page(viewport=LAPTOP)
    page.set_default_timeout(60_000)
    try:
        demo = open_demo(page, lab_server, "demo_kl_estimators", "lmpolicy-kl-demo", shots)
        first = state_of(demo)
        assert first["alts"][0].startswith("Curves of what one sampled token adds") and \
            "no batch drawn yet" in first["alts"][1], first
        found = {}
        for theme in THEMES:
            set_theme(page, theme)
            demo.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"kl-{theme.split()[-1].lower()}.png"))
            found[theme] = axe_check(page, f"kl-{theme.split()[-1].lower()}", shots)
        set_theme(page, THEMES[0])

        enter_demo(page, demo)
        x = tab_to(page, demo, lambda s: (s["name"] or "").startswith("x: how far"), "x's slider")
        assert x["value"] == "x = 0.20" and x["visible_focus"], x
        page.keyboard.press("ArrowRight")
        moved = changed(page, demo, x)
        assert moved["value"] == "x = 0.25" and moved["live"][0].startswith("x = 0.25"), moved
        # N: Tab to the button "64", Enter selects it, and it says so (aria-pressed), not by a CSS class alone
        n64 = tab_to(page, demo, lambda s: s["name"] == "64", "the button N = 64")
        assert n64["pressed"] == "false" and n64["visible_focus"], n64
        page.keyboard.press("Enter")
        selected = changed(page, demo, n64, keys=("live", "pressed"))
        assert selected["pressed"] == "true" and "N = 64 tokens" in selected["live"][0], selected
        # Space on "Draw one batch": one batch, in the histograms' words and the live readout
        draw = tab_to(page, demo, lambda s: s["name"] == "Draw one batch", "Draw one batch")
        page.keyboard.press("Space")
        drawn = changed(page, demo, draw)
        assert "Three histograms of 1 batch estimates" in drawn["alts"][1] and ", 1 batch:" in drawn["live"][0], drawn
        # Play, by its name, with Enter: batches come in; then Pause
        play = tab_to(page, demo, lambda s: (s["name"] or "").startswith("Play: draw 20 batches"), "Play")
        page.keyboard.press("Enter")
        playing = changed(page, demo, play)
        assert re.search(r", (2\d|[3-9]\d|\d{3,}) batches:", playing["live"][0]), playing
        tab_to(page, demo, lambda s: s["name"] == "Pause", "Pause")
        page.keyboard.press("Enter")
        page.screenshot(path=str(shots / "kl-after-keyboard.png"))
    finally:
        page.close()
    assert {theme: f["course"] for theme, f in found.items()} == {theme: [] for theme in found}


RELEASED = sorted(path.stem for path in (ROOT / "release" / "ch11").glob("*.ipynb"))
# Text of the course that only the dark theme makes illegible (1.1:1 on its background)
ILLEGIBLE_SPAN = '<span style="color:#1a1a1a">legible on white only</span>'
ILLEGIBLE_IN_THE_DARK = f"Some text, then {ILLEGIBLE_SPAN}."
# One of notebook 08's figures as its cells draw it (lmpolicy.tinylm.runs_figure), from two runs' histories
FIGURE_CELL = """from lmpolicy.tinylm.runs import Budget, History
from lmpolicy.tinylm.runs_figure import plot_runs

plot_runs([History(label="leashed", answers=[0, 20480, 40960], greedy=[0.796, 0.84, 0.876],
                   sampled=[0.558, 0.66, 0.715], kl=[0.0, 0.15, 0.291]),
           History(label="no leash", answers=[0, 20480, 40960], greedy=[0.796, 0.85, 0.875],
                   sampled=[0.558, 0.67, 0.715], kl=[0.0, 0.2, 0.337])], Budget())
"""


def api(lab_server, method: str, path: str, body: dict | None = None):
    request = urllib.request.Request(lab_server.base_url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {lab_server.token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"null")


def open_rendered(page, path: str) -> None:
    """Open ``path`` in the lab already on the page (File > Open from Path..., no reload), the tab before it
    closed, and wait until its Markdown is rendered and its math typeset."""
    def menu(top: str, item: str) -> None:
        page.keyboard.press("Escape")
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{top}$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}")).first.click()

    if page.locator(".jp-NotebookPanel").count():
        menu("File", "Close Tab")
        page.locator(".jp-NotebookPanel").wait_for(state="detached")
    menu("File", "Open from Path")
    page.locator(".jp-Dialog input").fill(path)
    page.locator(".jp-Dialog input").press("Enter")
    markdown = sum(cell.cell_type == "markdown" for cell in nbformat.read(ROOT / path, as_version=4).cells)
    page.wait_for_function("(n) => document.querySelectorAll('.jp-NotebookPanel .jp-MarkdownCell "
                           ".jp-RenderedMarkdown').length >= n", arg=markdown, timeout=RUN_TIMEOUT_MS)
    # MathJax typesets after the render, a cell at a time: wait until the number of typeset formulas holds still
    typeset, steady = -1, 0
    while steady < 3:
        page.wait_for_timeout(300)
        now = page.locator(".jp-RenderedMarkdown mjx-container").count()
        typeset, steady = now, (steady + 1 if now == typeset else 0)


def saved_figure_output():
    """FIGURE_CELL's output as the library makes it, to save in a notebook (what IPython's display is handed; no
    IPython shell made, which the worker's later tests would take for a kernel)."""
    from unittest import mock

    shown = []
    with mock.patch("IPython.display.display", lambda bundle, raw: shown.append(bundle)):
        exec(FIGURE_CELL, {})
    (bundle,) = shown
    return nbformat.v4.new_output("display_data", data=bundle)


def assert_figure_described(page) -> None:
    image = page.locator(".jp-OutputArea-output figure img")
    image.wait_for(timeout=RUN_TIMEOUT_MS)
    alt = image.get_attribute("alt")
    assert alt.startswith("Three panels of 2 fine-tuning runs") and \
        "leashed (circles) ends after 40,960 answers at greedy 0.876, sampled 0.715, KL 0.291 nats." in alt and \
        "no leash (squares) ends after 40,960 answers at greedy 0.875, sampled 0.715, KL 0.337 nats." in alt, alt
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 900", arg=image.element_handle(),
                           timeout=UPDATE_TIMEOUT_MS)  # the picture itself shown, not only its words
    image.scroll_into_view_if_needed()


def shut_down_kernels_started_since(lab_server, sessions_before: set) -> None:
    for session in api(lab_server, "GET", "/api/sessions"):
        if session["path"] not in sessions_before:
            api(lab_server, "DELETE", f"/api/sessions/{session['id']}")


def test_every_assignment_notebook_and_a_figure_have_no_violation_in_the_courses_content(lab_server, chromium,
                                                                                         shots):
    started = time.monotonic()
    sessions_before = {s["path"] for s in api(lab_server, "GET", "/api/sessions")}
    page = chromium.new_page(viewport=LAPTOP)
    page.set_default_timeout(60_000)
    found, seconds = {}, {}
    try:
        page.goto(lab_server.url("/lab?reset"))
        page.locator(".jp-LauncherCard, .jp-NotebookPanel").first.wait_for(timeout=RUN_TIMEOUT_MS)
        # first, that the dark theme's run would see text of the course illegible there: a dark grey span
        probe_notebook = (shots / "illegible-in-the-dark.ipynb").relative_to(ROOT).as_posix()
        released = nbformat.read(ROOT / "release" / "ch11" / f"{RELEASED[0]}.ipynb", as_version=4)
        # with a released notebook's metadata: its kernel changes none of it, so the tab closes without a question
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(ILLEGIBLE_IN_THE_DARK)],
                                                metadata=released.metadata), ROOT / probe_notebook)
        open_rendered(page, probe_notebook)
        set_theme(page, THEMES[1])
        worn = THEMES[1]
        probe = axe_check(page, "illegible-in-the-dark", shots, rules=COLOUR_RULES)
        assert [(v["rule"], v["html"]) for v in probe["course"]] == [("color-contrast", ILLEGIBLE_SPAN)], probe
        for name in RELEASED:
            opened = time.monotonic()
            open_rendered(page, f"{STUDENT_COPY}/{name}.ipynb")
            # each notebook opened once and checked in both themes, the one the page wears first (one switch each):
            # in it with every WCAG AA rule, in the other with those the theme's colours can change
            for second, theme in enumerate(sorted(THEMES, key=lambda theme: theme != worn)):
                if theme != worn:
                    set_theme(page, theme)
                    worn = theme
                shown = f"notebook-{name}-{theme.split()[-1].lower()}"
                page.screenshot(path=str(shots / f"{shown}.png"))
                found[shown] = axe_check(page, shown, shots, rules=COLOUR_RULES if second else None)
            shut_down_kernels_started_since(lab_server, sessions_before)  # one kernel at a time
            seconds[name] = round(time.monotonic() - opened, 1)
        print(f"\nassignment notebooks, light and dark: {seconds} s each")
        if worn != THEMES[0]:
            set_theme(page, THEMES[0])

        # one of notebook 08's figures: saved in the notebook (untrusted, so JupyterLab sanitizes it), then drawn
        # afresh in the student's kernel; each time an <img> whose alt says where each run ends
        figure_started = time.monotonic()
        figure_notebook = (shots / "figure-a11y.ipynb").relative_to(ROOT).as_posix()  # beside the screenshots
        cell = nbformat.v4.new_code_cell(FIGURE_CELL, outputs=[saved_figure_output()])
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), ROOT / figure_notebook)
        open_rendered(page, figure_notebook)
        assert_figure_described(page)
        wait_for_kernel_idle(page, RUN_TIMEOUT_MS)
        run_all_cells(page, "figure-a11y", shots)
        page.locator(".jp-InputPrompt", has_text="[1]").wait_for(timeout=RUN_TIMEOUT_MS)
        wait_until_run(page, RUN_TIMEOUT_MS)
        assert_figure_described(page)
        page.screenshot(path=str(shots / "figure-light.png"))
        found["figure"] = axe_check(page, "figure", shots)
        seconds["figure"] = round(time.monotonic() - figure_started, 1)
    finally:
        page.close()
        # the theme is a setting of the lab's user: the next test finds it light, whatever state the page was in
        api(lab_server, "PUT", "/lab/api/settings/@jupyterlab/apputils-extension:themes",
            {"raw": json.dumps({"theme": THEMES[0]})})
        shut_down_kernels_started_since(lab_server, sessions_before)
        print(f"\nnotebooks and figure: {round(time.monotonic() - started, 1)} s ({seconds})")
    assert {name: f["course"] for name, f in found.items()} == {name: [] for name in found}
