"""The course's flow on a hub, as its users drive it through their own servers: the steps tests/deploy/test_hub.py
takes one by one, and a whole class at once (`ClassRun`), which tests/deploy/test_hub_class.py runs small and
bench/bench_hub.py runs with twenty students.

A class at once: every student logs in (a token), asks for their server, watches the spawn page's progress
events (their place in the hub's start queue) and waits until the server answers through the proxy; then each
fetches ch11, saves answers and submits, every third a second time (half a blank notebook then the reference
answers, half the reverse: the collected copy must be the newest); the instructor collects, grades with
`python -m lmpolicy_grader grade` and releases feedback; every student fetches theirs. `ClassRun.problems()`
names whatever went wrong: a server that never answered or was started twice (the hub killed it), a submit
lost, a score that formgrader, the feedback page or `nbgrader export` got wrong.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from lmpolicy_grader.class_grading.examples_course import as_handed_in, with_answers, written_answers
from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS

from .hub import ASSIGNMENT, COURSE_ID, HUB_NOTEBOOKS, ROOT, START_TIMEOUT, Hub, Site, run_as

NOTEBOOK = HUB_NOTEBOOKS[0]
WRONG = next(a for a in WRONG_ANSWERS if a.notebook == NOTEBOOK)  # the first typical mistake of the notebook
# what the hub's log says when it gives a server up or kills it (JupyterHub's own messages)
KILLED_OR_FAILED = re.compile(r"never showed up|Giving up|failed to start|Unhandled error starting|"
                              r"did not answer within|exited with status|Too many users")
# nbgrader's submit warning (in the servers' log, which is the hub's): never due here, every notebook is released
SUBMIT_WARNING = re.compile(r"Possible missing notebooks and/or extra notebooks")


# --- what a student hands in, and the autograded score it must earn -------------------------------------
def source_notebook() -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)


def points(notebook: nbformat.NotebookNode, prefix: str = "") -> float:
    """Points of the autograded (code) grade cells whose grade id starts with ``prefix``."""
    return sum(cell.metadata.nbgrader.get("points", 0) for cell in notebook.cells
               if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")
               and cell.metadata.nbgrader["grade_id"].startswith(prefix))


def answers(kind: str, release: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, float]:
    """The notebook handed in and its autograded score: "reference" (the solutions), "blank" (the release as
    fetched), "wrong" (the solutions with one typical wrong answer: its exercise loses its points)."""
    source = source_notebook()
    solved = as_handed_in(source, release, written_answers(NOTEBOOK, "good"))
    if kind == "reference":
        return solved, points(source)
    if kind == "blank":
        return release, 0.0
    if kind == "wrong":
        return with_answers(solved, [WRONG]), points(source) - points(source, WRONG.exercise + "__")
    raise ValueError(f"unknown kind of answers {kind!r}: reference, blank or wrong")


# --- one user's requests --------------------------------------------------------------------------------
def ok(response, what: str):
    status, body, _ = response
    assert status in (200, 201, 204), f"{what}: {status} {str(body)[:2000]}"
    return body


def nbgrader_action(hub: Hub, user: str, action: str):
    """POST /user/<user>/assignments/<action> (nbgrader's Assignment List server extension)."""
    body = ok(hub.user_api(user, "POST", f"assignments/{action}",
                           body={"course_id": COURSE_ID, "assignment_id": ASSIGNMENT}), f"{user} {action}")
    assert not (isinstance(body, dict) and body.get("success") is False), f"{user} {action}: {body}"
    return body


def formgrader(hub: Hub, method: str, path: str, body=None):
    return ok(hub.user_api(hub.site.instructor, method, f"formgrader/api/{path}", body=body), f"formgrader {path}")


def formgrader_action(hub: Hub, path: str):
    result = formgrader(hub, "POST", path)
    assert result.get("success"), f"formgrader {path} failed:\n{result.get('log', '')}{result.get('error', '')}"
    return result


def listed(hub: Hub, user: str) -> list[dict]:
    body = ok(hub.user_api(user, "GET", f"assignments?course_id={COURSE_ID}"), f"{user}'s assignment list")
    assert body["success"], body
    return [a for a in body["value"] if a["assignment_id"] == ASSIGNMENT]


def read_notebook(hub: Hub, user: str, path: str) -> nbformat.NotebookNode:
    model = ok(hub.user_api(user, "GET", f"api/contents/{path}?content=1"), f"{user} reads {path}")
    return nbformat.from_dict(model["content"])


def write_notebook(hub: Hub, user: str, path: str, notebook: nbformat.NotebookNode) -> None:
    ok(hub.user_api(user, "PUT", f"api/contents/{path}", body={"type": "notebook", "format": "json",
                                                            "content": notebook}), f"{user} saves {path}")


def fetch(hub: Hub, student: str) -> None:
    """``student`` fetches ch11 through their server, unless they already have it (the browser test)."""
    if hub.user_api(student, "GET", f"api/contents/{ASSIGNMENT}")[0] != 200:
        nbgrader_action(hub, student, "fetch")


def instructor_env(hub: Hub) -> dict:
    """What the hub gives the instructor's server (deploy/jupyterhub_config.py), for commands run as them."""
    return {key: hub.env[key] for key in ("LMPOLICY_EXCHANGE", "LMPOLICY_COURSE_FOLDER", "LMPOLICY_GRADEBOOK_URL")
            if key in hub.env}


def grade(hub: Hub, site: Site, workers: int = 2) -> str:
    """Collect (formgrader), grade with the course's grader as the instructor's account, generate and release
    feedback (formgrader); the grader's output."""
    formgrader_action(hub, f"assignment/{ASSIGNMENT}/collect")
    # the feedback comes from formgrader's button below, which writes it with the course's configuration too
    grading = run_as(site.instructor, "python", "-m", "lmpolicy_grader", "grade", "--no-release", "--no-feedback",
                     "--workers", str(workers), env=instructor_env(hub), cwd=site.course, check=True)
    formgrader_action(hub, f"assignment/{ASSIGNMENT}/generate_feedback")
    formgrader_action(hub, f"assignment/{ASSIGNMENT}/release_feedback")
    return grading.stdout


def export_rows(hub: Hub, site: Site) -> dict[str, dict]:
    """``nbgrader export`` in the course folder, as the instructor: the CSV's rows by student."""
    run_as(site.instructor, "nbgrader", "export", env=instructor_env(hub), cwd=site.course, check=True)
    text = run_as(site.instructor, "cat", str(site.course / "nbgrader_export.csv"), check=True).stdout
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(text))}


