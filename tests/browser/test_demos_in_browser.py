"""The two demo notebooks, run in JupyterLab in headless Chromium: run all cells, move a slider,
press Draw, and read the new numbers off the page. A screenshot of each demo is saved under
test-artifacts/.

The expected numbers are computed here from the chapter's formulas (or exact values
worked out by hand from them), not read from the demo code.
"""
import shutil

import numpy as np
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

RUN_TIMEOUT_MS = 90_000    # kernel start, imports and the first render on a busy 2-core machine
UPDATE_TIMEOUT_MS = 20_000  # one slider move or button press
PI_REF = np.array([0.62, 0.18, 0.09, 0.05, 0.02, 0.02, 0.01, 0.01])  # the chapter's eight tokens


def exact_kl_of_tilted_reference(x: float) -> float:
    """KL(pi_theta || pi_ref) for pi_theta ∝ pi_ref ** (1 - x), straight from the definition."""
    weights = PI_REF ** (1.0 - x)
    pi_theta = weights / weights.sum()
    return float(np.sum(pi_theta * np.log(pi_theta / PI_REF)))


@pytest.fixture
def open_notebook(lab_server, chromium, artifacts_dir, repo_root, run_all):
    """Open a copy of notebooks/<name>.ipynb in a fresh JupyterLab page and run all its cells."""
    copies = artifacts_dir / "browser-notebooks"
    copies.mkdir(exist_ok=True)
    pages = []

    def open_and_run(name: str):
        shutil.copy(repo_root / "notebooks" / f"{name}.ipynb", copies / f"{name}.ipynb")
        page = chromium.new_page(viewport={"width": 1500, "height": 1300})
        page.set_default_timeout(UPDATE_TIMEOUT_MS * 3)  # clicks on a busy 2-core machine
        pages.append((name, page))
        # ?reset: a clean workspace, so only this notebook is open
        page.goto(lab_server.url(f"/lab/tree/test-artifacts/browser-notebooks/{name}.ipynb") + "&reset")
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=RUN_TIMEOUT_MS)
        page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for(timeout=RUN_TIMEOUT_MS)
        run_all(page, name)
        return page

    yield open_and_run
    for name, page in pages:  # the page as the test left it: the first thing to look at after a failure
        page.screenshot(path=str(artifacts_dir / f"{name}-last-page.png"))
        page.close()


def wait_for_demo(page, demo_class: str, artifacts_dir):
    """The demo's widget box once the run shows it; on a timeout, a screenshot and the outputs."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    demo = page.locator(f".jp-OutputArea .{demo_class}")
    try:
        demo.wait_for(timeout=RUN_TIMEOUT_MS)
    except PlaywrightTimeout:
        page.screenshot(path=str(artifacts_dir / f"{demo_class}-timeout.png"))
        outputs = page.locator(".jp-OutputArea").all_inner_texts()
        pytest.fail(f"the demo did not appear within {RUN_TIMEOUT_MS / 1000:.0f} s; outputs: {outputs}; "
                    f"screenshot in test-artifacts/{demo_class}-timeout.png")
    return demo


def edit_slider(page, control_class: str, value: str) -> None:
    """Type a value into an ipywidgets slider's editable readout and press Enter."""
    readout = page.locator(f".{control_class} .widget-readout")
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(value)
    page.keyboard.press("Enter")


def expect_text(page, selector: str, text: str) -> None:
    from playwright.sync_api import expect

    expect(page.locator(selector)).to_have_text(text, timeout=UPDATE_TIMEOUT_MS)


def test_tilting_demo_runs_and_answers_its_beta_slider(open_notebook, artifacts_dir):
    page = open_notebook("demo_tilting")
    demo = wait_for_demo(page, "lmpolicy-tilting-demo", artifacts_dir)
    # worked example, beta = 1: J(pi*) = beta log Z = ln 2.439 = 0.892, pi*(ba) = 0.0615
    expect_text(page, '[data-readout="objective"]', f"{np.log(0.42 + 0.28 * np.e + 0.15 + 0.15 * np.e ** 2):.3f}")
    expect_text(page, '[data-readout="pi_star_ba"]', "0.0615")
    edit_slider(page, "lmpolicy-tilting-beta", "0.5")
    # beta = 0.5: beta log Z = 0.5 ln(0.42 + 0.28 e^2 + 0.15 + 0.15 e^4) = 1.191, pi*(bb) = 0.756
    partition = 0.42 + 0.28 * np.e ** 2 + 0.15 + 0.15 * np.e ** 4
    expect_text(page, '[data-readout="beta_log_partition"]', f"{0.5 * np.log(partition):.3f}")
    expect_text(page, '[data-readout="pi_star_bb"]', f"{0.15 * np.e ** 4 / partition:.4f}")
    assert page.locator(".lmpolicy-tilting-demo svg text").count() >= 13  # the token tree is drawn
    demo.screenshot(path=str(artifacts_dir / "demo_tilting.png"))


def test_kl_demo_runs_and_answers_its_slider_and_draw_button(open_notebook, artifacts_dir):
    from lmpolicy.demos.kl_estimators import KLEstimatorDemo

    page = open_notebook("demo_kl_estimators")
    demo = wait_for_demo(page, "lmpolicy-kl-demo", artifacts_dir)
    expect_text(page, '[data-readout="exact_kl"]', f"{exact_kl_of_tilted_reference(0.2):.4f}")
    expect_text(page, '[data-readout="batches"]', "0")
    edit_slider(page, "lmpolicy-kl-x", "1")
    expect_text(page, '[data-readout="exact_kl"]', f"{exact_kl_of_tilted_reference(1.0):.4f}")
    page.locator(".lmpolicy-kl-draw").click()
    expect_text(page, '[data-readout="batches"]', "1")
    # the kernel drew the same seeded batch as a fresh demo in this process does
    replay = KLEstimatorDemo(x=1.0, tokens_per_estimate=16, seed=0)
    replay.draw(1)
    expect_text(page, '[data-readout="k1_mean"]', f"{replay.readouts()['k1_mean']:.4f}")
    expect_text(page, '[data-readout="k2_negative_share"]', "0.0%")
    demo.screenshot(path=str(artifacts_dir / "demo_kl_estimators.png"))
