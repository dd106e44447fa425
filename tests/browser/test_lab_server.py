"""`make lab` serves a student's JupyterLab: nbgrader's Validate, none of the instructor's tools, and no
Assignment List without an exchange; `make instructor` serves the instructor's, with the formgrader."""
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.browser.conftest import STUDENT_COPY, STUDENT_WORK
from tests.browser.notebook_page import replace_cell_code, save_notebook

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]

INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu")


def page_config(body: str) -> str:
    return re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', body, re.S).group(1)


def test_student_lab_loads_validate_but_not_the_instructors_tools(lab_server):
    status, _, body = lab_server.get("/lab")
    assert status == 200, f"/lab answered {status}"
    config = page_config(body)
    # the page config lists the prebuilt (federated) lab extensions the browser will load
    for extension in ("@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager"):
        assert f'"name": "{extension}"' in config, f"/lab does not load the {extension} lab extension"
    disabled = re.search(r'"disabledExtensions": \[(.*?)\]', config, re.S).group(1)
    for plugin in INSTRUCTOR_PLUGINS:
        assert f'"{plugin}"' in disabled, f"{plugin} is not disabled in the student's lab"
    assert '"@jupyter/nbgrader:validate-assignment"' not in disabled
    for path in ("/formgrader", "/assignments?course_id=lm-policy", "/formgraders"):
        assert lab_server.get(path)[0] == 404, f"the student's lab answers {path}"


