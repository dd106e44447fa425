"""What both demos share: widgets built on first use, ``show()`` that stays quiet under the grader,
and how their readouts print numbers.

Building ipywidgets opens comms to the front end, so a demo builds nothing until ``widget`` or
``show()`` is used; its numbers (``readouts()``) are there from the constructor on. While nbgrader
executes a notebook (it sets NBGRADER_EXECUTION), ``show()`` prints one line and builds nothing.
"""
from __future__ import annotations

import os

GRADER_NOTE = "(interactive demo skipped: it only runs in JupyterLab, not under the grader)"


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
