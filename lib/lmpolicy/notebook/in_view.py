"""What JupyterLab leaves out of the student's sight and the kernel brings into it: the cell where a run stopped,
and the progress bar of a long run.

JupyterLab 4.6's Run All makes the last cell the active one and scrolls to it as the run starts. When a cell
raises, the cells after it are cancelled and the view stays on that last, unrun cell, so nothing looks wrong until
the student scrolls up; and while a long cell trains, its progress bar runs far above the view. No setting of
JupyterLab changes either (a "jump to the most recent execution" button exists, shown on hovering the kernel
indicator, and it records timing metadata in every cell); only a labextension, which a student would have to build,
could. What the kernel can do is show a small script after the output concerned, which JupyterLab runs (an output
the kernel has just made is trusted, as the demos' scripts in ``lmpolicy.demos.accessible``):

- after a cell that raised (``install``: an IPython hook, once per kernel), the cell is brought into view when none
  of its output is in view: Run All stopped there, and its error (a check's ✗ lines) is what to read. A status
  line for screen readers says where the run stopped and the error's first line, and, when the keyboard is on
  the notebook (not typing in a cell), the cell becomes the active one;
- when a training run starts its progress bar (``lmpolicy.tinylm.runs``), its cell is brought into view when it is
  out of view while the view is where JupyterLab put it (on the active cell: the last one, on a Run All) or where
  an earlier bar put it, not where the student scrolled to read.

The script (``lmpolicy.notebook.page_script``) hides its own (empty) output and acts only on an output made in the
last half minute: a notebook reopened with its outputs saved does not jump.
"""
from __future__ import annotations

from lmpolicy.notebook import kernel, page_script

STOPPED = "stopped"  # a cell raised: the run stopped there
PROGRESS = "progress"  # a long run's progress bar started

BRING = """
  const bring = (cell) => {
    const scroller = cell && cell.closest('.jp-WindowedPanel-outer');
    if (!scroller) return;
    const outputs = cell.querySelector('.jp-Cell-outputWrapper') || cell;
    const seen = (node) => {
      const view = scroller.getBoundingClientRect(), box = node.getBoundingClientRect();
      return Math.min(box.bottom, view.bottom) - Math.max(box.top, view.top) >= Math.min(40, box.height);
    };
    if (seen(outputs)) return;
    if (spec.kind === 'progress') {  // only while the view is where JupyterLab or an earlier bar put it
      const active = scroller.querySelector('.jp-Cell.jp-mod-active');
      const ours = Math.abs(scroller.scrollTop - Number(scroller.dataset.lmpolicyTop)) < 4;
      if (active && !seen(active) && !ours) return;  // the student scrolled away to read: the view is theirs
    }
    const offset = () => {  // the cell a third down the view, the cells above it in sight (its output at the
      // top, when the cell is taller than the view)
      const view = scroller.getBoundingClientRect(), box = cell.getBoundingClientRect();
      if (box.height > view.height) return outputs.getBoundingClientRect().top - view.top - 8;
      return box.top - view.top - Math.max(8, Math.min(view.height / 3, view.height - box.height - 8));
    };
    let tries = 0;
    const settle = () => {  // cells drawn on the way change height: correct until the cell stays put
      const off = offset();
      if (Math.abs(off) > 2 && tries++ < 5) {
        scroller.scrollTop += off;
        requestAnimationFrame(() => requestAnimationFrame(settle));
      } else {
        scroller.dataset.lmpolicyTop = String(scroller.scrollTop);
      }
    };
    settle();
    if (spec.kind === 'stopped') stoppedAt(cell, scroller.closest('.jp-Notebook'));
  };
  const stoppedAt = (cell, notebook) => {
    // Said to a screen reader: where the run stopped, and the error's first line (a check's first ✗ line).
    const number = Number(cell.getAttribute('data-windowed-list-index')) + 1;
    const error = cell.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
    const words = error ? error.textContent.trim().split(/\\n/)[0] : '';
    let status = document.getElementById('lmpolicy-run-stopped');
    if (!status) {
      status = document.createElement('div');
      status.id = 'lmpolicy-run-stopped';
      status.setAttribute('role', 'status');
      status.style.cssText = 'position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);';
      document.body.appendChild(status);
    }
    status.textContent = 'The run stopped at cell ' + number + (words ? ': ' + words : '.');
    // The cell becomes the active one (Shift+Enter runs it again, k goes up to the answer), when the keyboard is
    // on this notebook and not typing in a cell: JupyterLab makes active the cell that takes the focus.
    const focused = document.activeElement;
    if (!notebook || !notebook.contains(focused) || focused.closest('.cm-editor, input, textarea, select')) return;
    // the first output shown: a page script's own output is hidden, and a hidden element takes no focus
    const output = [...cell.querySelectorAll('.jp-OutputArea-output')].find((node) => node.offsetParent !== null)
      || cell;
    output.setAttribute('tabindex', '-1');
    output.focus({ preventScroll: true });
    notebook.focus({ preventScroll: true });
    output.removeAttribute('tabindex');
  };
  hide();  // the script has nothing to show
  // After JupyterLab's own moves: a Run All scrolls to its last cell as it starts, and makes that cell the active
  // one again once its run is over (the cells after the one that raised cancelled), so a stopped run waits for that.
  const notebook = element.closest('.jp-Notebook');
  const running = () => notebook && [...notebook.querySelectorAll('.jp-InputPrompt')]
    .some((prompt) => prompt.textContent.includes('[*]'));
  let polls = 0;
  const when = () => {
    if (spec.kind === 'stopped' && running() && polls++ < 50) return setTimeout(when, 100);
    setTimeout(() => bring(element.closest('.jp-Cell')), 150);
  };
  when();
"""


def bring_into_view(kind: str) -> None:
    """Show, after the running cell's outputs, the script that brings the cell into view (``STOPPED`` or
    ``PROGRESS``: when, see the module's docstring); nothing outside a JupyterLab kernel."""
    if kind not in (STOPPED, PROGRESS):
        raise ValueError(f"kind must be {STOPPED!r} or {PROGRESS!r}, got {kind!r}")
    page_script.show(BRING, kind=kind)


def _after_cell(result) -> None:
    """IPython's post_run_cell: a cell that raised (an interrupt is the student's own stop) is brought into view."""
    error = result.error_in_exec or result.error_before_exec
    if error is not None and not isinstance(error, KeyboardInterrupt):
        bring_into_view(STOPPED)


def install() -> None:
    """Bring every cell that raises into view, once per kernel; nothing outside a JupyterLab kernel."""
    if not page_script.showing_in_jupyterlab():
        return
    shell = kernel.shell()
    if not getattr(shell, "_lmpolicy_in_view", False):
        shell.events.register("post_run_cell", _after_cell)
        shell._lmpolicy_in_view = True
