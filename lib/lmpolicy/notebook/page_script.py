"""A small script the kernel shows as an output, which JupyterLab runs in the page: the kernel's one way to act on
what the student sees. ``in_view`` brings a cell into view, ``save_request`` saves the notebook, ``answer_runs``
marks an answer whose cell is edited since it ran.

JupyterLab runs an ``application/javascript`` output the kernel has just made (it is trusted) with ``element``, the
output's node, before it puts that node in the page. ``show(body, **spec)`` wraps ``body`` so that it runs:

- once the node is in the page, with ``element``, ``spec`` and ``hide()``, which hides the output's (empty) area;
- once, though JupyterLab may render an output again;
- only for an output made since the page was loaded and in the last half minute: a notebook reopened with its
  outputs saved does nothing (a Run All's script saved with the notebook and reopened by the next test in a new
  page within the half minute took the view to the cell where that earlier run had stopped). Both compare the
  kernel's clock with the browser's: on a hub their machines' clocks must agree to a few seconds (NTP does).

Shown only in a kernel JupyterLab started for a notebook (jupyter_server names the notebook in
``JPY_SESSION_NAME``), never under nbgrader nor in a script or nbclient. Its text/plain is empty, so the grader's
feedback, which drops scripts, shows nothing of it.
"""
from __future__ import annotations

import json
import os
import time
import uuid

from lmpolicy.notebook import kernel

FRESH_SECONDS = 30  # an output older than this is a saved one, shown again when the notebook is reopened

WRAPPER = """
(function (element, spec) {
  const done = (window.lmpolicyPageScripts = window.lmpolicyPageScripts || new Set());
  // a saved output, shown again: made before this page was loaded, or longer ago than a live output takes to arrive
  if (done.has(spec.id) || spec.madeAt < performance.timeOrigin || Math.abs(Date.now() - spec.madeAt) > spec.freshMs) {
    return;
  }
  done.add(spec.id);
  let waited = 0;
  const inPage = () => {
    if (!element.isConnected) {
      if (waited++ < 100) setTimeout(inPage, 50);
      return;
    }
    const area = element.closest('.jp-OutputArea-child');
    const hide = () => { if (area) area.style.display = 'none'; };
/*BODY*/
  };
  inPage();
})(element, /*SPEC*/);
"""


def showing_in_jupyterlab() -> bool:
    """True in a kernel that JupyterLab started for a notebook, outside nbgrader."""
    return (kernel.shell() is not None and bool(os.environ.get("JPY_SESSION_NAME"))
            and not kernel.running_under_grader())


def script(body: str, spec: dict) -> str:
    """The JavaScript ``show`` displays: ``body`` wrapped, with ``spec`` (made now, with an id of its own)."""
    spec = {**spec, "id": uuid.uuid4().hex, "madeAt": time.time() * 1000, "freshMs": FRESH_SECONDS * 1000}
    return WRAPPER.replace("/*BODY*/", body).replace("/*SPEC*/", json.dumps(spec))


def show(body: str, **spec) -> bool:
    """Show ``body`` as a page script after the running cell's outputs; False (nothing shown) outside a kernel
    JupyterLab started for a notebook."""
    if not showing_in_jupyterlab():
        return False
    from IPython.display import display

    display({"application/javascript": script(body, spec), "text/plain": ""}, raw=True)
    return True