def test_student_lab_made_the_working_copy_from_the_release(student_copy, repo_root):
    release = sorted(p.name for p in (repo_root / "release" / "ch11").glob("*.ipynb"))
    assert sorted(p.name for p in student_copy.glob("*.ipynb")) == release
    # test_feedback_loop.py works in 01 of this same copy; the others are as the release made them
    for name in release[1:]:
        assert (student_copy / name).read_bytes() == (repo_root / "release" / "ch11" / name).read_bytes(), name
    # the start page, the demos and the study: the student's copies beside ch11/, never the tracked ones
    course = sorted(p.name for p in (repo_root / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in student_copy.parent.glob("*.ipynb")) == course


def test_the_printed_url_and_the_servers_root_open_the_students_start_page(lab_server, student_copy):
    start_page = f"/lab/tree/{STUDENT_WORK}/00_start_here.ipynb"
    status, final_url, _ = lab_server.get("/")
    assert status == 200 and final_url.endswith(start_page), final_url
    printed = re.findall(r"http://127\.0\.0\.1:\d+(/\S*?)\?token=", lab_server.log())
    assert printed and set(printed) == {start_page}, printed
    # opened unrun, it already says who the student is and shows the progress: the server fills its first cell
    # as it serves the page (lmpolicy.notebook.served_notebooks)
    import json
    status, _, body = lab_server.get(f"/api/contents/{start_page.removeprefix('/lab/tree/')}?type=notebook&content=1")
    first = json.loads(body)["content"]["cells"][1]
    shown = first["outputs"][0]["data"]["text/plain"]
    assert status == 200 and shown.startswith(("You are ", "No student id")) and "course total" in shown, shown


def test_instructor_lab_has_the_formgrader(instructor_lab_server):
    status, final_url, body = instructor_lab_server.get("/formgrader")
    assert status == 200, f"/formgrader answered {status}:\n{instructor_lab_server.log()[-2000:]}"
    assert "/formgrader/" in final_url, f"/formgrader ended at {final_url}"
    title = re.search(r"<title>(.*?)</title>", body, re.S)
    assert title and "nbgrader" in title.group(1), f"/formgrader is not nbgrader's page: {title}"
    status, _, lab = instructor_lab_server.get("/lab")
    assert status == 200 and "@jupyter/nbgrader:formgrader" not in re.search(
        r'"disabledExtensions": \[(.*?)\]', page_config(lab), re.S).group(1)


def test_make_work_copy_copies_once_and_never_overwrites_the_students_notebooks(repo_root, tmp_path):
    import shutil
    import subprocess

    copy = "test-artifacts/work-copy-test/ch11"
    shutil.rmtree(repo_root / copy, ignore_errors=True)
    make = ["make", "--no-print-directory", "-o", ".venv/.installed", "work-copy", f"CH11_COPY={copy}"]
    subprocess.run(make, cwd=repo_root, check=True)
    mine = repo_root / copy / "01_policy_softmax.ipynb"
    mine.write_text("my answers")
    (repo_root / copy / "02_temperature.ipynb").unlink()  # as if the release added a notebook later
    subprocess.run(make, cwd=repo_root, check=True)
    assert mine.read_text() == "my answers"
    assert (repo_root / copy / "02_temperature.ipynb").read_bytes() == \
        (repo_root / "release" / "ch11" / "02_temperature.ipynb").read_bytes()
    # the start page, the demos and the study, beside ch11/: copied once, the student's own never overwritten
    work = repo_root / copy.rsplit("/", 1)[0]
    start = work / "00_start_here.ipynb"
    assert start.read_bytes() == (repo_root / "notebooks" / "00_start_here.ipynb").read_bytes()
    start.write_text("my start page")
    (work / "demo_tilting.ipynb").unlink()
    subprocess.run(make, cwd=repo_root, check=True)
    assert start.read_text() == "my start page"
    assert (work / "demo_tilting.ipynb").read_bytes() == (repo_root / "notebooks" / "demo_tilting.ipynb").read_bytes()
    shutil.rmtree(work)


# --- what a student meets: no news toast, check cells in full, Validate's verdicts -----------------------

VALIDATE_COPY = "test-artifacts/validate-work"  # a copy of its own, so no other test's notebook changes under it
RUN_TIMEOUT_MS = 180_000  # Validate runs the whole notebook in a fresh kernel (torch's import) on a busy machine
# a softmax without the max shift, typed as a student would write it (exp(1000) overflows to inf, inf/inf is NaN)
UNSHIFTED_SOFTMAX = '''def softmax(logits, dim=-1):
    exps = torch.exp(logits)
    return exps / exps.sum(dim=dim, keepdim=True)
'''


def student_notebook_01(repo_root) -> Path:
    """Release notebook 01, copied where no other test changes it."""
    folder = repo_root / VALIDATE_COPY
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(repo_root / "release" / "ch11" / "01_policy_softmax.ipynb", folder / "01_policy_softmax.ipynb")
    return folder / "01_policy_softmax.ipynb"


def test_student_lab_disables_jupyters_news(lab_server):
    disabled = re.search(r'"disabledExtensions": \[(.*?)\]', page_config(lab_server.get("/lab")[2]), re.S).group(1)
    assert '"@jupyterlab/apputils-extension:announcements"' in disabled


@pytest.mark.browser
def test_a_student_opens_the_course_then_validates_a_wrong_softmax_and_reads_its_verdict(lab_server, chromium,
                                                                                        repo_root, artifacts_dir):
    from playwright.sync_api import expect

    shots = artifacts_dir / "validate"  # the screenshots, beside the other browser tests' (never a fixed /tmp path)
    shots.mkdir(exist_ok=True)
    path = student_notebook_01(repo_root)
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(60_000)
    try:
        # the start page, where `make lab`'s printed URL (the server's root) opens: no toast over its table,
        # and, unrun, who the student is and their progress on the first screen
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto(lab_server.url("/"))
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=RUN_TIMEOUT_MS)
        page.wait_for_timeout(5_000)  # JupyterLab asks for the news once the workspace is restored
        page.screenshot(path=str(shots / "1-start-page.png"))
        assert page.locator(".Toastify__toast").count() == 0, page.locator(".Toastify__toast").all_inner_texts()
        # the start page in view: the server's workspace may hold other tabs of it, opened by earlier tests
        shown = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        overview = shown.locator(".jp-OutputArea-output table.lmpolicy-overview")
        expect(shown.locator(".jp-OutputArea-output .lmpolicy-who")).to_be_visible()
        expect(overview).to_contain_text("course total")
        view = shown.locator(".jp-WindowedPanel-outer").bounding_box()
        box = overview.bounding_box()
        assert box["y"] + box["height"] <= view["y"] + view["height"], (box, view)  # on the first screen
        page.set_viewport_size({"width": 1280, "height": 900})

        # notebook 01: a check cell shows its code, a heading and one call
        page.goto(lab_server.url(f"/lab/tree/{VALIDATE_COPY}/01_policy_softmax.ipynb") + "&reset")
        cells = page.locator(".jp-NotebookPanel .jp-Cell")
        cells.first.wait_for(timeout=RUN_TIMEOUT_MS)
        import nbformat
        notebook = nbformat.read(path, as_version=4)
        index = {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(notebook.cells)}
        check = cells.nth(index["nb01_softmax__tests"])
        check.scroll_into_view_if_needed()
        expect(check.locator(".jp-InputPlaceholder")).to_have_count(0)
        expect(check.locator(".cm-content")).to_contain_text("nb01.SOFTMAX.check(softmax)")
        page.wait_for_timeout(1_000)  # the notebook lays its cells out as they come into view
        check.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "2-check-cell.png"))
        check.screenshot(path=str(shots / "2b-the-check-cell.png"))

        # the student types a softmax without the max shift, saves, presses Validate
        replace_cell_code(page, index["nb01_softmax__answer"], UNSHIFTED_SOFTMAX)
        save_notebook(page, RUN_TIMEOUT_MS)
        page.get_by_role("button", name="Validate").click()
        dialog = page.locator(".jp-Dialog", has_text="Validation Results")
        expect(dialog.locator(".validation-failed")).to_be_visible(timeout=RUN_TIMEOUT_MS)
        page.screenshot(path=str(shots / "3-validate-dialog.png"))
        dialog.locator(".jp-Dialog-content").screenshot(path=str(shots / "4-validate-dialog-content.png"))
        shown = dialog.locator(".validation-failed").inner_text()
    except Exception:
        page.screenshot(path=str(shots / "failed.png"))
        raise
    finally:
        page.close()
    lines = [line.strip() for line in shown.splitlines() if line.strip()]
    heading = next(i for i, line in enumerate(lines) if line.startswith("Exercise 01.softmax") and
                   line.endswith("the check cell"))
    assert lines[heading - 1] == "The following cell failed:", lines
    assert lines[heading + 1].startswith("\u2717 Check failed: softmax(torch.tensor([1000., 999., 998.])) "
                                         "contains NaN"), lines
    test_source = {line.strip() for cell in notebook.cells if "checks.done(" in cell.source
                   for line in cell.source.splitlines() if line.strip()}
    assert not test_source & set(lines), f"the dialog shows test code: {test_source & set(lines)}"
    assert "Traceback" not in shown and len(lines) <= 14, lines
    assert max(map(len, lines)) <= 110, "a line wider than the dialog: " + max(lines, key=len)


