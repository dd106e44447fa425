"""WCAG 2.1 AA for the course's own content, measured as the student sees it: the start page and both demos,
opened from the student's work folder in `make lab`'s JupyterLab in Chromium, in the light and the dark theme.

axe-core (npm, a dev dependency: installed for the tests, never for the student) runs on the whole page with
the WCAG 2.0/2.1 A and AA rules. A violation counts as the course's when its node is course content: a rendered
Markdown cell or a cell's output (the start page's tables, the demos' widgets); every other node is JupyterLab's
own (its toolbar, file browser, code editor colours) and is listed in the test's output, not asserted.

Then each demo is worked with the keyboard alone (Tab, Shift+Tab, arrows, Enter, Space): every step changes the
plot's text alternative and the live readout, focus stays visible, and JupyterLab keeps the demo's keys (an
ArrowDown in the scenario menu changes the scenario, not the notebook's cell). Screenshots go to
test-artifacts/accessibility/.
"""
import json
import re

import pytest

from tests.browser.conftest import ROOT, STUDENT_COPY
from tests.browser.notebook_page import RUN_TIMEOUT_MS, active_cell, run_all_cells, wait_for_kernel_idle, wait_until_run

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
WORK = STUDENT_COPY.rsplit("/", 1)[0]  # the student's work folder: the start page and the demos' copies
LAPTOP = {"width": 1280, "height": 800}
UPDATE_TIMEOUT_MS = 30_000
THEMES = ("JupyterLab Light", "JupyterLab Dark")

# Run axe and sort each violating node: the course's (inside rendered Markdown or a cell's output) or JupyterLab's.
AXE_JS = """
async (tags) => {
  const results = await axe.run(document, {runOnly: {type: 'tag', values: tags}, elementRef: true,
                                           resultTypes: ['violations']});
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


def axe_check(page, name: str, shots) -> dict:
    """axe on the whole page; the counts and every node written to test-artifacts/accessibility/<name>-axe.json."""
    if not AXE.exists():
        pytest.fail(f"axe-core is missing at {AXE}: run `npm install` (package.json lists it as a dev dependency)")
    page.add_script_tag(path=str(AXE))
    # render every cell, the ones out of view included (JupyterLab's windowing skips them), for the whole page
    page.add_style_tag(content=".jp-Notebook * { content-visibility: visible !important; }")
    found = page.evaluate(AXE_JS, WCAG_AA)
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
    page.wait_for_function(f"document.body.dataset.jpThemeLight === '{light}'", timeout=UPDATE_TIMEOUT_MS)
    page.wait_for_timeout(1_000)  # the theme's stylesheet applied


def open_from_work(page, lab_server, name: str) -> None:
    page.goto(lab_server.url(f"/lab/tree/{WORK}/{name}.ipynb") + "&reset")
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
