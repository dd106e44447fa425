"""The course's gradebook in a real PostgreSQL server: grading into it, several writers at once, wrong URLs,
and the server restarted while a class is being graded.

The class is the grader tests' tiny course (tests/lmpolicy_grader/tiny_course.py): one notebook, two
autograded exercises (ex1 worth 2 points, ex2 worth 3) and a manually graded answer (ex3).
"""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lmpolicy_grader.class_grading.gradebook import GradebookUnavailable, LOCK_FILE, check_gradebook, gradebook_url
from lmpolicy_grader.class_grading.status import Status
from tests.deploy.postgres_cluster import postgres_server  # noqa: F401  (the fixture)
from tests.lmpolicy_grader import tiny_course

pytestmark = pytest.mark.xdist_group("postgres")

COURSE_ID, ASSIGNMENT, NOTEBOOK = "lm-policy", "ch11", tiny_course.NOTEBOOK
AUTOGRADED = ("ex1__tests", "ex2__tests")
MANUAL = "ex3__manual"
# What the tiny course's specification says each kind of submission earns (ex1, ex2), or that it fails.
EXPECTED = {"reference": {"ex1__tests": 2.0, "ex2__tests": 3.0},
            "wrong": {"ex1__tests": 0.0, "ex2__tests": 3.0},
            "edited_cells": {"ex1__tests": 0.0, "ex2__tests": 3.0},  # its locked cells come back from the gradebook
            "os_exit": None}                                         # the kernel dies: FAILED, not 0
ENV_URL_LINE = ('import os\nc.CourseDirectory.db_url = os.environ.get("LMPOLICY_GRADEBOOK_URL") or '
                'c.CourseDirectory.db_url\n')


# --- a course graded into a given gradebook -------------------------------------------------------

def make_course(root: Path, url: str | None, submissions: dict[str, str]) -> Path:
    """The tiny course at ``root`` with its gradebook at ``url`` (None: read LMPOLICY_GRADEBOOK_URL, as
    the repository's nbgrader_config.py does), released, with ``submissions`` (student -> kind of answer)."""
    from lmpolicy_grader.__main__ import release

    tiny_course.make_course(root)
    set_gradebook(root, url)
    release(root)
    for student, kind in submissions.items():
        tiny_course.submit(root, student, tiny_course.HOSTILE[kind][0]())
    return root


def set_gradebook(root: Path, url: str | None) -> None:
    config = root / "nbgrader_config.py"
    lines = [line for line in config.read_text().splitlines(keepends=True) if "# gradebook of this test" not in line]
    line = ENV_URL_LINE if url is None else f"c.CourseDirectory.db_url = {url!r}\n"
    config.write_text("".join(lines) + "".join(f"{part}  # gradebook of this test\n" for part in line.splitlines()))


def stored_grades(url: str) -> dict[str, dict[str, tuple]]:
    """student -> grade id -> (auto score, manual score), as nbgrader's Gradebook reads them."""
    from nbgrader.api import Gradebook, MissingEntry

    grades = {}
    with Gradebook(url, COURSE_ID) as gradebook:
        for student in gradebook.students:
            try:
                notebook = gradebook.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student.id)
            except MissingEntry:
                continue
            grades[student.id] = {g.name: (g.auto_score, g.manual_score) for g in notebook.grades}
    return grades


def auto_scores(grades: dict[str, tuple]) -> dict[str, float | None]:
    return {name: grades[name][0] for name in AUTOGRADED}


def grade(root: Path, students=None, workers=2):
    from lmpolicy_grader.class_grading.grading import grade_class
    return {o.student: o for o in grade_class(root, students=students, workers=workers, sandbox=False,
                                              log=lambda _: None)}


