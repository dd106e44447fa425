"""Entering a sandbox from outside: how a process forked from a zygote becomes a process of a sandbox bwrap made.

bwrap makes the sandbox (``sandbox.Sandbox.command``) and runs a holder in it (``HOLDER``: ``sleep``, which keeps
its namespaces). ``enter`` then makes the calling process one of the holder's fellows, with nothing more:

1. the sandbox's control groups (memory, processes, CPU of the whole sandbox), joined first, while they are in view;
2. its namespaces: the user namespace where bwrap made one (the grader is not root: its owner may join it), then
   IPC, UTS, network, cgroup and mount namespaces, and its root folder (the holder's, after bwrap's pivot);
3. its PID namespace, which only a child can be in: ``enter`` returns in a grandchild the sandbox's init has
   adopted (its parent is pid 1, as a command's is), while the calling process stays outside until it ends
   (``os._exit``): it is the process the grader follows;
4. the sandbox's limits and user: the process limits as ``prlimit`` sets them, every capability given up (the
   bounding set too), the sandbox's uid and gid where the grader is root, and no new privileges, as ``setpriv``
   gives the holder.

The caller must be single-threaded (the kernel forbids ``setns`` into a user or mount namespace otherwise): a
process just forked is. What it had in memory and in its open files comes along, so the zygote that forks it
holds nothing of the course (``kernels.forked.serve`` checks) and the caller closes what it does not need.
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import select
import socket
import time
from pathlib import Path

HOLDER = ["/bin/sleep", "infinity"]
# Joined in this order, the mount namespace last (after it, the host's /proc, where the others are found, is out of
# view); before them the user namespace that owns them, after them the holder's own (bwrap nests one in the other).
NAMESPACES = ("ipc", "uts", "net", "cgroup", "pid", "mnt")
_NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace
_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 24, 38
_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


class EnteringFailed(RuntimeError):
    """A step of ``enter`` failed; the message names the step."""


def _check(result: int, step: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise EnteringFailed(f"entering the sandbox: {step}: {os.strerror(error)}")


def find_holder(bwrap_pid: int, timeout: float = 30.0) -> int:
    """The pid of the holder that ``bwrap_pid`` (bwrap, or a command that execs it) runs in its sandbox, once
    that runs (``HOLDER``'s program: after bwrap's set-up, prlimit, setpriv and the staged files' copy)."""
    holder = os.path.basename(HOLDER[0])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue  # ended meanwhile
                name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
                parents[int(entry)] = (int(rest[1]), name, rest[0])
        for pid, (parent, name, _) in parents.items():
            if name == holder:
                ancestor = parent
                while ancestor > 1 and ancestor != bwrap_pid:
                    ancestor = parents.get(ancestor, (0, "", ""))[0]
                if ancestor == bwrap_pid:
                    return pid
        if parents.get(bwrap_pid, (0, "", "Z"))[2] in ("Z", "X"):
            raise EnteringFailed("entering the sandbox: bwrap ended before its holder ran")
        time.sleep(0.005)
    raise EnteringFailed(f"entering the sandbox: no holder in bwrap's sandbox after {timeout:.0f} s")


def enter(holder_pid: int, workdir: str, uid: int | None, cgroup_folders: list[Path],
          limits: dict[str, int]) -> None:
    """Make this (single-threaded) process a process of the sandbox that ``holder_pid`` runs in; returns in a
    child inside its PID namespace (see the module's docstring). ``limits``: {"AS": bytes, "CPU": seconds,
    "NPROC": processes}, as ``prlimit --as --cpu --nproc`` take them."""
    for folder in cgroup_folders:
        (Path(folder) / "cgroup.procs").write_text(str(os.getpid()))
    joined = []
    for name in NAMESPACES:
        theirs = f"/proc/{holder_pid}/ns/{name}"
        if os.path.exists(theirs) and not _same(theirs, f"/proc/self/ns/{name}"):
            joined.append((name, os.open(theirs, os.O_RDONLY | os.O_CLOEXEC)))
    if not any(name == "mnt" for name, _ in joined) or not any(name == "pid" for name, _ in joined):
        raise EnteringFailed(f"entering the sandbox: process {holder_pid} is in no sandbox of its own")
    users = [fcntl.ioctl(dict(joined)["mnt"], _NS_GET_USERNS),  # the owner of the namespaces (a grader not root)
             os.open(f"/proc/{holder_pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)]  # the holder's own, nested in it
    root = os.open(f"/proc/{holder_pid}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    ours, owner, holders = os.stat("/proc/self/ns/user").st_ino, *(os.fstat(fd).st_ino for fd in users)
    if owner != ours:
        _check(_libc.setns(users[0], 0), "joining the user namespace that owns it")
    for name, fd in joined:
        _check(_libc.setns(fd, 0), f"joining its {name} namespace")
        os.close(fd)
    if holders != owner:
        _check(_libc.setns(users[1], 0), "joining its user namespace")
    for fd in users:
        os.close(fd)
    os.fchdir(root)
    os.chroot(".")
    os.close(root)
    _fork_into_pid_namespace()
    os.setsid()
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))
    _give_up_privileges(uid)
    os.chdir(workdir)


def _fork_into_pid_namespace() -> None:
    """Return in a process of the PID namespace joined, whose parent is the sandbox's init, as for the command
    bwrap runs (a parent outside would read as pid 0, and ``kill(getppid())`` would then signal the process's own
    group). The caller's child is in the namespace; it forks the returning process and ends at once, so that the
    namespace's init adopts it, and hands this process its pidfd first: this process, outside, ends when it does."""
    ours, theirs = socket.socketpair()
    child = os.fork()
    if child:
        theirs.close()
        _, pidfds, _, _ = socket.recv_fds(ours, 1, 1)
        os.waitpid(child, 0)
        if pidfds:
            select.select(pidfds, [], [])
        os._exit(0)
    ours.close()
    grandchild = os.fork()
    if grandchild:
        socket.send_fds(theirs, [b"."], [os.pidfd_open(grandchild)])
        os._exit(0)
    theirs.close()


def _same(one: str, other: str) -> bool:
    return os.stat(one).st_ino == os.stat(other).st_ino


def _give_up_privileges(uid: int | None) -> None:
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for capability in range(last + 1):
        _check(_libc.prctl(_PR_CAPBSET_DROP, ctypes.c_ulong(capability), 0, 0, 0), "dropping its capabilities")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable, twice (64 capabilities): none
    _check(_libc.capset(header, data), "clearing its capabilities")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0), "refusing new privileges")
