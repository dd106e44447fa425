"""JupyterLab servers started exactly as `make lab` (a student's) and `make instructor` start them,
and headless Chromium to drive them.

The servers are the make targets themselves, with LAB_ARGS adding only what a test needs: no browser
window, a free port and a token. Jupyter's config, data and runtime folders are the temporary ones that
tests/conftest.py set up. The student's copy of the assignment that `make lab` makes is
test-artifacts/browser-work/<the test process's id>/ch11 (CH11_COPY), made afresh for each test session (so that
two sessions at once never share a work folder), and the progress file
is the session's own; the demo notebooks are opened from copies under test-artifacts/ (ignored by git),
so nothing a test does in the browser can touch the committed notebooks or a real student's work.

Every server ends with the test run, interrupted or not (tests/browser/server_processes.py): its whole
process group and its kernels, at the fixture's end, at exit, on SIGTERM or SIGHUP (turned into the
KeyboardInterrupt that makes pytest tear its fixtures down, as Ctrl-C does), and, should the test process
die without any of that (SIGKILL), by the watcher started beside each server.

Chromium is Debian's (`apt-get install -y chromium`); Playwright's own browser download does not work
on these machines. When LMPOLICY_REQUIRE_BROWSER is set (CI sets it) a missing Chromium fails the
tests instead of skipping them.
"""
import atexit
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser.notebook_page import run_all_cells
from tests.browser.server_processes import end as end_group

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium's own connections are refused by the closed
# network and page loads stall.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
GRACE_FOR_WATCHER = 30  # seconds for the watcher to see its pipe closed and exit
SERVER_START_TIMEOUT = 90  # seconds; a cold start on a busy 2-core machine takes about 10


@dataclass
class LabServer:
    base_url: str
    token: str
    log_path: Path
    progress_file: Path  # the students' record the server's kernels write
    pgid: int  # the server's process group (make, jupyter-lab); its kernels are its descendants

    def url(self, path: str) -> str:
        """The address of `path` on this server, with the token so the browser is logged in."""
        separator = "&" if "?" in path else "?"
        return f"{self.base_url}{path}{separator}token={self.token}"

    def get(self, path: str) -> tuple[int, str, str]:
        """GET `path` (redirects followed); returns (status, final url, body)."""
        # the token goes in a header: a query-string token is lost on redirects
        request = urllib.request.Request(self.base_url + path, headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.url, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, self.base_url + path, error.read().decode("utf-8", "replace")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


LAB_SETTINGS = {
    # the browser tests only read what they run: never save the notebook copies
    ("docmanager-extension", "plugin"): {"autosave": False},
    # start the notebook's kernel without the 'Select Kernel' dialog, which otherwise appears now and
    # then while the page loads and swallows the clicks
    ("notebook-extension", "tracker"): {"autoStartDefaultKernel": True},
}


# The instructor's lab asks whether to fetch Jupyter's news, in a toast that can cover what a test clicks; the
# student's lab has no such toast (jupyter-config/student disables it), and its tests see what a student sees.
INSTRUCTOR_SETTINGS = {("apputils-extension", "notification"): {"fetchNews": "false", "checkForUpdates": False}}


def _write_lab_settings(settings_dir: Path, target: str) -> None:
    """User settings for the test server only (JUPYTERLAB_SETTINGS_DIR points here)."""
    settings = LAB_SETTINGS if target == "lab" else {**LAB_SETTINGS, **INSTRUCTOR_SETTINGS}
    for (extension, plugin), values in settings.items():
        folder = settings_dir / "@jupyterlab" / extension
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{plugin}.jupyterlab-settings").write_text(json.dumps(values))


_RUNNING: dict[int, subprocess.Popen] = {}  # process group -> the make that leads it, while it runs


def _stop(process: subprocess.Popen) -> None:
    """End the process group we started (make, jupyter-lab) and its kernels: SIGTERM, then SIGKILL to what lingers.

    make can exit before its jupyter child has closed its port, so wait for the whole group, not make alone."""
    end_group(process.pid, reap=process.poll)  # poll() reaps make, so its zombie does not keep the group alive
    process.wait(timeout=10)
    _RUNNING.pop(process.pid, None)


@atexit.register
def _stop_all() -> None:
    """A pytest that exits without tearing its fixtures down still ends every server it started."""
    for process in list(_RUNNING.values()):
        _stop(process)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _tear_down_on_termination() -> None:
    """SIGTERM and SIGHUP end pytest as Ctrl-C does, with its fixtures torn down (their default ends the
    process at once, finalizers and atexit hooks unrun)."""
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is signal.SIG_DFL:
                signal.signal(signum, _interrupt)


def _start_watcher(pgid: int) -> tuple[subprocess.Popen, int]:
    """A process that ends group ``pgid`` when the pipe it reads closes, that is when this process ends,
    however it ends; returns it and the pipe's end to close after a normal stop."""
    read_end, write_end = os.pipe()  # not inherited by the other children (PEP 446)
    watcher = subprocess.Popen([sys.executable, str(Path(__file__).with_name("server_processes.py")), str(pgid)],
                               stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)  # a Ctrl-C to the terminal's group must not reach it
    os.close(read_end)
    return watcher, write_end


BROWSER_WORK = ROOT / "test-artifacts" / "browser-work"
STUDENT_WORK = f"test-artifacts/browser-work/{os.getpid()}"  # the student's work folder, relative to the course folder
STUDENT_COPY = f"{STUDENT_WORK}/ch11"  # CH11_COPY


def _serve(target: str, scratch: Path, **make_vars: str):
    """`make <target>` on a free port with a token; yields the LabServer, stops it (with its kernels)."""
    if shutil.which("make") is None:
        pytest.fail("`make` is not installed: the course starts JupyterLab with `make lab`")
    _tear_down_on_termination()
    settings_dir = scratch / "lab-user-settings"
    _write_lab_settings(settings_dir, target)
    token = secrets.token_hex(16)
    port = _free_port()
    lab_args = f"--no-browser --port={port} --port-retries=0 --IdentityProvider.token={token}"
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings_dir),
               JUPYTERLAB_WORKSPACES_DIR=str(scratch / "lab-workspaces"),
               LMPOLICY_PROGRESS_FILE=str(scratch / "progress.json"))
    log_path = scratch / "jupyter-lab.log"
    # -o .venv/.installed: the suite already runs inside the installed venv, never reinstall here.
    command = ["make", "--no-print-directory", "-o", ".venv/.installed", target, f"LAB_ARGS={lab_args}",
               *(f"{name}={value}" for name, value in make_vars.items())]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    _RUNNING[process.pid] = process
    watcher, watcher_pipe = _start_watcher(process.pid)
    server = LabServer(base_url=f"http://127.0.0.1:{port}", token=token, log_path=log_path,
                       progress_file=scratch / "progress.json", pgid=process.pid)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"`make {target}` exited with code {process.returncode} before serving:\n"
                            f"{server.log()[-3000:]}")
            try:
                if server.get("/api/status")[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer within {SERVER_START_TIMEOUT} s:\n"
                            f"{server.log()[-3000:]}")
            time.sleep(0.5)
        yield server
    finally:
        _stop(process)
        os.close(watcher_pipe)  # the watcher finds nothing left and exits
        watcher.wait(timeout=GRACE_FOR_WATCHER)
    with socket.socket() as sock:  # stopped means the port no longer answers
        assert sock.connect_ex(("127.0.0.1", port)) != 0, f"JupyterLab still answers on port {port}"


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory) -> LabServer:
    """A student's `make lab`, with a fresh work folder (STUDENT_WORK): the assignment in its ch11, the start page
    and the demos beside it. The work folders of test sessions that have ended are removed."""
    for entry in BROWSER_WORK.glob("*"):
        if entry.name == str(os.getpid()) or not (entry.name.isdigit() and Path(f"/proc/{entry.name}").exists()):
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()
    yield from _serve("lab", tmp_path_factory.mktemp("lab-server"), CH11_COPY=STUDENT_COPY)


