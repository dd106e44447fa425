"""What both demos share: widgets built on first use, and ``show()`` that stays quiet under the grader.

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