def feedback_pages(hub: Hub, student: str) -> list[tuple[str, str]]:
    """(file name, HTML) of every feedback page ``student`` has fetched."""
    folder = ok(hub.user_api(student, "GET", f"api/contents/{ASSIGNMENT}/feedback"), f"{student}'s feedback")
    pages = []
    for stamp in folder["content"]:
        for item in ok(hub.user_api(student, "GET", f"api/contents/{stamp['path']}"), "feedback")["content"]:
            pages.append((item["name"], ok(hub.user_api(student, "GET", f"api/contents/{item['path']}?type=file&format=text"),
                                           item["path"])["content"]))
    return pages


FEEDBACK_SCORE = re.compile(r"Score: ([\d.]+)(?: so far, [\d.]+ points not graded yet)? / ([\d.]+)")


# --- the machine's side ---------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_of(user: str) -> float:
    """MiB the processes of ``user`` hold (proportional set size: shared pages split between their users)."""
    total = 0
    for pid in pids_of(user):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += int(re.search(r"^Pss:\s+(\d+) kB", rollup, re.MULTILINE).group(1))
    return total / 1024


def pids_of(user: str) -> list[int]:
    listed = subprocess.run(["ps", "-u", user, "-o", "pid="], capture_output=True, text=True).stdout
    return [int(pid) for pid in listed.split()]


class Sampler:
    """In a thread, every ``every`` seconds: the load average and how long the hub takes to answer GET /hub/api/
    (a hub whose event loop stalls answers late)."""

    def __init__(self, hub: Hub, every: float = 0.5):
        self.hub, self.every = hub, every
        self.loads: list[float] = []
        self.hub_latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hub-sampler", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self):
        while not self._stop.is_set():
            self.loads.append(os.getloadavg()[0])
            began = time.monotonic()
            try:
                self.hub.request("GET", "/hub/api/", timeout=60)
                self.hub_latencies.append(time.monotonic() - began)
            except OSError:
                self.hub_latencies.append(float("inf"))
            self._stop.wait(self.every)


