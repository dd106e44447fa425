"""What both demos share: widgets built on first use, no numbers under the grader, how their readouts
print numbers, and how their text and tables are set.

Building ipywidgets opens comms to the front end, so a demo builds nothing until ``widget`` or
``show()`` is used; its numbers (``readouts()``) are there from the constructor on.

While nbgrader executes a notebook (it sets NBGRADER_EXECUTION: ``nbgrader validate`` and grading alike)
a demo is a stand-in: it can be made and ``show()`` prints one line, but it computes nothing, and every
other public method or attribute raises ``DemoNotAvailableWhileGrading``. In the grading sandbox the
solvers behind the demos are not there at all, so an answer taken from a demo would score nothing;
refusing under Validate too tells the student so before they hand in, in words they can act on.
"""
from __future__ import annotations

import functools

from lmpolicy.notebook.failures import CheckFailed
from lmpolicy.notebook.kernel import running_under_grader  # noqa: F401  (notebooks import it from here)

GRADER_NOTE = "(interactive demo skipped: it only runs in JupyterLab, not under the grader)"

# ipywidgets sets the text of an HTML widget in 28 px lines (the height of a control); the demos'
# captions and tables use ordinary line spacing, so that they take half the height. Tables never
# break a cell over two lines: each is made narrow enough for a laptop's output area instead.
LINE_HEIGHT = 1.3
TABLE_STYLE = f"line-height: {LINE_HEIGHT}; white-space: nowrap"


# Text takes JupyterLab's theme colours (legible in the light and the dark theme alike, at AA contrast); a
# series' colour is shown by a swatch beside its name, never as the colour of text (some series colours fall
# under 3:1 against one theme or the other).
NOTE_COLOR = "var(--jp-content-font-color1)"


def text_block(html: str, note: bool = False) -> str:
    """``html`` as a block of text with ordinary line spacing; ``note``: in a smaller type, for the
    explanations below a demo's controls and pictures."""
    style = f"line-height: {LINE_HEIGHT}" + (f"; font-size: 0.92em; color: {NOTE_COLOR}" if note else "")
    return f"<div style='{style}'>{html}</div>"


def swatch(color: str, line: str | None = None, marker: str = "", hatch: bool = False) -> str:
    """A small picture of a series, to put before its name: a filled square (a bar: ``hatch`` for a
    hatched one), or a line of style ``line`` ("solid", "dashed", "dotted", "dashdot") with ``marker``
    drawn on it. Hidden from screen readers: the name beside it says which series it is."""
    if line is None:
        fill = (f"repeating-linear-gradient(45deg, {color} 0 2px, transparent 2px 4px)" if hatch else color)
        return (f"<span aria-hidden='true' style='display:inline-block; width:0.8em; height:0.8em; "
                f"background:{fill}; border:1px solid {color}; vertical-align:-0.05em'></span>")
    dashes = {"solid": "", "dashed": "5 3", "dotted": "1.5 2.5", "dashdot": "6 2.5 1.5 2.5"}[line]
    dot = ""
    if marker == "o":
        dot = f"<circle cx='12' cy='5' r='3.2' fill='{color}'/>"
    elif marker == "s":
        dot = f"<rect x='9' y='2' width='6' height='6' fill='{color}'/>"
    elif marker == "D":
        dot = f"<polygon points='12,1.5 15.5,5 12,8.5 8.5,5' fill='{color}'/>"
    elif marker == "open":
        dot = f"<circle cx='12' cy='5' r='3' fill='white' stroke='{color}' stroke-width='1.5'/>"
    return (f"<svg aria-hidden='true' width='24' height='10' style='vertical-align:0'>"
            f"<line x1='0' y1='5' x2='24' y2='5' stroke='{color}' stroke-width='2' stroke-dasharray='{dashes}'/>"
            f"{dot}</svg>")


class DemoNotAvailableWhileGrading(CheckFailed):
    """Code asked a demo for numbers while nbgrader runs the notebook, where the demo is not there."""

    heading = "Not there while grading"


def _cell_number() -> int | None:
    """The execution count of the cell IPython runs now (None outside IPython)."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "execution_count", None)


# The demos' refusals in this process: (the cell that ran, the error); the answer's check cell reads it.
_refused: list[tuple[int | None, DemoNotAvailableWhileGrading]] = []


def refusal_text(demo: str, used: str) -> tuple[str, str]:
    """The refusal's message and hint."""
    # short lines: ``nbgrader validate`` shows each line of an error cut at 83 characters
    return (f"your answer used {demo}.{used}\n"
            f"The demo is not there while your notebook is graded, so that answer scores 0.",
            "read the numbers off the demo in JupyterLab and type them in\n"
            "(or compute them with your own functions).")


