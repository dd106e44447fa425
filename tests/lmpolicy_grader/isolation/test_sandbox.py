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
from pathlib import Path

import nbformat
import pytest

from lmpolicy_grader.isolation import sandbox
from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.report import exercise_rows
from lmpolicy_grader.class_grading.status import Status

from .. import tiny_course
from ..grading_kernel import COURSE_SECRETS, process_uid, run_in_kernel, started, uid_pool

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


@started
def test_writes_outside_its_folder_fail_and_its_folder_is_a_private_copy(sandbox_course, repo_root, spare):
    root, folder = sandbox_course
    targets = [str(root / "gradebook.db"), str(root / "autograded" / "other" / "ch11" / "01_tiny.ipynb"),
               str(repo_root / "lib" / "lmpolicy" / "checks.py"), "/usr/lib/planted.py", "/etc/planted"]
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
    assert "planted" not in (repo_root / "lib" / "lmpolicy" / "checks.py").read_text()
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
        assert size <= 8 * 1024**2 and error == "No space left on device", (path, size, error)


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
        script = """for path in / /dev /dev/shm /tmp .; do
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
        assert said[path].endswith("No space left on device"), (path, said[path])


def test_the_graders_own_data_is_covered_up(sandbox_course):
    """The typical wrong answers and the example written answers quote the solutions: out of sight."""
    _, folder = sandbox_course
    seen = run_in_kernel(folder, """
        import json, pathlib, lmpolicy_grader
        package = pathlib.Path(lmpolicy_grader.__file__).parent
        print(json.dumps({"corpus": sorted(p.name for p in (package / "corpus").iterdir()),
                          "kernels": (package / "kernels" / "moving_in.py").exists()}))
    """)
    assert seen == {"corpus": [], "kernels": True}  # the corpus out of sight, what the kernel imports in view


def _secret_lines(repo_root: Path) -> tuple[set[str], set[str]]:
    """(hidden-test lines, solution lines) of the source notebooks that the release does not show."""
    hidden, solutions = set(), set()
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
COMMON_IDIOMS = {'with np.errstate(divide="ignore", invalid="ignore"):'}


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
    assert not [hit for hit in hits if hit[1] in hidden], "hidden tests in view"
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
