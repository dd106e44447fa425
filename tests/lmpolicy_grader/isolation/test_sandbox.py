"""The grading kernel's sandbox, driven through the real grading kernel.

Each test starts the kernel the way nbgrader does (GradingKernelManager, cwd in the student's
autograded folder of a course laid out as nbgrader lays it out) and runs a submission's hostile code
in it; the tests marked ``started`` do it twice, once with the kernel started as a spare before its
notebook was known (``kernel_pool``) and given its folder after. The last ones grade a tiny course
end to end.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from lmpolicy_grader.isolation import sandbox
from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.report import exercise_rows
from lmpolicy_grader.class_grading.status import Status

from lmpolicy_grader.kernels.drained_pipe import DEFAULT_TAIL_BYTES

from ...own_thread import run_coroutine
from .. import tiny_course
from ..grading_kernel import (COURSE_SECRETS, REACHABLE_DESCRIPTORS, descriptor_kind, entered, grader_open_files,
                              process_uid, run_in_kernel, started, uid_pool)

# Skipped where no sandbox can be made (macOS, a container without namespaces), except in CI, which
# installs bubblewrap and sets LMPOLICY_REQUIRE_SANDBOX=1: there a missing sandbox fails every test.
pytestmark = pytest.mark.skipif(sandbox.sandbox_problem() is not None and not os.environ.get("LMPOLICY_REQUIRE_SANDBOX"),
                                reason=f"no sandbox here: {sandbox.sandbox_problem()}")


@started
def test_the_course_is_out_of_sight(sandbox_course, repo_root, monkeypatch, spare):
    root, folder = sandbox_course
    monkeypatch.setenv("INSTRUCTOR_TOKEN", "a secret in the grader's environment")
    targets = [str(root / name) for name in COURSE_SECRETS] + [str(repo_root / "source"), str(repo_root / "gradebook.db")]
    home = Path.home()
    seen = run_in_kernel(folder, f"""
        import json, os
        found = {{path: os.path.exists(path) for path in {targets!r}}}
        home = sorted(os.listdir({str(home)!r})) if os.path.isdir({str(home)!r}) else []
        print(json.dumps({{"found": found, "here": sorted(os.listdir(".")), "up": sorted(os.listdir("..")),
                          "home": os.path.expanduser("~"), "instructor_home": home, "env": sorted(os.environ),
                          "cwd": os.getcwd()}}))
    """, spare=spare)
    assert seen["found"] == {path: False for path in targets}
    assert seen["here"] == ["data.txt"]     # its own files, but not the sanitized notebooks
    assert seen["up"] == ["notebook"]       # no other notebook folder, nobody else's
    assert seen["cwd"] == sandbox.WORK_FOLDER  # the same for every notebook: it says nothing of the course
    assert seen["home"] == "/tmp"
    # of the instructor's home, at most the way to the Python installation (e.g. ~/.pyenv) is there
    on_the_way = {folder.relative_to(home).parts[0] for folder in sandbox.readable_folders(folder) if home in folder.parents}
    assert set(seen["instructor_home"]) <= on_the_way, seen["instructor_home"]
    assert not [name for name in seen["env"] if name.startswith("JUPYTER_") or name == "INSTRUCTOR_TOKEN"]


@started
def test_without_the_sandbox_the_kernel_reads_the_course(sandbox_course, spare):
    """What the sandbox is for: opted out (``sandbox=False``), the same code finds the answers; the
    kernel works in the notebook's own folder."""
    root, folder = sandbox_course
    seen = run_in_kernel(folder, f"""
        import json, os
        print(json.dumps([open({str(root / 'source/ch11/01_tiny.ipynb')!r}).read(), os.getcwd()]))
    """, sandbox=False, spare=spare)
    assert seen == ["the answers", str(folder)]


def test_no_network_not_even_the_graders_loopback(sandbox_course):
    _, folder = sandbox_course
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        seen = run_in_kernel(folder, f"""
            import json, socket
            results = {{}}
            for address in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("pypi.org", 443)]:
                try:
                    socket.create_connection(address, timeout=3).close()
                    results[str(address)] = "connected"
                except OSError as error:
                    results[str(address)] = type(error).__name__
            print(json.dumps(results))
        """)
    finally:
        listener.close()
    assert "connected" not in seen.values(), seen
    assert seen["('127.0.0.1', %d)" % port] == "ConnectionRefusedError"  # its own, empty loopback