# --- a class at once ------------------------------------------------------------------------------------
def submission_plan(students: tuple[str, ...]) -> dict[str, list[str]]:
    """What each student submits, in order: every third twice (blank then reference, reference then blank, in
    turn), the others once (reference and the typical wrong answer, in turn)."""
    plan = {}
    for number, student in enumerate(students):
        if number % 3 == 0:
            plan[student] = ["blank", "reference"] if number % 2 == 0 else ["reference", "blank"]
        else:
            plan[student] = ["reference"] if number % 2 else ["wrong"]
    return plan


@dataclass
class StudentRun:
    name: str
    plan: list[str]
    ready_after: float | None = None   # seconds from asking for the server to its answer through the proxy
    progress: list[str] = field(default_factory=list)  # the spawn page's messages
    server_pid: int | None = None
    start_cpu: float | None = None      # CPU seconds the server used to become ready
    submitted: int = 0                  # submits the exchange accepted
    expected_scores: list[float] = field(default_factory=list)  # of each accepted submit
    feedback_score: float | None = None
    error: str | None = None

    @property
    def expected(self) -> float | None:
        """The score of the newest submit: the one that must be collected and graded."""
        return self.expected_scores[-1] if self.expected_scores else None


@dataclass
class ClassRun:
    """A class starting at once on ``hub`` (its students: the site's, the instructor's server already up)."""

    hub: Hub
    site: Site
    students: dict[str, StudentRun] = field(default_factory=dict)
    hub_log_problems: list[str] = field(default_factory=list)
    grading_output: str = ""
    collected: dict[str, str] = field(default_factory=dict)      # student -> timestamp of the collected copy
    newest: dict[str, str] = field(default_factory=dict)         # student -> timestamp of their newest submit
    in_exchange: dict[str, int] = field(default_factory=dict)    # student -> submissions in inbound/
    formgrader_scores: dict[str, float] = field(default_factory=dict)
    export_scores: dict[str, float] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)       # user -> MiB, all servers idle and ready

    def start(self) -> None:
        """Every student at once: a token, the server asked for, the spawn page watched, the server answering."""
        plan = submission_plan(self.site.students)
        self.students = {s: StudentRun(s, plan[s]) for s in self.site.students}
        barrier = threading.Barrier(len(self.students))
        with ThreadPoolExecutor(len(self.students)) as pool:
            list(pool.map(lambda run: self._start_one(run, barrier), self.students.values()))
        for run in self.students.values():
            if run.error is None:
                try:
                    run.server_pid = self.hub.server_pid(run.name)
                    run.start_cpu = cpu_seconds(run.server_pid)
                except (AssertionError, OSError) as error:
                    run.error = f"no server process: {error}"
        self.memory = {user: memory_of(user) for user in self.site.users}

    def _start_one(self, run: StudentRun, barrier: threading.Barrier) -> None:
        try:
            self.hub.login(run.name)
            barrier.wait(timeout=120)  # the class asks at the same moment
            began = time.monotonic()
            status, body, _ = self.hub.request("POST", f"/hub/api/users/{run.name}/server",
                                               token=self.hub.tokens[run.name])
            if status not in (201, 202):
                raise AssertionError(f"the hub refused the start: {status} {body}")
            # the spawn page's event stream: it ends when the spawn does (ready or failed)
            _, events, _ = self.hub.request("GET", f"/hub/api/users/{run.name}/server/progress",
                                            token=self.hub.tokens[run.name], timeout=START_TIMEOUT + 600)
            for line in str(events).splitlines():
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    run.progress.append(event.get("message", ""))
                    if event.get("failed"):
                        raise AssertionError(f"the spawn failed: {event.get('message')}")
            deadline = time.monotonic() + START_TIMEOUT
            while not (self.hub.server_ready(run.name) and self.hub.user_api(run.name, "GET", "api/status")[0] == 200):
                if time.monotonic() > deadline:
                    raise AssertionError(f"not answering {START_TIMEOUT} s after its spawn ended")
                time.sleep(0.2)
            run.ready_after = time.monotonic() - began
        except Exception as error:  # noqa: BLE001 (reported per student)
            run.error = f"start: {error}"

    def submit(self) -> None:
        """The instructor has released ch11; each student with a server fetches it and submits their plan."""
        with ThreadPoolExecutor(len(self.students)) as pool:
            list(pool.map(self._submit_one, [r for r in self.students.values() if r.error is None]))

    def _submit_one(self, run: StudentRun) -> None:
        try:
            fetch(self.hub, run.name)
            path = f"{ASSIGNMENT}/{NOTEBOOK}.ipynb"
            release = read_notebook(self.hub, run.name, path)
            for kind in run.plan:
                notebook, score = answers(kind, release)
                write_notebook(self.hub, run.name, path, notebook)
                # JupyterLab's save keeps a checkpoint (.ipynb_checkpoints/), which submit must not take for a notebook
                ok(self.hub.user_api(run.name, "POST", f"api/contents/{path}/checkpoints"), f"{run.name} checkpoints")
                nbgrader_action(self.hub, run.name, "submit")
                run.submitted += 1
                run.expected_scores.append(score)
        except Exception as error:  # noqa: BLE001
            run.error = f"submit: {error}"

    def grade_and_feed_back(self, workers: int = 2) -> None:
        inbound = self.site.exchange / COURSE_ID / "inbound"
        for run in self.students.values():
            mine = sorted(p.name for p in inbound.iterdir() if p.name.startswith(f"{run.name}+{ASSIGNMENT}+"))
            self.in_exchange[run.name] = len(mine)
            if mine:
                self.newest[run.name] = (inbound / mine[-1] / "timestamp.txt").read_text().strip()
        self.grading_output = grade(self.hub, self.site, workers)
        for run in self.students.values():
            stamp = self.site.course / "submitted" / run.name / ASSIGNMENT / "timestamp.txt"
            if stamp.exists():
                self.collected[run.name] = stamp.read_text().strip()
        self.formgrader_scores = {s["student"]: s["code_score"] for s in formgrader(self.hub, "GET", f"submissions/{ASSIGNMENT}")
                                  if s["submitted"]}
        self.export_scores = {student: float(row["score"]) for student, row in export_rows(self.hub, self.site).items()
                              if row["assignment"] == ASSIGNMENT}
        with ThreadPoolExecutor(len(self.students)) as pool:
            list(pool.map(self._feedback_one, [r for r in self.students.values() if r.error is None]))
        log = self.hub.log()
        self.hub_log_problems = [line for line in log.splitlines()
                                 if KILLED_OR_FAILED.search(line) or SUBMIT_WARNING.search(line)]

    def _feedback_one(self, run: StudentRun) -> None:
        try:
            nbgrader_action(self.hub, run.name, "fetch_feedback")
            pages = feedback_pages(self.hub, run.name)
            found = FEEDBACK_SCORE.search(pages[0][1]) if pages else None
            run.feedback_score = float(found.group(1)) if found else None
        except Exception as error:  # noqa: BLE001
            run.error = f"feedback: {error}"

    def problems(self) -> list[str]:
        """Everything that went wrong, one line each; empty when every student was served right."""
        found = [f"the hub's log: {line.strip()[:300]}" for line in self.hub_log_problems]
        for run in self.students.values():
            who = run.name
            if run.error:
                found.append(f"{who}: {run.error}")
                continue
            try:
                if self.hub.server_pid(who) != run.server_pid:
                    found.append(f"{who}: the server that became ready is gone (killed, started again)")
            except AssertionError as error:
                found.append(f"{who}: {error}")
            if self.in_exchange.get(who) != run.submitted:
                found.append(f"{who}: {run.submitted} submits accepted, {self.in_exchange.get(who)} in the exchange")
            if self.collected.get(who) != self.newest.get(who):
                found.append(f"{who}: collected the copy of {self.collected.get(who)}, newest {self.newest.get(who)}")
            for what, got in (("formgrader", self.formgrader_scores.get(who)), ("the feedback page", run.feedback_score),
                              ("nbgrader export", self.export_scores.get(who))):
                if got is None or run.expected is None or abs(got - run.expected) > 1e-6:
                    found.append(f"{who}: {what} says {got}, expected {run.expected} ({' then '.join(run.plan)})")
        return found

    def ready_times(self) -> list[float]:
        return sorted(r.ready_after for r in self.students.values() if r.ready_after is not None)

    def queued(self) -> list[str]:
        """The students whose spawn page showed them waiting in line."""
        return [r.name for r in self.students.values() if any("in line" in m for m in r.progress)]


def percentile(values: list[float], fraction: float) -> float:
    """The value below which ``fraction`` of ``values`` lie (nearest rank); NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]
