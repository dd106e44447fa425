"""What both demos share: widgets built on first use, ``show()`` that stays quiet under the grader,
how their readouts print numbers, and how their text and tables are set.

Building ipywidgets opens comms to the front end, so a demo builds nothing until ``widget`` or
``show()`` is used; its numbers (``readouts()``) are there from the constructor on. While nbgrader
executes a notebook (it sets NBGRADER_EXECUTION), ``show()`` prints one line and builds nothing.
"""
from __future__ import annotations

import os

GRADER_NOTE = "(interactive demo skipped: it only runs in JupyterLab, not under the grader)"

# ipywidgets sets the text of an HTML widget in 28 px lines (the height of a control); the demos'
# captions and tables use ordinary line spacing, so that they take half the height. Tables never
# break a cell over two lines: each is made narrow enough for a laptop's output area instead.
LINE_HEIGHT = 1.3
TABLE_STYLE = f"line-height: {LINE_HEIGHT}; white-space: nowrap"


def text_block(html: str, note: bool = False) -> str:
    """``html`` as a block of text with ordinary line spacing; ``note``: in a smaller, grey type,
    for the explanations below a demo's controls and pictures."""
    style = f"line-height: {LINE_HEIGHT}" + ("; font-size: 0.92em; color: #555" if note else "")
    return f"<div style='{style}'>{html}</div>"


def running_under_grader() -> bool:
    """True while nbgrader executes the notebook (it sets NBGRADER_EXECUTION)."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


class WidgetDemo:
    """Base class: subclasses implement ``_build_widget()`` returning one ipywidgets box."""

    _widget = None

    def _build_widget(self):
        raise NotImplementedError

    @property
    def widget(self):
        """The whole demo as one ipywidgets box (built on first use)."""
        if self._widget is None:
            self._widget = self._build_widget()
        return self._widget

    def show(self) -> None:
        """Display the demo in the notebook (under the grader: print a one-line note instead)."""
        if running_under_grader():
            print(GRADER_NOTE)
            return
        from IPython.display import display

        display(self.widget)


def format_number(value: float, digits: int, *, signed: bool = False) -> str:
    """``value`` with ``digits`` decimals (``signed``: with an explicit + or -), never a signed zero.

    A value that rounds to zero prints as plain ``0.0000``: "-0.0000" would suggest a sign that the
    shown digits cannot back up (an exact bias of -3e-17 is rounding noise, not a negative bias).
    """
    text = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    if float(text) == 0.0:
        return f"{0.0:.{digits}f}"
    return text
