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

``remount_read_only`` enters a sandbox's mount namespace only, from a fresh process of the grader's, to make a folder
read-only there once the kernel needs to write it no more (``Sandbox.seal``); outside the sandbox it stays as it is.

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
import subprocess
import sys
import time
from pathlib import Path

HOLDER = ["/bin/sleep", "infinity"]
# Joined in this order, the mount namespace last (after it, the host's /proc, where the others are found, is out of
# view); before them the user namespace that owns them, after them the holder's own (bwrap nests one in the other).
NAMESPACES = ("ipc", "uts", "net", "cgroup", "pid", "mnt")
_NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace
_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 24, 38
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND = 1, 32, 4096
# A remount keeps these (nosuid, nodev, noexec and the atime flags, which statvfs reports with mount's own bits).
_KEPT_MOUNT_FLAGS = 2 | 4 | 8 | 1024 | 2048 | 4096
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


def sandbox_process(bwrap_pid: int) -> int:
    """A process inside the sandbox that ``bwrap_pid`` (bwrap, or a command that execs it) made: its child in
    another mount namespace than this process's (bwrap's init there)."""
    ours = os.stat("/proc/self/ns/mnt").st_ino
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[1]) == bwrap_pid and os.stat(f"/proc/{entry}/ns/mnt").st_ino != ours:
                return int(entry)
        except (OSError, ValueError):
            continue  # ended meanwhile
    raise EnteringFailed(f"entering the sandbox: bwrap (process {bwrap_pid}) runs no sandbox")


def remount_read_only(bwrap_pid: int, path: str) -> None:
    """Make the mount point ``path`` read-only in the sandbox that ``bwrap_pid`` made, for every process in it, and
    not outside. A fresh process does it (joining a user namespace needs a single-threaded caller, and an exec
    after it would lose the capabilities it gives): ``_remount_read_only_here``."""
    done = subprocess.run([sys.executable, "-c", "from lmpolicy_grader.isolation.entering import _remount_read_only_here; "
                                                 f"_remount_read_only_here({sandbox_process(bwrap_pid)}, {path!r})"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        said = (done.stderr.strip() or "no message").splitlines()[-1]
        raise EnteringFailed(f"entering the sandbox: making {path} read-only there failed: {said}")


def _remount_read_only_here(inside_pid: int, path: str) -> None:
    """In a fresh process: join the mount namespace of ``inside_pid`` (first the user namespace that owns it, where
    the grader is not root) and remount ``path`` read-only there, keeping its other flags."""
    mount_namespace = os.open(f"/proc/{inside_pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    owner = fcntl.ioctl(mount_namespace, _NS_GET_USERNS)
    if os.fstat(owner).st_ino != os.stat("/proc/self/ns/user").st_ino:
        _check(_libc.setns(owner, _CLONE_NEWUSER), "joining the user namespace that owns it")
    _check(_libc.setns(mount_namespace, _CLONE_NEWNS), "joining its mount namespace")
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | (os.statvfs(path).f_flag & _KEPT_MOUNT_FLAGS)
    _check(_libc.mount(None, path.encode(), None, ctypes.c_ulong(flags), None), f"remounting {path} read-only")


def enter(holder_pid: int, workdir: str, uid: int | None, cgroup_folders: list[Path],
          limits: dict[str, int]) -> None:
    """Make this (single-threaded) process a process of the sandbox that ``holder_pid`` runs in; returns in a
    child inside its PID namespace (see the module's docstring). ``limits``: {"AS": bytes, "CPU": seconds,
    "NPROC": processes, "FSIZE": bytes, "CORE": bytes}, as ``prlimit --as --cpu --nproc --fsize --core`` take them
    (``Sandbox.limits`` and the kernel's own)."""
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