@pytest.mark.browser
def test_the_start_pages_links_open_the_students_own_notebooks(lab_server, chromium, student_copy, artifacts_dir):
    """From where the start page now lives (the work folder), its links reach the student's copy in ch11/ and
    the demos' copies beside it, never the course's tracked notebooks."""
    from playwright.sync_api import expect

    work = STUDENT_WORK
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(60_000)
    try:
        for link, path in (("01_policy_softmax", f"{STUDENT_COPY}/01_policy_softmax.ipynb"),
                           ("demo_tilting", f"{work}/demo_tilting.ipynb")):
            page.goto(lab_server.url("/") + "&reset")
            page.locator(".jp-RenderedMarkdown a", has_text=re.compile(f"^{link}$")).first.click()
            tab = page.locator(".lm-TabBar-tab", has_text=f"{link}.ipynb")
            expect(tab).to_be_visible(timeout=RUN_TIMEOUT_MS)
            expect(tab).to_have_attribute("title", re.compile(f"Path: {re.escape(path)}\n"))  # set once the file is read
    except Exception:
        page.screenshot(path=str(artifacts_dir / "start-page-links-failed.png"))
        raise
    finally:
        page.close()


# --- the servers end with the test run, interrupted or not ------------------------------------------------

HOLDER_REPORT = "LMPOLICY_SERVER_HOLDER_REPORT"  # set: the holder below runs (in a pytest of its own)


