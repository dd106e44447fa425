"""A grading kernel forked into its sandbox: as shut in as one bwrap started, with nothing of the course in it
from the zygote; and what happens when entering fails."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from lmpolicy_grader.isolation import entering
from lmpolicy_grader.isolation.sandbox import DEFAULT_SCRATCH_BYTES, WORK_FOLDER, Sandbox, sandbox_problem
from lmpolicy_grader.kernels import forked

from ...own_thread import run_coroutine
from ..grading_kernel import logged_messages, run_in_kernel

pytestmark = [pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
              pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds here: the kernel is not forked")]

PROBE = """
    import glob, json, os, resource, signal, sys
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
    print(json.dumps({
        "forked": "kernels.forked import serve" in open("/proc/self/cmdline").read(),
        "pid namespace ids": status["NSpid"].split(), "uid": os.getuid(), "parent": os.getppid(),
        "effective": status["CapEff"], "bounding": status["CapBnd"], "no new privileges": status["NoNewPrivs"],
        "cwd": os.getcwd(), "files": sorted(os.listdir(".")), "course in view": os.path.exists(%r),
        "network interfaces": sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else [],
        "limits": [resource.getrlimit(getattr(resource, "RLIMIT_" + name)) for name in ("AS", "CPU", "NPROC", "FSIZE", "CORE")],
        "SIGXFSZ ignored": signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN,
        "open files": sorted(os.readlink(fd).split(":")[0] for fd in glob.glob("/proc/self/fd/*") if os.path.lexists(fd)),
    }))
"""


def test_a_forked_kernel_is_shut_in_as_the_sandbox_shuts_in_its_own_command(sandbox_course):
    root, folder = sandbox_course
    forked_kernel = run_in_kernel(folder, PROBE % str(root))
    started = run_in_kernel(folder, PROBE % str(root), forked=False)
    assert forked_kernel["forked"] and not started["forked"]
    for seen in (forked_kernel, started):
        assert seen["pid namespace ids"] == [seen["pid namespace ids"][0]], seen  # it sees no pid but its own
        assert seen["parent"] == 1  # bwrap's init: a kill of it from inside is ignored
        assert seen["effective"] == seen["bounding"] == "0000000000000000"
        assert seen["no new privileges"] == "1"
        assert seen["cwd"] == WORK_FOLDER
        assert not seen["course in view"]
        assert seen["network interfaces"] in ([], ["lo"])
        # a file written past the scratch bound fails with EFBIG (never a signal that kills it), and no core dump
        assert seen["limits"][3:] == [[DEFAULT_SCRATCH_BYTES] * 2, [0, 0]] and seen["SIGXFSZ ignored"], seen["limits"]
        if os.geteuid() == 0:  # a uid of its own, never root
            assert seen["uid"] not in (0, os.getuid())
    assert forked_kernel["files"] == started["files"]  # the notebook's folder, copied in the same
    assert forked_kernel["limits"] == started["limits"]  # prlimit's, set by setrlimit
    # nothing of the zygote's comes along: as many sockets as ipykernel opens in a started kernel, and no file but
    # its own IPython history, whose "-journal" file is open only while the history thread is writing a cell (its
    # output goes to a pipe: isolation/test_sandbox.py lists every descriptor it can reach)
    forked_files, started_files = (Counter(opened_file(name) for name in seen["open files"])
                                   for seen in (forked_kernel, started))
    assert forked_files["socket"] == started_files["socket"], (forked_files, started_files)
    assert set(forked_files) <= set(started_files) | {"/dev/null"}, (forked_files, started_files)


def opened_file(name: str) -> str:
    """An open file's name with what changes from one run to the next taken out: temporary numbers, and the
    rollback journal SQLite keeps beside a database while it writes to it."""
    return re.sub(r"-journal$", "", re.sub(r"#\d+", "#", name))


def test_opened_file_names_the_history_database_whether_or_not_it_is_being_written():
    assert opened_file("/tmp/.ipython/profile_default/history.sqlite-journal") == \
        opened_file("/tmp/.ipython/profile_default/history.sqlite") == "/tmp/.ipython/profile_default/history.sqlite"
    assert opened_file("/tmp/#12 (deleted)") == "/tmp/# (deleted)"
    assert opened_file("/course/lib/lmpolicy/__init__.py") == "/course/lib/lmpolicy/__init__.py"


def test_a_forked_kernel_takes_its_output_only_as_a_pipe(tmp_path):
    """The zygote's child refuses, before it enters, an output that is not a pipe (a file of the host would be a
    door out of the sandbox: the grader's pipe is drained into a bounded tail)."""
    host_file = tmp_path / "the grader's error output"
    host_file.touch()
    child = subprocess.run(
        [sys.executable, "-c", "from lmpolicy_grader.kernels.forked import become_sandboxed_kernel\n"
                               f"become_sandboxed_kernel([], {{}}, {str(host_file)!r}, {{}}, 99)"],
        capture_output=True, text=True, timeout=120)
    assert child.returncode != 0
    assert f"the kernel's output must be a pipe, and {host_file} is not one" in child.stderr, child.stderr


