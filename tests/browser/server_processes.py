"""The processes of a browser test's JupyterLab server, and how every one of them ends with the test run.

A server is `make lab` (or `make instructor`) started in a process group of its own: make, the shell of its
recipe, jupyter-lab. Its kernels start sessions of their own (jupyter_client does it so that an interrupt
reaches the kernel's children), so killing the group alone would leave them. ``end(pgid)`` therefore ends
the group and every descendant of it: SIGTERM first (the server shuts its kernels down), SIGKILL to what
is left after a grace period.

Three things call it: the fixture's finalizer (a normal end, or Ctrl-C: pytest tears fixtures down on
KeyboardInterrupt, and the conftest turns SIGTERM and SIGHUP into one), an atexit hook (a pytest that
exits without tearing down), and a watcher process started beside each server (``python server_processes.py
PGID`` with a pipe from the test process as its stdin) that ends the server when that pipe closes: when the
test process is gone however it went, SIGKILL included (an xdist worker killed by its controller).
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

GRACE_SECONDS = 20  # for jupyter-lab to shut its kernels down and close its port


def _processes() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, process group)} of every process /proc shows."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended while we looked
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (command) "
        state, ppid, pgrp = fields[0], int(fields[1]), int(fields[2])
        if state != "Z":  # a zombie has ended; only its parent's wait is missing
            found[int(entry.name)] = (ppid, pgrp)
    return found


def members(pgid: int) -> set[int]:
    """The live processes of group ``pgid`` and all their descendants, whatever group those are in."""
    processes = _processes()
    found = {pid for pid, (_, group) in processes.items() if group == pgid}
    grew = True
    while grew:
        children = {pid for pid, (parent, _) in processes.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return found


def _signal_all(pids: set[int], pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def end(pgid: int, grace: float = GRACE_SECONDS, reap=None) -> set[int]:
    """End group ``pgid`` and its descendants (kernels): SIGTERM, then SIGKILL after ``grace`` seconds.

    ``reap()`` is called while waiting (the starter's ``Popen.poll``, so that its child is no zombie);
    returns the pids that had to be killed."""
    targets = members(pgid)
    if not targets:
        return set()
    _signal_all(targets, pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        targets |= members(pgid)  # a kernel that started meanwhile
        left = targets & set(_processes())
        if not left:
            return set()
        time.sleep(0.2)
    left = (targets | members(pgid)) & set(_processes())
    _signal_all(left, pgid, signal.SIGKILL)
    return left


def watch(pgid: int) -> None:
    """Wait until stdin closes (the test process has ended, however), then end group ``pgid``."""
    while sys.stdin.buffer.read(1 << 16):
        pass
    end(pgid)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for pytest must not end the watcher first
    watch(int(sys.argv[1]))
