"""What the deployment tests start or change is undone when the run ends, however it ends.

Fixtures undo their own work in their finalizers; that covers a run that ends normally or on Ctrl-C (pytest
turns SIGINT into KeyboardInterrupt and still tears its fixtures down). It does not cover SIGTERM or SIGHUP
(a CI job cancelled, a terminal closed), which end Python at once, nor an exception between a start and
the fixture that would stop it. So every start registers its undoing here, first thing:

    undo = cleanup.register("the hub", lambda: stop_the_hub())
    ...
    cleanup.done(undo)          # undone normally by its owner

Whatever is still registered when the process exits (atexit), or when it gets SIGTERM or SIGHUP (then the
signal is raised again with its default action, so the exit status still says what killed the run), is
undone here, newest first, each once. What SIGKILL leaves behind, the next run removes (hub.py's stale
accounts, ACL entries of accounts that no longer exist).
"""
from __future__ import annotations

import atexit
import itertools
import os
import signal
import sys
import threading
from typing import Callable

_pending: dict[int, tuple[str, Callable[[], None]]] = {}
_numbers = itertools.count()
_lock = threading.RLock()
_installed = False


def register(what: str, undo: Callable[[], None]) -> int:
    """Keep ``undo`` to be called if the run ends before ``done`` is called with the number returned."""
    _install()
    with _lock:
        number = next(_numbers)
        _pending[number] = (what, undo)
        return number


def done(number: int) -> None:
    """``undo`` of that registration was run by its owner (or is not needed): forget it."""
    with _lock:
        _pending.pop(number, None)


def undo_everything() -> None:
    """Run every registered undo, newest first, each once; an undo that fails is reported, the rest still run."""
    while True:
        with _lock:
            if not _pending:
                return
            number = max(_pending)
            what, undo = _pending.pop(number)
        try:
            undo()
        except BaseException as error:  # noqa: BLE001 (at exit: say it, go on with the rest)
            print(f"deployment tests: could not undo {what}: {error!r}", file=sys.stderr)


def _on_signal(signum, frame):
    undo_everything()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        atexit.register(undo_everything)
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(signum) in (signal.SIG_DFL, None):
                    signal.signal(signum, _on_signal)
        _installed = True


_install()  # at import (the main thread of the run), so that a signal before the first start is caught too