@pytest.fixture
def held_server(tmp_path_factory):
    """A `make lab` of its own (its own copy of ch11), stopped as every browser test's server is."""
    from tests.browser.conftest import _serve

    yield from _serve("lab", tmp_path_factory.mktemp("held"), CH11_COPY="test-artifacts/held-server/ch11")


@pytest.mark.skipif(not os.environ.get(HOLDER_REPORT), reason="run by test_a_server_and_its_kernel_end_...")
def test_holds_a_server_and_a_kernel_until_the_run_ends(held_server):
    """Starts a kernel in a student's lab, says which processes the server and kernel are, and waits to be ended."""
    import json
    import urllib.request

    from tests.browser.server_processes import members

    for server in [held_server]:
        request = urllib.request.Request(server.base_url + "/api/kernels", data=b"{}", method="POST",
                                         headers={"Authorization": f"token {server.token}"})
        with urllib.request.urlopen(request, timeout=120) as response:
            kernel = json.load(response)["id"]
        deadline = time.monotonic() + 120
        while not (kernels := [pid for pid in members(server.pgid) if f"kernel-{kernel}" in _command(pid)]):
            assert time.monotonic() < deadline, "the kernel's process did not appear"
            time.sleep(0.5)
        report = {"pids": sorted(members(server.pgid)), "kernel": kernels[0], "port": int(server.base_url.rsplit(":", 1)[1])}
        Path(os.environ[HOLDER_REPORT]).write_text(json.dumps(report))
        time.sleep(900)  # ended by the signal long before


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pids) -> list[int]:
    return [pid for pid in pids if _command(pid)]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_server_and_its_kernel_end_with_the_run_however_it_is_ended(signum, repo_root, tmp_path):
    """A pytest holding a `make lab` with a running kernel gets Ctrl-C's SIGINT, SIGTERM or SIGKILL: within a
    minute none of the server's processes, nor its kernel, is left, and its port is closed."""
    import json
    import socket
    import subprocess
    import sys

    report = tmp_path / "report.json"
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                            f"{Path(__file__)}::test_holds_a_server_and_a_kernel_until_the_run_ends"],
                           cwd=repo_root, env=dict(os.environ, **{HOLDER_REPORT: str(report)}),
                           stdout=open(tmp_path / "pytest.log", "w"), stderr=subprocess.STDOUT, start_new_session=True,
                           # as in a terminal: a run started in the background of a script inherits SIGINT ignored
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while not report.exists():
            assert run.poll() is None, (tmp_path / "pytest.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the holder did not start its server and kernel"
            time.sleep(0.5)
        time.sleep(0.5)  # the report is written whole (one write), but give the holder its sleep
        held = json.loads(report.read_text())
        assert held["kernel"] in held["pids"] and len(_alive(held["pids"])) >= 3, held  # make, jupyter-lab, kernel
        os.kill(run.pid, signum)
        run.wait(timeout=300)  # its teardown stops the server: slow on a loaded machine (CI: 132 s)
        deadline = time.monotonic() + 60
        while _alive(held["pids"]) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = {pid: _command(pid) for pid in _alive(held["pids"])}
        assert not left, f"after {signum.name} these are still running: {left}"
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", held["port"])) != 0, "the server's port still answers"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