@pytest.fixture(scope="session")
def instructor_lab_server(tmp_path_factory) -> LabServer:
    """The instructor's `make instructor`."""
    yield from _serve("instructor", tmp_path_factory.mktemp("instructor-lab-server"))


@pytest.fixture(scope="module")
def chromium():
    """Debian's Chromium driven by Playwright; skipped (or, under CI, failed) when it is missing.

    One per test module, not per session: Playwright's sync API keeps its event loop running in this
    thread while it is open, and every later test on the worker that starts a loop of its own (nbclient,
    a kernel manager) would then fail with "cannot be called from a running event loop"."""
    if not CHROMIUM.exists():
        message = f"Chromium is not installed at {CHROMIUM} (install it with `apt-get install -y chromium`)"
        if os.environ.get("LMPOLICY_REQUIRE_BROWSER"):
            pytest.fail(message + "; LMPOLICY_REQUIRE_BROWSER is set, so the browser tests must run")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """test-artifacts/ at the repository root (ignored by git): screenshots and notebook copies."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def emptied(folder: Path) -> Path:
    """``folder`` made afresh and empty: a test module's screenshots or notebook copies, never an earlier run's."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture(scope="session")
def student_copy(lab_server) -> Path:
    """The student's copy of ch11 that the lab server's `make lab` made."""
    return ROOT / STUDENT_COPY


LAPTOP = {"width": 1280, "height": 800}  # the screen of the student, the file browser open


@pytest.fixture
def page(chromium):
    """A page at the laptop's size, in a browser context of its own (its own storage and focus)."""
    context = chromium.new_context(viewport=LAPTOP)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def run_all(artifacts_dir):
    """``run_all(page, name)``: Run > Run All Cells on the page, retried until the cells are queued."""
    return lambda page, name: run_all_cells(page, name, artifacts_dir)
