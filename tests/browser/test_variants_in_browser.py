"""Every student their own numbers (issue 21), tried as a student would in JupyterLab in headless Chromium.

Notebook 02 is released from source/ch11 with the course's `nbgrader generate_assignment` config and opened
at 1280x900 in a student's `make lab`:

- with an id (`make lab STUDENT=alice`): Exercise 11.2(b)'s locked parameters cell shows alice's own
  logits and target; the chapter's printed T = 0.334 typed in is flagged by the visible check and by
  nbgrader's Validate button as the chapter's value, without alice's temperature anywhere on the page;
  alice's own temperature, solved here from the logits and target the page shows, passes (✓);
- with no id at all: the parameters cell says these are the book's numbers and how to set an id, and the
  chapter's temperature to six digits passes its check.

Screenshots are saved under test-artifacts/variants/.
"""
import math
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tests.browser.conftest import _serve, emptied
from tests.browser.notebook_page import (cell, cell_index, open_in_lab, output_of, replace_cell_code, run_cell,
                                         save_notebook, shown_text)
from tests.verdicts import one_line

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

RUN_TIMEOUT_MS = 120_000  # kernel start and torch's import on a busy 2-core machine
VALIDATE_TIMEOUT_MS = 180_000  # Validate runs the whole notebook in a fresh kernel
LAPTOP = {"width": 1280, "height": 900}
NOTEBOOK = "02_temperature"
SETUP, PARAMETERS, ANSWER, CHECK = "task2__setup", "ex11_2b__parameters", "ex11_2b__answer", "ex11_2b__tests"
WORK = "test-artifacts/variants-work"  # relative to the course folder, where `make lab` serves from
STUDENT = "alice"
CHAPTER_PRINTED_T = "0.334"  # Exercise 11.2(b)'s answer as the chapter prints it
CHAPTER_LOGITS, CHAPTER_TARGET = (2.0, 1.0, 0.0), 0.95
# the wording of the line a student with a variant reads for the chapter's number
CHAPTER_VALUE_FLAG = ("this is the chapter's value; your model's is different: see the parameters at the top of "
                      "the exercise")
NUMBER = re.compile(r"[-\u2212]?\d+(?:\.\d+)?")


def top_token_temperature(logits, target: float) -> float:
    """The T at which softmax(logits / T) gives the largest logit probability ``target``, by bisection.

    The top token's probability falls as T rises (from 1 at T -> 0 to 1/3 at T -> infinity)."""
    z = np.asarray(logits, dtype=float)

    def top(temperature):
        scaled = (z - z.max()) / temperature
        return float(np.exp(scaled[np.argmax(z)]) / np.exp(scaled).sum())

    low, high = 1e-4, 1e4
    assert top(low) > target > top(high)
    for _ in range(200):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if top(middle) > target else (low, middle)
    return math.sqrt(low * high)


def numbers_in(text: str) -> list[float]:
    return [float(n.replace("\u2212", "-")) for n in NUMBER.findall(text)]


def shows_no_number_near(text: str, value: float, what: str) -> None:
    near = [n for n in numbers_in(text) if abs(n - value) <= 5e-3 * abs(value)]
    assert not near, f"{what} shows {near}, the student's right answer {value:.6g} (or close to it):\n{text}"


