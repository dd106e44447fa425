"""The course on a real JupyterHub: one instructor and three students as local accounts, each with their
own JupyterLab spawned by the hub (deploy/jupyterhub_config.py), nbgrader's exchange in a shared folder.

The flow goes through each user's own server, through the hub's proxy, with that user's token: the
instructor generates and releases ch11 (formgrader's API), each student fetches it (one in Chromium,
through JupyterLab's Assignment List), writes answers (the contents API) and submits (nbgrader's
assignment-list API); the instructor collects, grades with the course's grader as their own account,
generates and releases feedback; each student fetches theirs. Then formgrader in Chromium, and faults:
the hub restarted, a student's server killed in the middle of a submit.

The tests share one hub and run in file order (one xdist group); each stage is a module fixture, so a
test run alone brings the flow up to its stage first.
"""
from __future__ import annotations

import asyncio
import os
import re
import signal
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest

from .course_flow import (FEEDBACK_SCORE, answers, export_rows, feedback_pages, fetch, formgrader, formgrader_action,
                          grade, listed, nbgrader_action, ok, read_notebook, source_notebook, write_notebook)
from .hub import (ASSIGNMENT, COURSE_ID, INSTRUCTOR, ROOT, STUDENTS, USERS, Hub, hub,  # noqa: F401
                  postgres_server, require, run_as, site)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]

from .course_flow import NOTEBOOK  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BROWSER_STUDENT = STUDENTS[0]  # fetches through the Assignment List in Chromium
KILLED_STUDENT = STUDENTS[2]   # their server dies in the middle of a second submit


# --- what each student hands in, and the autograded score it must earn --------------------------------------
def handed_in(student: str, release: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, float]:
    """The notebook ``student`` submits and its autograded score: student1 the solutions, student2 nothing,
    student3 the solutions with one typical wrong answer (its exercise loses its points, nothing else)."""
    return answers({STUDENTS[0]: "reference", STUDENTS[1]: "blank"}.get(student, "wrong"), release)


# --- helpers ----------------------------------------------------------------------------------------------
def in_browser(scenario):
    """Run ``await scenario(browser)`` with Debian's Chromium, in a thread with an event loop of its own:
    the browser tests may hold a sync Playwright in this worker, and one worker cannot start a second."""
    require(CHROMIUM.exists(), f"Chromium is not installed at {CHROMIUM} (`apt-get install -y chromium`)")
    outcome = {}

    async def main():
        from playwright.async_api import async_playwright
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                outcome["value"] = await scenario(browser)
            finally:
                await browser.close()

    def run():
        try:
            asyncio.run(main())
        except BaseException as error:  # handed to the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, name="hub-chromium")
    thread.start()
    thread.join(timeout=300)
    assert not thread.is_alive(), "the Chromium scenario did not finish within 300 s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


async def log_in(browser, hub: Hub, user: str):
    """A browser page logged in to the hub as ``user`` through its login form."""
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await context.new_page()
    await page.goto(f"{hub.url}/hub/login", wait_until="domcontentloaded")
    await page.fill("input[name=username]", user)
    await page.fill("input[name=password]", hub.site.passwords[user])
    await page.click("input[type=submit], button[type=submit]")
    await page.wait_for_url(re.compile(rf"/user/{user}/lab"), timeout=90_000)
    await page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").wait_for(timeout=90_000)
    return page


async def open_nbgrader_panel(page, item: str) -> list[str]:
    """Nbgrader > ``item`` in JupyterLab's menu bar; returns the menu's items as they were shown."""
    await page.keyboard.press("Escape")
    await page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    entry = page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$"))
    await entry.wait_for(timeout=30_000)
    shown = [text.strip() for text in await page.locator(".lm-Menu-content .lm-Menu-itemLabel").all_inner_texts()]
    await entry.click()
    return shown