def refusal(demo: str, used: str) -> DemoNotAvailableWhileGrading:
    """The error for ``used`` (e.g. "readouts()") of the demo class named ``demo``, under the grader,
    recorded for ``check_answer_not_from_demo``."""
    error = DemoNotAvailableWhileGrading(*refusal_text(demo, used))
    _refused[:] = [(_cell_number(), error)]
    return error


def check_answer_not_from_demo() -> None:
    """In an exercise's check cell: raise the demo's refusal again if the cell run just before it (the
    answer cell) asked a demo for numbers under the grader.

    ``nbgrader validate`` shows only the check cells' errors, so without this the student would read that
    the answer "is None" instead of why. (While grading, the checks run in a kernel of their own: there
    the answer cell's own error carries the message into the feedback.)
    """
    current = _cell_number()
    if _refused and current is not None and _refused[0][0] == current - 1:
        raise _refused[0][1]


def _refusing_under_grader(function, used: str):
    """``function`` (a method or a property's getter) raising ``refusal`` on a demo made under the grader."""
    @functools.wraps(function)
    def guarded(self, *args, **kwargs):
        if self.__dict__.get("_grading_stand_in"):
            raise refusal(type(self).__name__, used)
        return function(self, *args, **kwargs)
    return guarded


ALLOWED_WHILE_GRADING = frozenset({"show"})  # the public members of a demo that hand out no numbers


def _guard_public_members(cls) -> None:
    """Wrap every public method and property ``cls`` defines itself (but ``ALLOWED_WHILE_GRADING``)."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") or name in ALLOWED_WHILE_GRADING:
            continue
        if isinstance(member, property):
            setattr(cls, name, property(_refusing_under_grader(member.fget, name),
                                        member.fset, member.fdel, member.__doc__))
        elif callable(member) and not isinstance(member, (type, staticmethod, classmethod)):
            setattr(cls, name, _refusing_under_grader(member, f"{name}()"))


class WidgetDemo:
    """Base class: subclasses implement ``_build_widget()`` returning one ipywidgets box.

    A subclass's ``__init__`` starts with ``if self._stand_in_under_grader(): return``: under the grader
    the demo then computes nothing, and each public member the subclass defines (wrapped when the class
    is made), or a public attribute it never set, raises ``DemoNotAvailableWhileGrading``.
    """

    _widget = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _guard_public_members(cls)

    def _stand_in_under_grader(self) -> bool:
        """True (and this demo a stand-in that computes nothing) while nbgrader runs the notebook."""
        self._grading_stand_in = running_under_grader()
        return self._grading_stand_in

    def __getattr__(self, name: str):
        # only for attributes not found otherwise: the state a stand-in never computed
        if not name.startswith("_") and self.__dict__.get("_grading_stand_in"):
            raise refusal(type(self).__name__, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _build_widget(self):
        raise NotImplementedError

    @property
    def widget(self):
        """The whole demo as one ipywidgets box (built on first use)."""
        if self._widget is None:
            self._widget = self._build_widget()
        return self._widget

    # What the demo's front end must say beyond ipywidgets (lmpolicy.demos.accessible): set by each demo.
    _ACCESSIBLE = None

    def show(self) -> None:
        """Display the demo in the notebook (under the grader: print a one-line note instead), and the
        script that names its controls for keyboard and screen-reader users (``lmpolicy.demos.accessible``)."""
        if running_under_grader():
            print(GRADER_NOTE)
            return
        from IPython.display import display

        from lmpolicy.demos.accessible import front_end

        display(self.widget)
        if self._ACCESSIBLE is not None:
            display(front_end(self._ACCESSIBLE))


_guard_public_members(WidgetDemo)  # ``widget``: a stand-in builds no widgets


def format_number(value: float, digits: int, *, signed: bool = False) -> str:
    """``value`` with ``digits`` decimals (``signed``: with an explicit + or -), never a signed zero.

    A value that rounds to zero prints as plain ``0.0000``: "-0.0000" would suggest a sign that the
    shown digits cannot back up (an exact bias of -3e-17 is rounding noise, not a negative bias).
    """
    text = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    if float(text) == 0.0:
        return f"{0.0:.{digits}f}"
    return text


def hidden_html(value: str = ""):
    """An HTML widget in the page, read by screen readers, but out of sight: no height, its overflow hidden
    (not display: none, which would hide it from screen readers too)."""
    import ipywidgets as w

    return w.HTML(value, layout=w.Layout(height="0px", overflow="hidden", margin="0"))


def spoken_readout(css_class: str):
    """An HTML widget for the sentence a screen reader says after each change of a demo (a polite live
    region, ``lmpolicy.demos.accessible``), out of sight (``hidden_html``): the tables beside the pictures
    already show its numbers."""
    widget = hidden_html()
    widget.add_class(css_class)
    return widget
