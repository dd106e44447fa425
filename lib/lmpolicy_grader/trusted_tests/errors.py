"""What the trusted tests raise when the submission's side does not give a usable answer."""
from __future__ import annotations

from lmpolicy import checks


class ChannelError(Exception):
    """The submission's side of the channel did not give a usable answer (the message says how)."""

    remote_frames: list[str] = []  # no frames of the grader's own shown as the student's


class InputChanged(ChannelError):
    """The submission's function changed one of the inputs the test gave it."""


class CallTimedOut(ChannelError):
    """The submission's function did not return within the cell's time."""


class SubmissionRaised(Exception):
    """Base of the exceptions that stand for one the submission's function raised (same class name)."""

    remote_frames: list[str] = []


_RAISED_CLASSES: dict[str, type] = {}


def submission_exception(kind: str, message: str, frames: list[str]) -> Exception:
    if kind == "NotImplementedError":
        return NotImplementedError(message)
    name = kind if isinstance(kind, str) and kind.isidentifier() and len(kind) <= 60 else "Exception"
    cls = _RAISED_CLASSES.setdefault(name, type(name, (SubmissionRaised,), {"__module__": "submission"}))
    error = cls(message)
    error.remote_frames = [str(line)[:200] for line in frames[:checks.MAX_STUDENT_FRAMES]] if isinstance(frames, list) else []
    return error