# --- stages of the flow (module fixtures: a test run alone brings the flow up to its stage) --------------------
@pytest.fixture(scope="module")
def released(hub):
    """The instructor generates ch11 into the gradebook and releases it, through formgrader's API."""
    formgrader_action(hub, f"assignment/{ASSIGNMENT}/assign")
    formgrader_action(hub, f"assignment/{ASSIGNMENT}/release")
    return read_notebook(hub, INSTRUCTOR, f"lm-policy/release/{ASSIGNMENT}/{NOTEBOOK}.ipynb")


@pytest.fixture(scope="module")
def submitted(hub, released):
    """Each student fetches ch11 (unless the browser test did), writes their answers and submits."""
    expected = {}
    for student in STUDENTS:
        fetch(hub, student)
        notebook, expected[student] = handed_in(student, read_notebook(hub, student, f"{ASSIGNMENT}/{NOTEBOOK}.ipynb"))
        write_notebook(hub, student, f"{ASSIGNMENT}/{NOTEBOOK}.ipynb", notebook)
        nbgrader_action(hub, student, "submit")
    return expected


@pytest.fixture(scope="module")
def graded(hub, site, submitted):
    """The instructor collects (formgrader), grades with the course's grader as their own account, and
    generates and releases feedback (formgrader)."""
    return {"expected": submitted, "output": grade(hub, site)}


# --- the tests -------------------------------------------------------------------------------------------
def test_each_user_has_their_own_server_running_as_their_account(hub, site):
    for user in USERS:
        pid = hub.server_pid(user)  # one jupyterhub-singleuser runs as that account (ps -u)
        home = ok(hub.user_api(user, "GET", "api/contents"), f"{user}'s home")
        assert home["path"] == "" and home["type"] == "directory"
        assert os.stat(f"/proc/{pid}").st_uid == os.stat(site.home(user)).st_uid, user
        # the gradebook's URL (with its password) reaches instructors' servers only
        environment = dict(line.split("=", 1) for line in
                           Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in line)
        expected = hub.env["LMPOLICY_GRADEBOOK_URL"] if user == INSTRUCTOR else ""
        assert environment.get("LMPOLICY_GRADEBOOK_URL", "") == expected, user
    # a student's token opens no other user's server (the instructor, a hub admin, may open any)
    for student in STUDENTS:
        for other in set(USERS) - {student}:
            status, _, _ = hub.request("GET", f"/user/{other}/api/contents", token=hub.tokens[student])
            assert status == 403, f"{student}'s token opened {other}'s server: {status}"
    # students: nbgrader's Assignment List and Validate, never formgrader; the instructor: formgrader
    for student in STUDENTS:
        assert hub.user_api(student, "GET", f"assignments?course_id={COURSE_ID}")[0] == 200
        assert hub.user_api(student, "GET", "formgrader/api/status")[0] == 404
        # Validate's handler is there (a server without the extension answers 404 to this path)
        assert hub.user_api(student, "POST", "assignments/validate", body={"path": "none.ipynb"})[0] != 404
    assert formgrader(hub, "GET", "status")["status"] is True
    # the iframe rule of JupyterHub >= 4.1: students keep 'none', the instructor's server frames itself
    assert "frame-ancestors 'none'" in hub.user_api(STUDENTS[0], "GET", "lab")[2]["Content-Security-Policy"]
    assert hub.user_api(INSTRUCTOR, "GET", "formgrader")[2]["Content-Security-Policy"] == "frame-ancestors 'self'"


