"""The kernel asks JupyterLab to save its notebook, so that what the kernel reads from the file is what the student
sees on the page (a written answer typed a moment ago).

The kernel sees the notebook only as last saved. JupyterLab exposes no API to its kernels, and its application object
reaches the page only with the server option ``expose_app_in_browser``; but an output the kernel has just made is
trusted, so a small script output can press JupyterLab's own save key (Accel+S, the keybinding of
``docmanager:save``, which saves the notebook the student is working in, edited or not). The kernel then waits a few
seconds, while the cell runs, for the file to change and read whole: Jupyter's server writes a notebook in place
(its "atomic" writing keeps a copy to restore on an error, not a file renamed over), so a file seen changed can
still be half written. The script and the save go through the page and the server, never through the busy kernel. Shown only in a kernel JupyterLab started
for a notebook, never under nbgrader (``lmpolicy.notebook.page_script``).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from lmpolicy.notebook import page_script

WAIT_SECONDS = 5.0  # a save on a busy 2-core machine takes well under a second; the student waits at most this
POLL_SECONDS = 0.1
PRESS_SAVE = """
  hide();  // the script has nothing to show
  const mac = /Mac|iPhone|iPad/.test(navigator.platform);
  const press = new KeyboardEvent('keydown', { key: 's', code: 'KeyS', keyCode: 83, which: 83, ctrlKey: !mac,
                                               metaKey: mac, bubbles: true, cancelable: true });
  // JupyterLab's key bindings read keyCode, which not every browser takes from the event's options
  if (press.keyCode !== 83) Object.defineProperty(press, 'keyCode', { get: () => 83 });
  element.dispatchEvent(press);
"""


def _stamp(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _whole(path: Path) -> bool:
    """True when the file reads as a complete JSON document (a notebook the server has finished writing)."""
    try:
        json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return True


def save_notebook(path: Path | None, wait_seconds: float | None = None) -> bool:
    """Ask JupyterLab to save the notebook ``path`` (this kernel's) and wait until the file has changed and reads
    whole: True once it does, False when it does not within ``wait_seconds`` (default ``WAIT_SECONDS``) or nothing
    could ask (no notebook, not JupyterLab)."""
    if path is None:
        return False
    before = _stamp(path)
    if not page_script.show(PRESS_SAVE):
        return False
    deadline = time.monotonic() + (WAIT_SECONDS if wait_seconds is None else wait_seconds)
    while time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        if _stamp(path) != before and _whole(path):
            return True
    return False