@pytest.fixture(scope="module")
def released_02(tmp_path_factory, repo_root) -> str:
    """Notebook 02 as `nbgrader generate_assignment` with the course's config releases it (from source/ch11, in a
    course of its own), copied where the student's lab serves it; its path relative to the course folder."""
    scratch = tmp_path_factory.mktemp("release-02")
    course = scratch / "course"
    (course / "source" / "ch11").mkdir(parents=True)
    shutil.copy(repo_root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", course / "source" / "ch11")
    nbgrader = Path(sys.executable).with_name("nbgrader")
    subprocess.run([str(nbgrader), "generate_assignment", "ch11", "--force", "--log-level=ERROR",
                    f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url=sqlite:///{scratch / 'gb.db'}"],
                   cwd=repo_root, check=True, capture_output=True, text=True, timeout=300)
    folder = repo_root / WORK
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(course / "release" / "ch11" / f"{NOTEBOOK}.ipynb", folder / f"{NOTEBOOK}.ipynb")
    return f"{WORK}/{NOTEBOOK}.ipynb"


@pytest.fixture(scope="module")
def shots(artifacts_dir) -> Path:
    return emptied(artifacts_dir / "variants")


@pytest.fixture
def no_inherited_id(monkeypatch):
    """The labs get their id from the test alone: none from the environment pytest runs in."""
    for variable in ("LMPOLICY_STUDENT_ID", "JUPYTERHUB_USER", "LMPOLICY_VARIANTS", "STUDENT"):
        monkeypatch.delenv(variable, raising=False)


@contextmanager
def student_lab(scratch: Path, **make_vars: str):
    """A student's `make lab` (its own throwaway copy of ch11), stopped with its kernels at the block's end."""
    serving = _serve("lab", scratch, CH11_COPY=f"{WORK}/ch11", **make_vars)
    server = next(serving)
    try:
        yield server
    finally:
        next(serving, None)  # stops the server and checks its port is closed


def run_answer_and_check(page, answer: int, check: int, value: str, contains: str, screenshot: Path) -> str:
    """Type ``temperature_at_target = value`` into the answer cell, run it and the check cell; the check's output."""
    replace_cell_code(page, answer, f"temperature_at_target = {value}\n")
    run_cell(page, answer)  # Shift+Enter in command mode: the answer runs and the next cell (the hint) is active
    run_cell(page, check, step_down=True)
    shown = output_of(page, check, contains, screenshot.with_name(screenshot.stem + "-output.png"))
    # the window as the student sees it: the answer, the check and its verdict
    cell(page, check).locator(".jp-OutputArea").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot))
    return shown


def open_at_the_exercise(page, lab_server, path: str, notebook: Path) -> tuple[int, int, int]:
    """Open the notebook, run its imports and Exercise 11.2(b)'s parameters cell; the indices of the parameters,
    answer and check cells."""
    open_in_lab(page, lab_server, path)
    run_cell(page, cell_index(notebook, SETUP))
    parameters = cell_index(notebook, PARAMETERS)
    run_cell(page, parameters)
    return parameters, cell_index(notebook, ANSWER), cell_index(notebook, CHECK)


def parameters_shown(page, parameters: int, screenshot: Path) -> str:
    """The text of the parameters cell's output once MathJax has typeset it; a screenshot of the window."""
    from playwright.sync_api import expect

    output = cell(page, parameters).locator(".jp-OutputArea-output")
    expect(output).to_contain_text("for the top token", timeout=RUN_TIMEOUT_MS)
    output.locator("mjx-container").last.wait_for(timeout=30_000)  # the logits, typeset
    cell(page, parameters - 1).scroll_into_view_if_needed()  # the exercise's statement above its parameters
    page.screenshot(path=str(screenshot))
    # the typeset math as plain text: MathJax keeps it in an assistive MathML copy
    return one_line(output.evaluate("""(el) => {
        const copy = el.cloneNode(true);
        copy.querySelectorAll('mjx-container').forEach(m => {
            const mml = m.querySelector('mjx-assistive-mml');
            m.replaceWith(document.createTextNode(mml ? mml.textContent : m.textContent));
        });
        return copy.textContent;
    }"""))


def logits_and_target(text: str) -> tuple[tuple[float, ...], float]:
    """The logits z = (a, b, c) and the target probability as the parameters cell shows them."""
    found = re.search(r"logits\s*z\s*=\s*\((.*?)\)\s*and target probability\s*([\d.]+)", text)
    assert found, f"the parameters cell does not show the logits and the target: {text!r}"
    return tuple(numbers_in(found.group(1))), float(found.group(2))