@entered
@started
def test_no_file_of_its_folder_is_importable_though_every_one_is_readable(sandbox_course, forked, spare):
    """A submission's folder may hold a module named like one the code rule allows (a ``matplotlib/``
    package, ``statistics.py``): imported, it would run code the rule never read. The kernel's import path
    holds no folder of the submission's, in either start path; its data files still read."""
    root, folder = sandbox_course
    (folder / "shadow_probe.py").write_text("SHADOWED = True\n")
    (folder / "matplotlib").mkdir()
    (folder / "matplotlib" / "__init__.py").write_text("SHADOWED = True\n")
    seen = run_in_kernel(folder, """
        import json, os, sys
        found = {}
        for name in ("shadow_probe", "matplotlib"):
            try:
                module = __import__(name)
                found[name] = "shadowed" if getattr(module, "SHADOWED", False) else "the installed one"
            except ImportError:
                found[name] = "not importable"
        found["on the path"] = [p for p in sys.path if p in ("", ".") or os.path.abspath(p) == os.getcwd()]
        found["data.txt"] = open("data.txt").read()
        print(json.dumps(found))
    """, spare=spare, forked=forked)
    assert seen == {"shadow_probe": "not importable", "matplotlib": "the installed one", "on the path": [],
                    "data.txt": "the student's own file"}


@started
def test_writes_outside_its_folder_fail_and_its_folder_is_a_private_copy(sandbox_course, repo_root, spare):
    root, folder = sandbox_course
    targets = [str(root / "gradebook.db"), str(root / "autograded" / "other" / "ch11" / "01_tiny.ipynb"),
               str(repo_root / "lib" / "lmpolicy" / "notebook" / "checks.py"), "/usr/lib/planted.py", "/etc/planted"]
    seen = run_in_kernel(folder, f"""
        import json, pathlib
        from ipykernel import get_connection_file
        sockets = pathlib.Path(get_connection_file()).parent  # on the host's disk: sealed once bound
        results = {{}}
        for path in {targets!r} + [str(sockets / "filler"), get_connection_file()]:
            try:
                with open(path, "a") as f:
                    f.write("planted")
                results[path] = "written"
            except OSError as error:
                results[path] = type(error).__name__
        results["data.txt before"] = open("data.txt").read()
        with open("data.txt", "w") as f:
            f.write("changed in the sandbox")
        open("new.txt", "w").write("made in the sandbox")
        print(json.dumps(results))
    """, spare=spare)
    assert seen.pop("data.txt before") == "the student's own file"
    assert "written" not in seen.values(), seen
    assert (root / "gradebook.db").read_text() == "the answers"
    assert "planted" not in (repo_root / "lib" / "lmpolicy" / "notebook" / "checks.py").read_text()
    assert (folder / "data.txt").read_text() == "the student's own file"
    assert not (folder / "new.txt").exists()


def test_processes_stop_at_the_cap(sandbox_course):
    _, folder = sandbox_course
    seen = run_in_kernel(folder, """
        import json, os, time
        children = []
        try:
            while len(children) < 1000:
                pid = os.fork()
                if pid == 0:
                    time.sleep(60)
                    os._exit(0)
                children.append(pid)
            stopped = None
        except OSError as error:
            stopped = type(error).__name__
        print(json.dumps({"children": len(children), "stopped": stopped}))
    """, max_processes=64)
    assert seen["stopped"] == "BlockingIOError"
    assert seen["children"] < 64


# What a write meets at the scratch bound in /tmp or the kernel's folder: the tmpfs is full, or the file is as large
# as the file-size limit (by default the same bound), whichever comes first.
AT_THE_SCRATCH_BOUND = ("No space left on device", "File too large")


def test_tmp_and_its_folder_fill_up_at_their_bound(sandbox_course):
    _, folder = sandbox_course
    seen = run_in_kernel(folder, """
        import json
        written = {}
        for path in ["/tmp/filler", "filler"]:
            written[path] = 0
            try:
                with open(path, "wb") as f:
                    while written[path] < 64 * 1024**2:
                        f.write(b"x" * 1024**2)
                        f.flush()
                        written[path] += 1024**2
            except OSError as error:
                written[path] = (written[path], error.strerror)
        print(json.dumps(written))
    """, scratch_bytes=8 * 1024**2)
    for path, (size, error) in seen.items():
        assert size <= 8 * 1024**2 and error in AT_THE_SCRATCH_BOUND, (path, size, error)