def cli(root: Path, *args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    """``python -m lmpolicy_grader --course root <args>`` in a process of its own (unbuffered output)."""
    return subprocess.Popen([sys.executable, "-m", "lmpolicy_grader", "--course", str(root), *args],
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **popen)


def _run_in_child(target, *args):
    """Run ``target(*args)`` in a forked process (what it patches stays there); return what it returned."""
    context = multiprocessing.get_context("fork")
    answer = context.Queue()

    def child():
        try:
            answer.put(("ok", target(*args)))
        except BaseException as error:  # noqa: BLE001  (the test reads it)
            answer.put(("error", f"{type(error).__name__}: {error}"))

    process = context.Process(target=child)
    process.start()
    result = answer.get(timeout=120)
    process.join(30)
    return result


# --- the course's grader, into PostgreSQL --------------------------------------------------------

@pytest.mark.slow
def test_a_class_graded_into_postgresql_scores_as_in_sqlite(tmp_path, postgres_server):
    submissions = {kind: kind for kind in ("reference", "edited_cells", "os_exit")}
    sqlite_root = make_course(tmp_path / "sqlite", None, submissions)
    pg_url = postgres_server.new_database("same_scores")
    pg_root = make_course(tmp_path / "postgres", pg_url, submissions)
    sqlite_url = f"sqlite:///{sqlite_root / 'gradebook.db'}"

    sqlite_outcomes, pg_outcomes = grade(sqlite_root), grade(pg_root)

    assert {s: (o.status, o.reason) for s, o in pg_outcomes.items()} == \
           {s: (o.status, o.reason) for s, o in sqlite_outcomes.items()}
    in_sqlite, in_pg = stored_grades(sqlite_url), stored_grades(pg_url)
    assert in_pg == in_sqlite
    for student in submissions:
        expected = EXPECTED[student]
        if expected is None:
            assert pg_outcomes[student].status == Status.FAILED
        else:
            assert pg_outcomes[student].status == Status.GRADED, pg_outcomes[student].reason
            assert auto_scores(in_pg[student]) == expected
            assert in_pg[student][MANUAL] == (None, None)  # waits for a person
    assert (pg_root / "feedback" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.html").exists()
    assert not (pg_root / "gradebook.db").exists()  # nothing went to a SQLite file on the side


@pytest.mark.slow
def test_two_grading_runs_and_a_manual_grader_at_once_lose_no_grade(tmp_path, postgres_server):
    url = postgres_server.new_database("concurrent")
    marked = ["marked0", "marked1"]                      # handed in earlier: a TA marks their ex3 meanwhile
    first_run, second_run = ["a0", "a1"], ["b0", "b1"]
    kinds = {s: ("reference" if i % 2 == 0 else "wrong") for i, s in enumerate(first_run + second_run)}
    root = make_course(tmp_path / "course", url, kinds)
    from nbgrader.api import Gradebook
    with Gradebook(url, COURSE_ID) as gradebook:  # as `nbgrader collect` + autograde leave them, without the wait
        for student in marked:
            gradebook.add_student(student)
            gradebook.add_submission(ASSIGNMENT, student)

    done_flag = tmp_path / "graders-done"
    marker = subprocess.Popen([sys.executable, "-c", MANUAL_GRADER, url, str(done_flag), *marked],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.time()
    runs = [cli(root, "grade", "--no-release", "--sandbox", "off", "--workers", "1",
                *[arg for s in students for arg in ("--student", s)]) for students in (first_run, second_run)]
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    finished = time.time()
    done_flag.touch()
    marks, errors = marker.communicate(timeout=120)

    for run, output in zip(runs, outputs):
        assert run.returncode == 0, output
    assert marker.returncode == 0, errors
    marks = json.loads(marks)
    assert marks["failed"] == [], marks["failed"]
    during = [t for t in marks["times"] if started < t < finished]
    assert len(during) >= 20, f"only {len(during)} manual grades were written while the graders ran"

    grades = stored_grades(url)
    for student in first_run + second_run:
        assert auto_scores(grades[student]) == EXPECTED[kinds[student]], student
    for student in marked:
        assert grades[student][MANUAL][1] == marks["last"][student], student  # the TA's last mark stands
    statuses = {o["student"]: o["status"] for o in json.loads((root / "grading_status.json").read_text())}
    assert statuses == {s: Status.GRADED for s in first_run + second_run}  # both runs' outcomes kept
    assert not (root / LOCK_FILE).exists(), "grading into PostgreSQL took the course's SQLite lock"


# What formgrader does when a TA enters a mark: one Gradebook per request, find the grade, set it, commit.
MANUAL_GRADER = textwrap.dedent(f"""
    import json, sys, time
    from pathlib import Path
    from nbgrader.api import Gradebook
    url, done, students = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    times, failed, last, mark = [], [], {{}}, 0
    while not done.exists():
        for student in students:
            mark = (mark + 0.5) % 2.5
            try:
                with Gradebook(url, {COURSE_ID!r}) as gradebook:
                    grade = gradebook.find_grade({MANUAL!r}, {NOTEBOOK!r}, {ASSIGNMENT!r}, student)
                    grade.manual_score = mark
                    gradebook.db.commit()
                last[student] = mark
                times.append(time.time())
            except Exception as error:
                failed.append(f"{{student}}: {{type(error).__name__}}: {{error}}")
            time.sleep(0.05)
    print(json.dumps({{"times": times, "failed": failed, "last": last}}))
""")


# --- wrong URLs: a clear error before anything is graded ------------------------------------------

def _wrong_urls(server) -> dict[str, tuple[str, str]]:
    """what is wrong -> (URL, words the error must say)."""
    from tests.deploy.postgres_cluster import _free_port
    if "not_owned" not in _made:  # a database the role may connect to but not create tables in
        server.new_database("not_owned", owner="postgres")
        _made.add("not_owned")
    return {
        "privileges": (server.url_for(database="not_owned"), "may not create nbgrader's tables .* OWNER TO grader"),
        "port": (server.url_for(port=_free_port()), "unreachable"),
        "host": (server.url_for(host="no-such-host.invalid"), "unreachable"),
        "password": (server.url_for(password="not-the-password"), "refused the password of role 'grader'"),
        "database": (server.url_for(database="no_such_gradebook"), "'no_such_gradebook' does not exist"),
        "role": (server.url_for(user="nobody_here"), "role 'nobody_here' \\(a wrong password, or no such role\\)"),
        "dialect": (server.url.replace("postgresql+psycopg2", "postgrex"),
                    "'postgrex', which SQLAlchemy does not know"),
        "driver": (server.url.replace("postgresql+psycopg2", "mysql+mysqldb"),
                   "driver 'mysqldb', which is not installed"),
        "malformed": (f"{server.host}:{server.port}/gradebook", "is not a database URL"),
    }


WRONG = ["port", "host", "password", "database", "role", "privileges", "dialect", "driver", "malformed"]
_made: set[str] = set()


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_gradebook_url_is_a_clear_error(postgres_server, wrong):
    url, words = _wrong_urls(postgres_server)[wrong]
    with pytest.raises(GradebookUnavailable, match=words) as raised:
        check_gradebook(url)
    assert postgres_server.password not in str(raised.value) and "not-the-password" not in str(raised.value)


def test_the_right_url_and_sqlite_pass_the_check(postgres_server, tmp_path):
    check_gradebook(postgres_server.url)
    check_gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}")
    with pytest.raises(GradebookUnavailable, match="folder .* does not exist"):
        check_gradebook(f"sqlite:///{tmp_path / 'missing' / 'gradebook.db'}")


def test_a_course_config_that_ignores_the_gradebook_variable_is_refused(tmp_path, monkeypatch, postgres_server):
    from lmpolicy_grader.class_grading.course import load_config
    # an instructor's own config, which never reads the variable: nbgrader would use its default SQLite file
    (tmp_path / "nbgrader_config.py").write_text('c = get_config()\nc.CourseDirectory.course_id = "lm-policy"\n')
    monkeypatch.setenv("LMPOLICY_GRADEBOOK_URL", postgres_server.url)
    with pytest.raises(GradebookUnavailable, match="sets no c.CourseDirectory.db_url") as raised:
        gradebook_url(load_config(tmp_path), tmp_path)
    assert postgres_server.password not in str(raised.value)
    set_gradebook(tmp_path, None)  # the course's own line: the variable, else SQLite
    assert gradebook_url(load_config(tmp_path), tmp_path) == postgres_server.url
    set_gradebook(tmp_path, "sqlite:///" + str(tmp_path / "private.db"))  # a course that means its own file
    assert gradebook_url(load_config(tmp_path), tmp_path) == "sqlite:///" + str(tmp_path / "private.db")


@pytest.mark.slow
def test_grading_stops_at_start_on_a_wrong_url(tmp_path, postgres_server):
    from lmpolicy_grader.class_grading.grading import grade_class
    url = postgres_server.new_database("stops_at_start")
    root = make_course(tmp_path, url, {"reference": "reference"})
    set_gradebook(root, postgres_server.url_for(database="stops_at_start", password="not-the-password"))
    with pytest.raises(GradebookUnavailable, match="refused the password"):
        grade_class(root, workers=1, sandbox=False, log=lambda _: None)
    assert not (root / "autograded").exists() and not (root / "grading_status.json").exists()
    assert "reference" not in stored_grades(url)


@pytest.mark.slow
@pytest.mark.parametrize("wrong, options", [("password", ()), ("database", ("--no-release",))],
                         ids=["password", "database-no-release"])
def test_the_grade_command_exits_with_the_error_on_a_wrong_url(tmp_path, postgres_server, monkeypatch, wrong,
                                                               options):
    url = postgres_server.new_database(f"cli_{wrong}")
    with monkeypatch.context() as env:  # released with the right URL, which the course reads from the variable
        env.setenv("LMPOLICY_GRADEBOOK_URL", url)
        root = make_course(tmp_path / "course", None, {"reference": "reference"})
    bad_url, words = _wrong_urls(postgres_server)[wrong]
    run = cli(root, "grade", *options, "--sandbox", "off", "--workers", "1", env={"LMPOLICY_GRADEBOOK_URL": bad_url})
    output = run.communicate(timeout=300)[0]
    assert run.returncode != 0, output
    assert words in output, output
    assert "Traceback" not in output, output
    assert not (root / "autograded").exists() and not (root / "grading_status.json").exists()
    assert stored_grades(url) == {}


# --- a grading worker's gradebook ---------------------------------------------------------------

def _prepared_worker_adds(course_root: str, student: str, start=None) -> bool:
    """In a worker process: prepare it as the grader does, then add ``student`` through nbgrader's
    Gradebook; returns whether the course's SQLite lock file was there while the Gradebook was open."""
    from nbgrader.api import Gradebook

    from lmpolicy_grader.class_grading.gradebook import prepare_worker
    from lmpolicy_grader.class_grading.course import load_config
    config = load_config(Path(course_root))
    prepare_worker(Path(course_root), config)
    if start is not None:
        start.wait(30)
    with Gradebook(gradebook_url(config, course_root), COURSE_ID) as gradebook:
        gradebook.update_or_create_student(student)
        return (Path(course_root) / LOCK_FILE).exists()


def _bare_course(root: Path, url: str | None) -> Path:
    """The tiny course's folder and config (no release), its config read once here so that the worker
    processes forked from this one start with nbgrader and the course's preprocessors imported."""
    from lmpolicy_grader.class_grading.course import load_config
    tiny_course.make_course(root)
    if url is not None:
        set_gradebook(root, url)
    load_config(root)
    import nbgrader.api  # noqa: F401
    return root


@pytest.mark.slow
def test_a_worker_takes_the_sqlite_lock_only_for_sqlite(tmp_path, postgres_server):
    sqlite_course = _bare_course(tmp_path / "sqlite", None)
    pg_course = _bare_course(tmp_path / "postgres", postgres_server.new_database("which_lock"))
    assert _run_in_child(_prepared_worker_adds, str(sqlite_course), "s") == ("ok", True)
    assert _run_in_child(_prepared_worker_adds, str(pg_course), "s") == ("ok", False)
    assert not (pg_course / LOCK_FILE).exists()


@pytest.mark.slow
def test_workers_opening_an_empty_postgresql_gradebook_at_once_all_succeed(tmp_path, postgres_server):
    # Each nbgrader Gradebook creates the tables and the course row when they are missing: six workers
    # doing it at the same moment collide on PostgreSQL's catalog, and every one of them must still get in.
    url = postgres_server.new_database("first_open")
    root = _bare_course(tmp_path, url)
    context = multiprocessing.get_context("fork")
    start, answers = context.Event(), context.Queue()

    def worker(number):
        try:
            answers.put(("ok", _prepared_worker_adds(str(root), f"s{number}", start)))
        except BaseException as error:  # noqa: BLE001
            answers.put(("error", f"{type(error).__name__}: {error}"))

    processes = [context.Process(target=worker, args=(n,)) for n in range(6)]
    for process in processes:
        process.start()
    time.sleep(1.0)  # all of them prepared and waiting
    start.set()
    results = [answers.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(30)
    assert results == [("ok", False)] * 6
    from nbgrader.api import Gradebook
    with Gradebook(url, COURSE_ID) as gradebook:
        assert sorted(s.id for s in gradebook.students) == [f"s{n}" for n in range(6)]


def _through_restarts(course_root: str, url: str, restarted, go_on) -> dict:
    """In a prepared worker: one Gradebook used across a server restart, then a transaction cut by one."""
    from nbgrader.api import Gradebook

    from lmpolicy_grader.class_grading.gradebook import prepare_worker
    from lmpolicy_grader.class_grading.course import load_config
    prepare_worker(Path(course_root), load_config(Path(course_root)))
    seen = {}
    with Gradebook(url, COURSE_ID) as gradebook:
        gradebook.update_or_create_student("before")
        restarted.put("first")               # the parent restarts the server now, between two transactions
        go_on.get(timeout=60)
        gradebook.update_or_create_student("after", first_name="Ada")
        seen["after"] = gradebook.find_student("after").first_name
        gradebook.find_student("before").first_name = "half"
        gradebook.db.flush()                 # sent, not committed
        restarted.put("second")              # ... and now, in the middle of that transaction
        go_on.get(timeout=60)
        try:
            gradebook.db.commit()
            seen["commit"] = "committed"
        except GradebookUnavailable as error:
            seen["commit"] = str(error)
        gradebook.db.rollback()
    with Gradebook(url, COURSE_ID) as gradebook:
        seen["before"] = gradebook.find_student("before").first_name
    return seen


@pytest.mark.slow
def test_a_worker_reconnects_after_a_restart_and_a_cut_transaction_stores_nothing(tmp_path, postgres_server):
    url = postgres_server.new_database("restarts")
    root = _bare_course(tmp_path, url)
    context = multiprocessing.get_context("fork")
    restarted, go_on, answer = context.Queue(), context.Queue(), context.Queue()
    process = context.Process(target=lambda: answer.put(_through_restarts(str(root), url, restarted, go_on)))
    process.start()
    for _ in ("first", "second"):
        restarted.get(timeout=120)
        postgres_server.restart(mode="fast")
        go_on.put("go")
    seen = answer.get(timeout=120)
    process.join(30)
    assert seen["after"] == "Ada"        # the same Gradebook went on after the restart
    assert "unreachable" in seen["commit"] and "rolled back" in seen["commit"], seen["commit"]
    assert seen["before"] is None         # the cut transaction left nothing behind


# --- the server restarted in the middle of grading --------------------------------------------------

@pytest.mark.slow
def test_grading_through_a_server_restart_and_an_outage_stores_nothing_half(tmp_path, postgres_server):
    url = postgres_server.new_database("restart_while_grading")
    students = [f"s{i:02d}" for i in range(8)]
    kinds = {s: ("reference" if i % 2 == 0 else "wrong") for i, s in enumerate(students)}
    root = make_course(tmp_path, url, kinds)
    # workers wait 3 s for the server, so the 8 s outage below outlasts them and some notebooks cannot be stored
    run = cli(root, "grade", "--no-release", "--sandbox", "off", "--workers", "2",
              env={"LMPOLICY_GRADEBOOK_RECONNECT_SECONDS": "3"})
    lines, disturbed = [], []
    for line in run.stdout:
        lines.append(line)
        graded = sum(f"{s}/{NOTEBOOK}" in line for s in students for line in lines)
        if graded == 2 and not disturbed:
            postgres_server.restart(mode="fast")        # a restart: kills open transactions, back at once
            disturbed.append("restart")
        elif graded == 4 and len(disturbed) == 1:
            postgres_server.stop(mode="fast")           # an outage longer than the workers wait
            time.sleep(8)
            postgres_server.start()
            disturbed.append("outage")
    run.wait(60)
    output = "".join(lines)
    assert disturbed == ["restart", "outage"], output
    outcomes = {o["student"]: o for o in json.loads((root / "grading_status.json").read_text())}
    assert sorted(outcomes) == students, output
    failed = [s for s, o in outcomes.items() if o["status"] != Status.GRADED]
    assert failed, f"no notebook was being graded during the outage:\n{output}"
    reasons = {s: outcomes[s]["reason"] for s in failed}
    for student in failed:
        assert outcomes[student]["status"] == Status.FAILED, reasons
        assert "gradebook" in reasons[student] and "unreachable" in reasons[student], reasons
    grades = stored_grades(url)
    for student in students:  # every notebook's grades are there whole or not at all
        scores = auto_scores(grades[student]) if student in grades else {}
        assert len({score is None for score in scores.values()}) <= 1, (student, scores)
        if student not in failed:
            assert scores == EXPECTED[kinds[student]], student

    rerun = cli(root, "grade", "--no-release", "--sandbox", "off", "--workers", "2",
                *[arg for s in failed for arg in ("--student", s)])
    rerun_output = rerun.communicate(timeout=600)[0]
    assert rerun.returncode == 0, rerun_output
    outcomes = {o["student"]: o for o in json.loads((root / "grading_status.json").read_text())}
    assert {s: o["status"] for s, o in outcomes.items()} == {s: Status.GRADED for s in students}, rerun_output
    grades = stored_grades(url)
    assert {s: auto_scores(grades[s]) for s in students} == {s: EXPECTED[kinds[s]] for s in students}


def _unclosed_gradebooks(course_root: str, url: str, prepared: bool, opened, counted) -> None:
    """What nbgrader's preprocessors do once per notebook: open a Gradebook, use it, never close it."""
    from nbgrader.api import Gradebook

    from lmpolicy_grader.class_grading.gradebook import prepare_worker
    from lmpolicy_grader.class_grading.course import load_config
    if prepared:
        prepare_worker(Path(course_root), load_config(Path(course_root)))
    kept = []
    for number in range(12):
        gradebook = Gradebook(url, COURSE_ID)
        gradebook.update_or_create_student(f"s{number}")
        kept.append(gradebook)  # a preprocessor holds it until it is garbage
    opened.put("ready")
    counted.get(timeout=60)


def _connections_while_unclosed(root: Path, url: str, database: str, prepared: bool, server) -> int:
    context = multiprocessing.get_context("fork")
    opened, counted = context.Queue(), context.Queue()
    process = context.Process(target=_unclosed_gradebooks, args=(str(root), url, prepared, opened, counted))
    process.start()
    opened.get(timeout=120)
    import psycopg2
    connection = psycopg2.connect(host=str(server.socket_dir), port=server.port, user="postgres", dbname="postgres")
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,))
            count = cursor.fetchone()[0]
    finally:
        connection.close()
    counted.put("done")
    process.join(30)
    return count


@pytest.mark.slow
def test_a_worker_holds_no_idle_connection_for_gradebooks_nbgrader_never_closes(tmp_path, postgres_server):
    # nbgrader 0.9.6's preprocessors (OverwriteCells, SaveAutoGrades, GetGrades, ...) open a Gradebook per
    # notebook and never close it: with SQLAlchemy's default pool each keeps a connection open until it is
    # garbage, and a long run of a class exhausts the server's connections.
    url = postgres_server.new_database("idle_connections")
    root = _bare_course(tmp_path, url)
    assert _connections_while_unclosed(root, url, "idle_connections", False, postgres_server) == 12  # stock
    assert _connections_while_unclosed(root, url, "idle_connections", True, postgres_server) == 0