def test_a_student_fetches_ch11_in_the_assignment_list(hub, released):
    """Chromium, logged in to the hub as a student: Nbgrader > Assignment List > Fetch."""
    async def scenario(browser):
        page = await log_in(browser, hub, BROWSER_STUDENT)
        menu = await open_nbgrader_panel(page, "Assignment List")
        assert not [item for item in menu if "Formgrader" in item or "Course List" in item], menu
        released_list = page.locator("#released_assignments_list")
        await released_list.get_by_text(ASSIGNMENT).wait_for(timeout=60_000)
        await page.screenshot(path=str(ARTIFACTS / "hub-student-assignment-list.png"))
        await released_list.get_by_role("button", name="Fetch").click()
        await page.locator("#fetched_assignments_list").get_by_text(ASSIGNMENT).wait_for(timeout=60_000)
        await page.screenshot(path=str(ARTIFACTS / "hub-student-fetched.png"))

    ARTIFACTS.mkdir(exist_ok=True)
    in_browser(scenario)
    fetched = read_notebook(hub, BROWSER_STUDENT, f"{ASSIGNMENT}/{NOTEBOOK}.ipynb")
    assert [c.source for c in fetched.cells] == [c.source for c in released.cells]
    assert [a["status"] for a in listed(hub, BROWSER_STUDENT)] == ["fetched"]


def test_students_submit_and_the_instructor_collects_and_grades(hub, site, graded):
    expected = graded["expected"]
    submissions = {s["student"]: s for s in formgrader(hub, "GET", f"submissions/{ASSIGNMENT}")}
    assert sorted(s for s in submissions if submissions[s]["submitted"]) == sorted(STUDENTS)
    for student in STUDENTS:
        assert submissions[student]["code_score"] == pytest.approx(expected[student]), \
            f"{student}: the grader said\n" + _wrapped(graded["output"])
    # what the grader warns of itself reaches the instructor: here, that their account cannot make control groups
    problem = run_as(INSTRUCTOR, "python", "-c", "from lmpolicy_grader.isolation.cgroup import cgroup_problem; "
                     "print(cgroup_problem() or '')", check=True).stdout.strip()
    if problem:
        assert ("the grader warned while it graded:\n  - each sandbox's processes are limited one by one, not "
                f"together: {problem}") in graded["output"], _wrapped(graded["output"])
    # the gradebook is the PostgreSQL database the hub gave every server, never a silent SQLite file
    assert hub.env["LMPOLICY_GRADEBOOK_URL"].startswith("postgresql")
    assert not (site.course / "gradebook.db").exists()
    # the grade was written by the instructor's account, in the instructor's course folder
    assert (site.course / "submitted" / STUDENTS[0] / ASSIGNMENT / f"{NOTEBOOK}.ipynb").exists()
    assert os.stat(site.course / "autograded").st_uid == os.stat(site.home(INSTRUCTOR)).st_uid


def _wrapped(text: str, width: int = 70) -> str:
    """``text`` in short lines, so that a log that shortens long ones keeps the whole of a grader's reason."""
    return "\n".join(piece for line in text.splitlines() for piece in textwrap.wrap(line, width) or [""])


def test_each_student_fetches_their_own_feedback_and_no_one_elses(hub, graded):
    expected = graded["expected"]
    for student in STUDENTS:
        nbgrader_action(hub, student, "fetch_feedback")
        pages = feedback_pages(hub, student)
        assert [name for name, _ in pages] == [f"{NOTEBOOK}.html"], (student, pages and pages[0][0])
        html = pages[0][1]
        # the notebook's total comes first: "Score: 5 so far, 2 points not graded yet / 7.0" while a
        # written answer waits for the instructor, "Score: 0.0 / 7.0" when nothing does
        total = FEEDBACK_SCORE.search(html)
        assert total, f"no score in {student}'s feedback"
        assert float(total.group(1)) == pytest.approx(expected[student]), (student, total.group(0))
        assert float(total.group(2)) == pytest.approx(sum(c.metadata.nbgrader.get("points", 0) for c in source_notebook().cells
                                                          if c.metadata.get("nbgrader", {}).get("grade")))
        for other in set(STUDENTS) - {student}:
            assert other not in html
    # the exchange's feedback folder can be entered but not listed: a student opens only the file whose
    # name is the hash of their own submission
    for student in STUDENTS:
        feedback = hub.site.exchange / COURSE_ID / "feedback"
        assert run_as(student, "ls", str(feedback)).returncode != 0


