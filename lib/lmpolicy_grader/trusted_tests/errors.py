"""What the trusted tests raise when the submission's side does not give a usable answer."""
from __future__ import annotations

from lmpolicy.notebook import checks


class ChannelError(Exception):
    """The submission's side of the channel did not give a usable answer (the message says how)."""

    remote_frames: list[str] = []  # no frames of the grader's own shown as the student's


class InputChanged(ChannelError):
    """The submission's function changed one of the inputs the test gave it."""


class CallTimedOut(ChannelError):
    """The submission's function did not return within the cell's time."""


class SubmissionRaised(Exception):
    """Base of the exceptions that stand for one the submission's function raised: named after its type when that is
    a builtin exception (``checks.BUILTIN_EXCEPTIONS``), with no message and no frames."""

    remote_frames: list[str] = []
    from_the_submission = True  # checks.call_student names it by checks.shown_exception and says where to see the rest


_RAISED_CLASSES: dict[str, type] = {}


def submission_exception(kind: str) -> Exception:
    """What the submission's function raised, as the trusted tests hold it. Only its type's name crosses, and only a
    builtin's: its message, its frames and the name of a class of its own are the submission's text, written while
    it held the hidden inputs it was called with, and a verdict quoting them would show those in the feedback."""
    if kind == "NotImplementedError":
        return NotImplementedError()
    name = kind if isinstance(kind, str) and kind in checks.BUILTIN_EXCEPTIONS else "SubmissionRaised"
    cls = _RAISED_CLASSES.setdefault(name, SubmissionRaised if name == "SubmissionRaised"
                                     else type(name, (SubmissionRaised,), {"__module__": "submission"}))
    return cls()