def test_a_student_with_an_id_sees_their_own_model_and_the_chapters_number_is_flagged_without_the_answer(
        chromium, released_02, shots, repo_root, tmp_path, no_inherited_id):
    from playwright.sync_api import expect

    from lmpolicy.per_student import variants

    notebook = repo_root / released_02
    own = variants.for_exercise("ex11_2b", STUDENT)
    with student_lab(tmp_path, STUDENT=STUDENT) as lab_server:
        page = chromium.new_page(viewport=LAPTOP)
        page.set_default_timeout(60_000)
        try:
            parameters, answer, check = open_at_the_exercise(page, lab_server, released_02, notebook)
            shown = parameters_shown(page, parameters, shots / "1-alice-parameters.png")
            assert f"Your own model (student id {STUDENT})" in shown, shown
            logits, target = logits_and_target(shown)
            assert (logits, target) == (tuple(own.logits), own.target), shown
            assert (logits, target) != (CHAPTER_LOGITS, CHAPTER_TARGET)
            # what alice works out from what the page shows her
            hers = top_token_temperature(logits, target)
            assert hers == pytest.approx(variants.answer("ex11_2b", STUDENT)["temperature_at_target"], abs=1e-9)
            assert abs(hers - float(CHAPTER_PRINTED_T)) > 0.01, "alice's answer is too close to the chapter's to tell"
            shows_no_number_near(shown, hers, "the parameters cell")

            # the chapter's printed temperature: the visible check says whose value it is, not what hers is
            flagged = run_answer_and_check(page, answer, check, CHAPTER_PRINTED_T, "Check failed",
                                           shots / "2-alice-chapter-value-flagged.png")
            assert CHAPTER_VALUE_FLAG in one_line(flagged), flagged
            assert f"temperature_at_target = {CHAPTER_PRINTED_T}" in flagged, flagged
            assert "Traceback" not in flagged and "\u2713" not in flagged, flagged
            shows_no_number_near(flagged, hers, "the check's output")
            shows_no_number_near(shown_text(page.locator(".jp-Notebook")), hers, "the notebook")

            # saved with the chapter's number, Validate (the notebook toolbar's button) flags it the same way
            save_notebook(page, RUN_TIMEOUT_MS)
            assert f"temperature_at_target = {CHAPTER_PRINTED_T}" in (notebook.read_text())
            page.get_by_role("button", name="Validate").click()
            dialog = page.locator(".jp-Dialog", has_text="Validation Results")
            expect(dialog).to_contain_text("Exercise 11.2(b)", timeout=VALIDATE_TIMEOUT_MS)
            page.screenshot(path=str(shots / "3-alice-validate.png"))
            dialog.get_by_text(f"temperature_at_target = {CHAPTER_PRINTED_T}").scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "3b-alice-validate-11.2b.png"))
            verdicts = dialog.inner_text()
            dialog.get_by_role("button", name="Ok").click()
            assert f"temperature_at_target = {CHAPTER_PRINTED_T}: {CHAPTER_VALUE_FLAG}" in one_line(verdicts), verdicts
            shows_no_number_near(verdicts, hers, "the Validate dialog")
            assert "Traceback" not in verdicts, verdicts

            # alice's own temperature passes
            passed = run_answer_and_check(page, answer, check, repr(hers), "\u2713",
                                          shots / "4-alice-own-answer-passes.png")
            assert "\u2713 Exercise 11.2(b) passed the visible checks" in passed, passed
            assert "Check failed" not in passed, passed
        except Exception:
            page.screenshot(path=str(shots / "alice-failed.png"))
            raise
        finally:
            page.close()
    # the parameters cell saved as it ran in alice's own lab: Validate must not call them another id's numbers
    mistaken = [line for line in verdicts.split("The following cell failed:") if "Your own numbers" in line]
    assert not mistaken, f"Validate says alice's own saved parameters are another id's: {one_line(mistaken[0])}"


def test_without_an_id_the_exercise_has_the_books_numbers_and_says_how_to_set_one(
        chromium, released_02, shots, repo_root, tmp_path, no_inherited_id):
    notebook = repo_root / released_02
    chapter = top_token_temperature(CHAPTER_LOGITS, CHAPTER_TARGET)
    with student_lab(tmp_path) as lab_server:
        page = chromium.new_page(viewport=LAPTOP)
        page.set_default_timeout(60_000)
        try:
            parameters, answer, check = open_at_the_exercise(page, lab_server, released_02, notebook)
            shown = parameters_shown(page, parameters, shots / "5-no-id-parameters.png")
            assert "The chapter's numbers" in shown and "book's numbers" in shown, shown
            assert "make lab STUDENT=" in shown, shown
            assert "Your own model" not in shown and "student id `" not in shown, shown
            assert logits_and_target(shown) == (CHAPTER_LOGITS, CHAPTER_TARGET), shown

            # the printed 0.334 is the chapter's own number here: never flagged as someone else's; it is rounded,
            # and the check asks for six digits
            rounded = run_answer_and_check(page, answer, check, CHAPTER_PRINTED_T, "Check failed",
                                           shots / "6-no-id-printed-value-rounded.png")
            assert "chapter's value" not in rounded and "another student" not in rounded, rounded
            assert "six digits" in one_line(rounded), rounded

            passed = run_answer_and_check(page, answer, check, f"{chapter:.8f}", "\u2713",
                                          shots / "7-no-id-chapter-value-passes.png")
            assert "\u2713 Exercise 11.2(b) passed the visible checks" in passed, passed
            assert "Check failed" not in passed, passed
        except Exception:
            page.screenshot(path=str(shots / "no-id-failed.png"))
            raise
        finally:
            page.close()