def test_the_grading_zygote_refuses_to_fork_once_it_holds_any_of_the_course():
    ours, its = __import__("socket").socketpair()
    zygote = subprocess.run(
        [sys.executable, "-c", f"import lmpolicy.exact.kl\nfrom lmpolicy_grader.kernels.forked import serve\n"
                               f"serve({its.fileno()}, 'grading')"],
        pass_fds=[its.fileno()], capture_output=True, text=True, timeout=120)
    ours.close(), its.close()
    assert zygote.returncode != 0
    assert "the grading kernels' zygote refuses to fork: it has imported lmpolicy" in zygote.stderr


def test_the_zygote_imports_nothing_of_the_course():
    held = subprocess.run(
        [sys.executable, "-c", textwrap.dedent("""
            import importlib, sys
            from lmpolicy_grader.kernels import forked
            for module in forked.GRADING_PRELOAD:
                importlib.import_module(module)
            print(sorted(name for name in sys.modules if name.split(".")[0] in forked.COURSE_PACKAGES))
        """)], capture_output=True, text=True, timeout=120, check=True)
    assert held.stdout.strip() == "[]"


def test_a_process_outside_any_sandbox_cannot_be_entered():
    with pytest.raises(entering.EnteringFailed, match=f"process {os.getpid()} is in no sandbox of its own"):
        entering.enter(os.getpid(), "/", None, [], {})


def test_a_sandbox_that_ends_before_its_holder_runs_is_named():
    ended = subprocess.Popen(["/bin/true"])
    ended.wait()
    # reaped, it is gone from /proc; a zombie would say the same
    with pytest.raises(entering.EnteringFailed, match="bwrap ended before its holder ran"):
        entering.find_holder(ended.pid, timeout=5)


def test_a_zygote_that_cannot_fork_leaves_the_kernel_to_start_from_its_command_line(sandbox_course, monkeypatch):
    _, folder = sandbox_course
    broken = forked.Zygote("grading")
    monkeypatch.setattr(broken, "fork", lambda request: (_ for _ in ()).throw(
        forked.ZygoteUnavailable("the zygote of the sandboxed grading kernels ended (exit status 3)")))
    monkeypatch.setattr("lmpolicy_grader.kernels.grading_kernel.GRADING_ZYGOTE", broken)
    monkeypatch.setattr("lmpolicy_grader.kernels.grading_kernel._warned", set())
    with logged_messages() as warnings:
        seen = run_in_kernel(folder, PROBE % "/nowhere")
    assert not seen["forked"] and seen["effective"] == "0000000000000000"
    assert any("sandboxed grading kernels ended (exit status 3)" in warning
               and "start from their command line instead" in warning for warning in warnings), warnings


def test_a_forked_kernel_that_dies_takes_its_sandbox_with_it(sandbox_course):
    """A kernel killed from inside (as an out-of-memory kill would) is seen to have died, and its sandbox,
    bwrap and the holder, ends with it; shutting a live one down ends both as well."""
    import asyncio

    from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager

    _, folder = sandbox_course

    async def scenario():
        ends = []
        for how in ("dies", "shut down"):
            manager = GradingKernelManager()
            await manager.start_kernel(cwd=str(folder))
            client = manager.client()
            client.start_channels()
            await client.wait_for_ready(timeout=60)
            handle = manager.provisioner.process
            assert isinstance(handle, forked.SandboxedForkedProcess)
            if how == "dies":
                client.execute("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
                for _ in range(100):
                    if not await manager.is_alive():
                        break
                    await asyncio.sleep(0.1)
            alive_after_death = await manager.is_alive()
            client.stop_channels()
            await manager.shutdown_kernel(now=True)
            ends.append((how, alive_after_death, handle.sandbox.poll() is not None, handle.kernel.poll() is not None))
        return ends

    ends = run_coroutine(scenario())
    assert ends[0] == ("dies", False, True, True)
    assert ends[1] == ("shut down", True, True, True)


def test_a_kernel_that_cannot_enter_its_sandbox_starts_from_its_command_line_there(sandbox_course, monkeypatch):
    """The zygote's child fails to enter (here: it is pointed at a process in no sandbox): the zygote says so
    before it answers, and the kernel starts from its command line in its sandbox, with a warning."""
    _, folder = sandbox_course
    monkeypatch.setattr("lmpolicy_grader.kernels.grading_kernel.find_holder", lambda pid: os.getpid())
    monkeypatch.setattr("lmpolicy_grader.kernels.grading_kernel._warned", set())
    with logged_messages() as warnings:
        seen = run_in_kernel(folder, PROBE % "/nowhere")
    assert not seen["forked"] and seen["effective"] == "0000000000000000" and seen["cwd"] == WORK_FOLDER
    assert any(f"could not enter its sandbox (entering the sandbox: process {os.getpid()} is in no sandbox of its "
               f"own)" in warning for warning in warnings), warnings