def test_students_cannot_read_each_others_work_nor_the_instructors_source(hub, site, submitted):
    inbound = site.exchange / COURSE_ID / "inbound"
    mine, theirs = STUDENTS[1], STUDENTS[0]
    for command in (["ls", str(inbound)],                                                    # the submissions
                    ["ls", str(site.home(theirs))],                                          # another's home
                    ["cat", str(site.home(theirs) / ASSIGNMENT / f"{NOTEBOOK}.ipynb")],      # their answers
                    ["cat", str(site.course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")],  # the source
                    ["ls", str(site.course / "submitted")]):
        result = run_as(mine, *command)
        assert result.returncode != 0 and "Permission denied" in result.stderr, (command, result.stdout[:500])
    # the student's server cannot show them either: it runs as the student, so a link in their home to
    # another's work gets the operating system's refusal (Jupyter answers 500 to a PermissionError)
    for name, target in (("peek-home", site.home(theirs) / ASSIGNMENT), ("peek-inbound", inbound),
                         ("peek-source", site.course / "source" / ASSIGNMENT)):
        run_as(mine, "ln", "-sfn", str(target), str(site.home(mine) / name), check=True)
        status, body, _ = hub.user_api(mine, "GET", f"api/contents/{name}")
        assert status in (403, 404, 500) and NOTEBOOK not in str(body), (name, status, str(body)[:300])
    # ... while the instructor reads every submission (collect copied them into the course)
    assert run_as(INSTRUCTOR, "ls", str(inbound)).returncode == 0


def test_formgrader_opens_in_jupyterlab_and_a_manual_grade_shows_in_the_export(hub, site, graded):
    student = STUDENTS[0]
    (submission,) = [s for s in formgrader(hub, "GET", f"submissions/{ASSIGNMENT}") if s["student"] == student]
    assert submission["needs_manual_grade"], submission  # the written answer waits for the instructor
    notebook_id = next(s["id"] for s in formgrader(hub, "GET", f"submitted_notebooks/{ASSIGNMENT}/{NOTEBOOK}")
                       if s["student"] == student)
    manual = next(c for c in source_notebook().cells if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade"))
    points = manual.metadata.nbgrader["points"]

    async def scenario(browser):
        page = await log_in(browser, hub, INSTRUCTOR)
        # the formgrader panel of JupyterLab is an iframe of the instructor's server: blank if the hub's
        # frame-ancestors rule were left as is
        await open_nbgrader_panel(page, "Formgrader")
        frame = page.frame_locator("iframe").first
        await frame.get_by_text("Manage Assignments").first.wait_for(timeout=60_000)
        await frame.get_by_text(ASSIGNMENT).first.wait_for(timeout=60_000)
        await page.screenshot(path=str(ARTIFACTS / "hub-formgrader-panel.png"))
        # grading a written answer: formgrader's page of this submission, in a tab of its own
        await page.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/submissions/{notebook_id}/?index=0",
                        wait_until="domcontentloaded")
        grade_id = manual.metadata.nbgrader["grade_id"]
        # the class appears once formgrader's script has loaded the grades and bound the field's saving
        score = page.locator(f"input.score.needs_manual_grade#{grade_id}")
        await score.wait_for(timeout=60_000)
        async with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT",
                                        timeout=60_000) as saved:
            await score.fill(str(points))
            await score.press("Tab")  # formgrader saves a score when the field changes and loses focus
        assert (await saved.value).ok, (await saved.value).status
        await page.locator(f"input.score#{grade_id}").scroll_into_view_if_needed()
        await page.screenshot(path=str(ARTIFACTS / "hub-formgrader-manual-grade.png"))

    in_browser(scenario)
    grade = next(g for g in formgrader(hub, "GET", f"grades?submission_id={notebook_id}")
                 if g["name"] == manual.metadata.nbgrader["grade_id"])
    assert grade["manual_score"] == points
    after = export_rows(hub, site)[student]
    assert after["status"] == "complete", after
    assert float(after["score"]) == pytest.approx(graded["expected"][student] + points)


def test_the_hub_restarted_keeps_users_servers_files_and_submissions(hub, site, graded):
    submissions_before = sorted(p.name for p in (site.exchange / COURSE_ID / "inbound").iterdir())
    pids = {user: hub.server_pid(user) for user in USERS}
    hub.stop()
    with pytest.raises(OSError):  # nothing answers: the hub and its proxy are gone
        hub.request("GET", "/hub/api/", timeout=5)
    hub.start()
    # the users and their tokens came back from the hub's database; their servers never stopped
    status, users, _ = hub.request("GET", "/hub/api/users", token=hub.tokens[INSTRUCTOR])
    assert status == 200 and {u["name"] for u in users} == set(USERS)
    for user in USERS:
        assert hub.server_ready(user), user
        assert hub.server_pid(user) == pids[user]
    for student in STUDENTS:
        read_notebook(hub, student, f"{ASSIGNMENT}/{NOTEBOOK}.ipynb")
        assert "submitted" in {a["status"] for a in listed(hub, student)}, student
    assert sorted(p.name for p in (site.exchange / COURSE_ID / "inbound").iterdir()) == submissions_before
    assert {s["student"] for s in formgrader(hub, "GET", f"submissions/{ASSIGNMENT}") if s["submitted"]} == set(STUDENTS)


def _submission_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_server_killed_in_the_middle_of_a_submit_leaves_no_partial_submission_to_collect(hub, site, graded):
    student = KILLED_STUDENT
    inbound = site.exchange / COURSE_ID / "inbound"
    collected = site.course / "submitted" / student / ASSIGNMENT
    complete = _submission_files(collected)  # the first submission, collected whole
    assert "timestamp.txt" in complete and f"{NOTEBOOK}.ipynb" in complete
    earlier = {p.name for p in inbound.iterdir()}
    # many small files (well under nbgrader's size limits) make the copy into the exchange take long
    # enough to kill the server in the middle of it
    run_as(student, "python", "-c", "import pathlib; d = pathlib.Path('ch11/data'); d.mkdir(exist_ok=True); "
           "[(d / f'part{i:05d}.txt').write_text('x' * 2000) for i in range(6000)]", check=True)
    pid = hub.server_pid(student)
    answer = {}
    submit = threading.Thread(target=lambda: answer.update(
        response=hub.user_api(student, "POST", "assignments/submit", timeout=120,
                              body={"course_id": COURSE_ID, "assignment_id": ASSIGNMENT})))
    submit.start()
    deadline = time.monotonic() + 120
    while not {p.name for p in inbound.iterdir()} - earlier:
        assert time.monotonic() < deadline and submit.is_alive(), f"the submit never reached the exchange: {answer}"
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    submit.join(timeout=120)
    hub.stop_server(student)  # what the student does on the hub's home page: stop the dead server ...
    (partial,) = [inbound / name for name in {p.name for p in inbound.iterdir()} - earlier]
    assert partial.name.startswith(f"{student}+{ASSIGNMENT}+")
    assert answer["response"][0] != 200 or answer["response"][1].get("success") is False  # the student saw it fail
    in_exchange = _submission_files(partial)
    assert "timestamp.txt" not in in_exchange and len(in_exchange) < 6000 + 2, "the kill came after the copy"

    hub.start_server(student)  # ... and start a new one, which finds their work where it was
    assert len(ok(hub.user_api(student, "GET", f"api/contents/{ASSIGNMENT}/data"), "data")["content"]) == 6000

    # stock nbgrader's collect would take the cut-off copy and delete the complete one for it; the
    # instructor's collect (lmpolicy_grader/class_grading/exchange.py, set in the course's nbgrader_config.py) skips it
    log = formgrader_action(hub, f"assignment/{ASSIGNMENT}/collect")["log"]
    assert f"Skipping {partial.name}" in log, log
    assert _submission_files(collected) == complete, (
        f"collect took the partial copy ({len(in_exchange)} files, no timestamp.txt) instead of the complete one")
