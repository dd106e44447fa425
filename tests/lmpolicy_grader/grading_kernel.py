"""A grading kernel driven as GradingExecute drives it, in a course laid out as nbgrader leaves it
mid-grading: the helpers of the tests that run a submission's hostile code in the real sandbox
(test_sandbox, test_cgroup, test_hostile_sandbox), and what the grader logs meanwhile."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import textwrap
from pathlib import Path
from typing import Callable

import pytest
from traitlets.log import get_logger

from lmpolicy_grader.isolation import sandbox
from lmpolicy_grader.kernels import remote_call
from lmpolicy_grader.kernels.moving_in import TARGET as MOVING_IN
from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager

from ..own_thread import run_coroutine

# What a hostile submission goes looking for, relative to the course root.
COURSE_SECRETS = ["source/ch11/01_tiny.ipynb", "gradebook.db", "submitted/other/ch11/01_tiny.ipynb",
                  "autograded/other/ch11/01_tiny.ipynb", "feedback/other/ch11/01_tiny.html", "nbgrader_config.py"]


def course_mid_grading(tmp_path: Path) -> tuple[Path, Path]:
    """A course folder as nbgrader leaves it mid-grading; returns (root, the kernel's folder)."""
    root = tmp_path / "course"
    for name in COURSE_SECRETS:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("the answers")
    folder = root / "autograded" / "me" / "ch11"
    folder.mkdir(parents=True)
    (folder / "01_tiny.ipynb").write_text("a sanitized notebook holds hidden tests")
    (folder / "data.txt").write_text("the student's own file")
    return root, folder


# The two ways a grading kernel starts: for its notebook, or as a spare that is given its notebook later.
started = pytest.mark.parametrize("spare", [False, True], ids=["for-its-notebook", "as-a-spare"])
# The two ways a sandboxed grading kernel gets into its sandbox: forked from the grading zygote (the default), or
# started from its command line there (where forking fails).
entered = pytest.mark.parametrize("forked", [True, False], ids=["forked-into-it", "started-in-it"])


def run_in_kernel(folder: Path, code: str, sandbox: bool = True, spare: bool = False,
                  while_alive: Callable[[GradingKernelManager], None] | None = None, **traits) -> dict:
    """Run ``code`` in a grading kernel started in ``folder`` (or, ``spare``, started before it was
    known and moved in as GradingExecute does); returns the JSON it prints last. ``while_alive`` is called
    with the kernel's manager once the code has run, before the kernel is shut down."""
    async def run():
        manager = GradingKernelManager(sandbox=sandbox, **traits)
        if spare:
            await manager.start_for_a_later_notebook()
            await asyncio.sleep(1)  # the kernel is up before its notebook comes
            assert manager.can_take(folder)
            moving_in = await manager.move_in(folder)
        else:
            await manager.start_kernel(cwd=str(folder))
            moving_in = None
        client = manager.client()
        client.start_channels()
        outputs = []
        try:
            await client.wait_for_ready(timeout=60)
            if moving_in is not None:
                await remote_call.call(client, MOVING_IN, "take_files", 60, **moving_in)
            reply = await client.execute_interactive(textwrap.dedent(code), timeout=120,
                                                     output_hook=lambda msg: outputs.append(msg))
            assert reply["content"]["status"] == "ok", reply["content"]
            if while_alive is not None:
                while_alive(manager)
        finally:
            client.stop_channels()
            await manager.shutdown_kernel(now=True)
        assert manager._sandbox is None, "the sandbox's private folder outlived its kernel"
        text = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
        return json.loads(text.strip().splitlines()[-1])
    return run_coroutine(run())


# In a kernel: every descriptor it can reach, its own and those of every process of its pid namespace whose
# /proc/<pid>/fd it may read (it shares that namespace with bwrap's init and, forked, with the holder); each with
# what tells its kind apart, read through the descriptor itself (a deleted file of the host's /tmp reads
# "/tmp/#123 (deleted)", a name that looks like the sandbox's own /tmp).
REACHABLE_DESCRIPTORS = """
import json, os, stat
def reachable_descriptors():
    sandbox_tmpfs = {os.stat(path).st_dev for path in ("/tmp", ".")}
    processes, unreachable = {}, {}
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        try:
            name = open(f"/proc/{pid}/comm").read().strip()
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError as error:
            unreachable[pid] = type(error).__name__
            continue
        held = {}
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                target, info = os.readlink(path), os.stat(path)
                flags = int(dict(line.split(":", 1) for line in open(f"/proc/{pid}/fdinfo/{fd}"))["flags"], 8)
            except (OSError, KeyError):
                continue  # closed meanwhile (the listing's own descriptor)
            held[fd] = {"target": target, "mode": stat.S_IFMT(info.st_mode), "rdev": info.st_rdev,
                        "links": info.st_nlink, "in_sandbox_tmpfs": info.st_dev in sandbox_tmpfs,
                        "readable": flags & os.O_ACCMODE in (os.O_RDONLY, os.O_RDWR)}
        processes[pid] = {"name": name, "fds": held}
    return {"self": str(os.getpid()), "processes": processes, "unreachable": unreachable}
"""


def descriptor_kind(descriptor: dict) -> str | None:
    """The allowed kind of a descriptor ``REACHABLE_DESCRIPTORS`` listed: a pipe, a socket, an anonymous inode
    (eventfd, epoll, pidfd), /dev/null or a file of the sandbox's own tmpfs; None for anything else (a file or
    folder of the host, a deleted one, a device)."""
    target, mode = descriptor["target"], descriptor["mode"]
    if (mode == stat.S_IFIFO and target.startswith("pipe:[")) or (mode == stat.S_IFSOCK and target.startswith("socket:[")):
        return target.split(":")[0]
    if target.startswith("anon_inode:"):
        return "anon_inode"
    if mode == stat.S_IFCHR and descriptor["rdev"] == os.makedev(1, 3):
        return "/dev/null"
    if mode == stat.S_IFREG and descriptor["in_sandbox_tmpfs"] and descriptor["links"] > 0:
        return "sandbox file"
    return None


def grader_open_files() -> dict[tuple[int, int], int]:
    """(device, inode) -> size of every regular file that this process and its descendants (the zygotes, bwrap,
    the sandbox's processes) hold open: its log, pytest's capture files, deleted temporary files included."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, ValueError):
            stat_line = Path(f"/proc/{pid}/stat").read_text()
            parents[int(pid)] = int(stat_line[stat_line.rindex(")") + 2:].split()[1])
    ours = {os.getpid()}
    for _ in range(len(parents)):
        grown = ours | {pid for pid, parent in parents.items() if parent in ours}
        if grown == ours:
            break
        ours = grown
    files = {}
    for pid in ours:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    info = os.stat(f"/proc/{pid}/fd/{fd}")
                    if stat.S_ISREG(info.st_mode):
                        files[(info.st_dev, info.st_ino)] = info.st_size
    return files


def uid_pool(uid: int) -> range:
    """The 64 uids of the grading process that gave a kernel ``uid`` (its other kernels had the others)."""
    first = uid - (uid - sandbox.private_uid_base(0)) % 64
    return range(first, first + 64)


def process_uid(pid: str) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return -1
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))


@contextlib.contextmanager
def logged_messages():
    """The messages logged meanwhile on traitlets' log: the grader's, its kernel managers' and provisioners'
    (nbgrader's applications stop it propagating to the root logger, where pytest's caplog listens)."""
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    get_logger().addHandler(handler)
    try:
        yield messages
    finally:
        get_logger().removeHandler(handler)