def test_as_a_normal_user_the_sandbox_root_and_dev_are_read_only(sandbox_course):
    """A grader that is not root builds the sandbox in a user namespace, where the kernel keeps the
    grader's uid and so owns the sandbox's root and /dev: tmpfs without a size bound, where it could
    fill half the host's memory. They are remounted read-only; /tmp and its folder stay bounded."""
    _, folder = sandbox_course
    box = sandbox.Sandbox.create(folder, scratch_bytes=8 * 1024**2)
    try:
        box.uid, box.readable = None, []  # as a normal user builds it (nobody cannot see the venv under /root)
        box.private.chmod(0o755)
        for path in box.private.rglob("*"):
            path.chmod(0o777 if path.is_dir() else 0o644)
        # dd as a kernel would write: SIGXFSZ ignored (Python's start ignores it), so the limit reads as an error
        script = """trap '' XFSZ; for path in / /dev /dev/shm /tmp .; do
            echo "$path|$(dd if=/dev/zero of="$path/filler" bs=1M count=16 2>&1 | head -1)"
        done"""
        command = box.command(["/bin/sh", "-c", script], {})
        if os.geteuid() == 0:  # become a normal user first (bwrap then has no capabilities either)
            command = [shutil.which("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + command
        ran = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        box.remove()
    assert ran.returncode == 0, ran.stderr
    said = dict(line.split("|", 1) for line in ran.stdout.splitlines())
    for path in ("/", "/dev", "/dev/shm"):
        assert said[path].endswith("Read-only file system"), (path, said[path])
    for path in ("/tmp", "."):
        assert said[path].endswith(AT_THE_SCRATCH_BOUND), (path, said[path])


@entered
def test_no_descriptor_the_kernel_can_reach_is_a_file_of_the_host(sandbox_course, forked):
    """Its own descriptors and those of every process beside it in the sandbox whose /proc/<pid>/fd it may read
    (bwrap's init, the holder): each a pipe, a socket, an anonymous inode, /dev/null or a file of its own tmpfs."""
    _, folder = sandbox_course
    seen = run_in_kernel(folder, REACHABLE_DESCRIPTORS + "print(json.dumps(reachable_descriptors()))", forked=forked)
    processes = seen["processes"]
    assert seen["self"] in processes and processes[seen["self"]]["fds"], seen  # it lists its own
    if forked:  # the holder runs as the kernel's own uid: its descriptors are in reach
        assert "sleep" in [process["name"] for process in processes.values()], processes
    doors = {f"{process['name']} (pid {pid}) fd {fd}": descriptor["target"]
             for pid, process in processes.items() for fd, descriptor in process["fds"].items()
             if descriptor_kind(descriptor) is None}
    assert doors == {}, doors
    own = processes[seen["self"]]["fds"]
    assert descriptor_kind(own["0"]) == "/dev/null" and {descriptor_kind(own[fd]) for fd in "12"} == {"pipe"}, own


# In a kernel: write 2 x LIMIT + 1 bytes through every descriptor it can reach that leads out of it (a pipe whose
# reading end it does not hold itself, a file, anything not of the allowed kinds), and into new files in its /tmp
# and its folder; say for each how far it got and why it stopped.
WRITE_THROUGH_EVERYTHING = REACHABLE_DESCRIPTORS + """
import errno, select, signal
LIMIT = %d
def write(fd, total):
    written, chunk = 0, b"x" * 2**20
    while written < total:
        try:
            written += os.write(fd, chunk[:total - written])
        except BlockingIOError:  # a pipe nobody drains holds its buffer and no more
            if not select.select([], [fd], [], 5)[1]:
                return written, "blocked"
        except OSError as error:
            return written, errno.errorcode[error.errno]
    return written, None
seen = reachable_descriptors()
kernel = seen["processes"][seen["self"]]["fds"]
read_here = {d["target"] for d in kernel.values() if d["readable"] and d["target"].startswith("pipe:[")}
results = {}
for pid, process in seen["processes"].items():
    for fd, d in process["fds"].items():
        if d["target"].startswith(("socket:[", "anon_inode:")) or d["target"] in read_here or d["rdev"] == os.makedev(1, 3):
            continue  # ZMQ's own, or ipykernel's capture of its own output (which comes back as the cell's output)
        name = f"{process['name']} fd {fd} {d['target']}"
        try:  # its own descriptor as it is; another process's opened anew through /proc
            out = os.dup(int(fd)) if pid == seen["self"] else os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY)
            os.set_blocking(out, False)
        except OSError as error:
            results[name] = [0, errno.errorcode[error.errno]]
            continue
        results[name] = write(out, 2 * LIMIT + 1)
        os.set_blocking(out, True)  # the open file is shared with the descriptor it was reached by
        os.close(out)
for path in ["/tmp/big", "big"]:
    out = os.open(path, os.O_WRONLY | os.O_CREAT)
    results[path] = write(out, 2 * LIMIT + 1)
    os.close(out)
honest = open("honest.txt", "w")  # under the limit: as it always was
honest.write("x" * (LIMIT // 2))
honest.close()
print()
print(json.dumps({"results": results, "honest": os.path.getsize("honest.txt"),
                  "SIGXFSZ ignored": signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN}))
"""


@entered
def test_a_write_through_any_descriptor_stops_at_the_file_size_bound_and_nothing_reaches_a_host_file(sandbox_course,
                                                                                                   forked):
    """Past ``file_bytes`` a file write fails with EFBIG ("File too large"), and the kernel lives on; what goes
    into the pipes to the grader lands in no file: the grader keeps a bounded tail of it. No file the grader's
    processes hold open (its error output, its log, pytest's capture) grows by more than the bound."""
    _, folder = sandbox_course
    limit, before, after, tails = 4 * 1024**2, grader_open_files(), {}, []

    def look(manager):
        after.update(grader_open_files())
        tails.append(manager.error_output(limit=2**30))

    seen = run_in_kernel(folder, WRITE_THROUGH_EVERYTHING % limit, forked=forked, file_bytes=limit,
                         scratch_bytes=4 * limit, while_alive=look)
    grown = {file: size - before.get(file, 0) for file, size in after.items() if size - before.get(file, 0) > limit}
    assert grown == {}, grown
    assert len(tails[0]) <= DEFAULT_TAIL_BYTES
    results = seen["results"]
    for path in ("/tmp/big", "big"):  # the kernel's own files stop at the bound, and it goes on
        assert results[path] == [limit, "EFBIG"], (path, results[path])
    assert seen["SIGXFSZ ignored"] and seen["honest"] == limit // 2
    outward = {name: result for name, result in results.items() if name not in ("/tmp/big", "big")}
    # what leads out of it is a pipe (its stdout and stderr, which reach the grader whole), or stops at the bound
    assert [name for name, (written, _) in outward.items() if " pipe:[" not in name and written > limit] == [], outward
    assert [written for name, (written, _) in outward.items() if " pipe:[" in name and written == 2 * limit + 1], outward


def test_as_a_normal_user_the_sockets_folder_is_read_only_in_the_sandbox_once_sealed(sandbox_course):
    """A grader that is not root: its kernel keeps the grader's uid, which owns the sockets folder, on the host's
    disk. Once the kernel's sockets are bound, the folder is read-only in its sandbox (nothing more is written to the
    host's disk), and its sockets still answer the grader."""
    _, folder = sandbox_course
    box = sandbox.Sandbox.create(folder)
    box.uid = None  # as a normal user builds it: a user namespace, where the kernel keeps the grader's own uid,
    os.chown(box.sockets, os.getuid(), os.getgid())  # which owns the folder
    socket_file = box.sockets / "kernel-1"
    kernel = f"""if True:
        import pathlib, socket
        (pathlib.Path({str(box.sockets)!r}) / "before").write_text("written")  # the grader's uid owns the folder
        server = socket.socket(socket.AF_UNIX)
        server.bind({str(socket_file)!r})
        server.listen()
        connection, _ = server.accept()  # the grader connects once it has sealed the folder
        try:
            (pathlib.Path({str(box.sockets)!r}) / "after").write_text("written")
            said = "written"
        except OSError as error:
            said = error.strerror
        connection.sendall(said.encode())
    """
    process = subprocess.Popen(box.command([sys.executable, "-c", kernel], {}), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        while not socket_file.exists() and process.poll() is None:  # bound: what seal waits for, too
            time.sleep(0.05)
        run_coroutine(box.seal([str(socket_file)], process.pid))
        with socket.socket(socket.AF_UNIX) as grader:
            grader.connect(str(socket_file))
            said = grader.recv(100).decode()
        process.wait(timeout=60)
        written = sorted(path.name for path in box.sockets.iterdir())
    finally:
        process.kill()
        box.remove()
    assert said == "Read-only file system", (said, process.stdout.read())
    assert written == ["before", "kernel-1"]


def test_the_graders_own_data_is_covered_up(sandbox_course):
    """The typical wrong answers and the example written answers quote the solutions, the hidden tests are the
    test cells' hidden parts: out of sight."""
    _, folder = sandbox_course
    seen = run_in_kernel(folder, """
        import json, pathlib, lmpolicy_grader
        package = pathlib.Path(lmpolicy_grader.__file__).parent
        print(json.dumps({"corpus": sorted(p.name for p in (package / "corpus").iterdir()),
                          "hidden_tests": sorted(p.name for p in (package / "hidden_tests").iterdir()),
                          "kernels": (package / "kernels" / "moving_in.py").exists()}))
    """)
    # the corpus and the hidden tests out of sight, what the kernel imports in view
    assert seen == {"corpus": [], "hidden_tests": [], "kernels": True}


def _secret_lines(repo_root: Path) -> tuple[set[str], set[str]]:
    """(hidden-test lines, solution lines) of the source notebooks that the release does not show, the hidden
    tests' modules' lines among the first."""
    hidden, solutions = set(), set()
    for path in sorted((repo_root / "lib" / "lmpolicy_grader" / "hidden_tests").glob("nb*.py")):
        hidden |= {line.strip() for line in path.read_text().splitlines() if len(line.strip()) >= 24
                   and not line.strip().startswith(("#", "import ", "from ", '"""'))}
    for path in sorted((repo_root / "source" / "ch11").glob("*.ipynb")):
        released = {line.strip() for cell in nbformat.read(repo_root / "release" / "ch11" / path.name, as_version=4).cells
                    for line in cell.source.splitlines()}
        for cell in nbformat.read(path, as_version=4).cells:
            inside = None
            for line in cell.source.splitlines():
                text = line.strip()
                if "### BEGIN " in text:
                    inside = hidden if "HIDDEN TESTS" in text else solutions
                elif "### END " in text:
                    inside = None
                elif inside is not None and len(text) >= 24 and text not in released \
                        and not text.startswith(("#", "import ", "from ")):
                    inside.add(text)
    return hidden, solutions


# A solution line that also occurs in third-party code (an idiom, not an answer).
COMMON_IDIOMS = {'with np.errstate(divide="ignore", invalid="ignore"):', 'with np.errstate(divide="ignore"):'}


@pytest.mark.slow
def test_what_a_kernel_can_import_holds_no_hidden_test_and_no_solution_but_the_librarys(sandbox_course, repo_root, tmp_path):
    """Everything a sandboxed kernel can import from (its sys.path) and /etc, searched for the source
    notebooks' hidden-test and solution lines: no hidden test anywhere; solution lines only in the
    student's own library lmpolicy, whose functions some exercises re-implement (calling or copying
    them earns nothing: the no-credit rule)."""
    _, folder = sandbox_course
    hidden, solutions = _secret_lines(repo_root)
    assert len(hidden) > 50 and len(solutions) > 50
    markers = sorted(hidden | solutions)
    seen = run_in_kernel(folder, f"""
        import json, os, subprocess, sys, tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write({chr(10).join(markers) + chr(10)!r})
        folders = sorted({{p for p in sys.path if os.path.isdir(p) and p not in ("", ".", os.getcwd())}} | {{"/etc"}})
        found = subprocess.run(["grep", "-rIoF", "-f", f.name, *folders], capture_output=True, text=True).stdout
        print(json.dumps({{"folders": folders, "found": sorted(set(found.splitlines()))}}))
    """)
    assert any("site-packages" in folder for folder in seen["folders"]), seen["folders"]
    import lmpolicy
    library = str(Path(lmpolicy.__file__).resolve().parent) + os.sep
    hits = [line.split(":", 1) for line in seen["found"]]
    in_view = [hit for hit in hits if hit[1] in hidden and hit[1] not in COMMON_IDIOMS]
    assert in_view == [], "hidden tests in view"
    elsewhere = [hit for hit in hits if not hit[0].startswith(library) and hit[1] not in COMMON_IDIOMS]
    assert elsewhere == [], elsewhere


def test_without_bubblewrap_grading_stops_and_says_how_to_enable_it(monkeypatch, tmp_path):
    no_bwrap = tmp_path / "bin"  # the tools of the grading kernel, but not bubblewrap
    no_bwrap.mkdir()
    for tool in ("prlimit", "setpriv"):
        (no_bwrap / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", os.pathsep.join([str(no_bwrap), str(Path(sys.executable).parent)]))
    sandbox.sandbox_problem.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxUnavailable) as raised:
            sandbox.require_sandbox()
        with pytest.raises(sandbox.SandboxUnavailable):
            run_in_kernel(tmp_path, "print(1)")
        root = tiny_course.make_course(tmp_path / "course")
        (root / "release" / "ch11").mkdir(parents=True)
        nbformat.write(tiny_course.source_notebook(), root / "release" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb")
        tiny_course.submit(root, "alice", tiny_course.source_notebook())
        with pytest.raises(sandbox.SandboxUnavailable):
            grade_class(root, workers=1, log=lambda _: None, sandbox=True)
    finally:
        sandbox.sandbox_problem.cache_clear()
    message = str(raised.value)
    assert "`bwrap` is not on PATH" in message
    assert "apt-get install bubblewrap" in message and "--sandbox off" in message


# --- the tiny course, graded end to end --------------------------------------------------------

# A blank submission that finds the instructor's source notebook and runs its solution cells.
SOURCE_THIEF = """import json, os, pathlib
print("SANDBOX_UID", os.getuid())  # the uid pool of its worker holds the fork bomb's kernel's uid too
for folder in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]:
    source = folder / "source" / "ch11" / "01_tiny.ipynb"
    if source.exists():
        for cell in json.loads(source.read_text())["cells"]:
            if cell["cell_type"] == "code" and "BEGIN SOLUTION" in "".join(cell["source"]):
                exec("".join(cell["source"]), globals())
"""
FORK_BOMB = """import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


def test_graded_class_thief_gets_nothing_and_a_fork_bomb_costs_no_one_else(tmp_path):
    root = tiny_course.make_course(tmp_path / "course")
    release(root)
    tiny_course.submit(root, "a_fork_bomb", tiny_course.replace_answer(tiny_course.source_notebook(), "ex1__answer",
                                                                        FORK_BOMB))
    tiny_course.submit(root, "b_reference", tiny_course.source_notebook())
    thief = nbformat.read(root / "release" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb", as_version=4)
    tiny_course.submit(root, "c_source_thief", tiny_course.replace_answer(thief, "ex1__answer", SOURCE_THIEF))

    outcomes = {o.student: o for o in grade_class(root, workers=1, log=lambda _: None, sandbox=True)}

    def scores(student):
        return {row.exercise: row.score for row in exercise_rows(root, [outcomes[student]]) if row.exercise != "ex3"}
    assert outcomes["a_fork_bomb"].status in (Status.GRADED, Status.FAILED)
    if outcomes["a_fork_bomb"].status == Status.GRADED:
        assert scores("a_fork_bomb")["ex1"] == 0
    assert outcomes["b_reference"].status == Status.GRADED and scores("b_reference") == {"ex1": 2, "ex2": 3}
    assert outcomes["c_source_thief"].status == Status.GRADED and scores("c_source_thief") == {"ex1": 0, "ex2": 0}
    printed = (root / "autograded" / "c_source_thief" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb").read_text()
    pool = uid_pool(int(printed.split("SANDBOX_UID ", 1)[1].split("\\n", 1)[0]))
    leftovers = [pid for pid in os.listdir("/proc") if pid.isdigit() and process_uid(pid) in pool]
    assert leftovers == [], "sandboxed processes outlived their notebook"
