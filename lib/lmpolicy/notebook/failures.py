"""A failed check as the student reads it: ``CheckFailed`` and its kinds, shown as a few lines, never a traceback.

Every failure is a ``CheckFailed`` (an ``AssertionError``) whose first line says what is wrong in plain words.
It implements IPython's ``_render_traceback_``, which the kernel uses for the error output, so the student's
notebook, nbgrader's Validate and the feedback all show the same short message: a heading ("✗ Check failed:"),
the message, the student's own frames when their code raised, and the hint.
"""
from __future__ import annotations

import builtins

from lmpolicy.notebook.student_frames import student_frame_lines
from lmpolicy.notebook.verdict_lines import wrapped

MAX_SHOWN_LINES = 8     # a failed check shows at most this many lines: message, the student's frames, hint
MAX_HINT_LINES = 2
MAX_STUDENT_FRAMES = 2  # the innermost frames of the student's code that raised
RED, BOLD, RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"


def verdict_line(heading: str, text: str) -> str:
    """One verdict's first line as every check prints it: a red "✗ <heading>:", then ``text``."""
    return f"{RED}{BOLD}\u2717 {heading}:{RESET} {text}"


class CheckFailed(AssertionError):
    """A check failed; the message's first line says what is wrong.

    ``problem`` is the message without the hint, ``hint`` the hint or None.
    """

    heading = "Check failed"

    def __init__(self, message: str = "", hint: str | None = None):
        super().__init__(message if hint is None else f"{message}\nHint: {hint}")
        self.problem, self.hint = message, hint

    def _details(self) -> list[str]:
        """Lines shown between the message and the hint (the student's frames, for StudentCodeRaised)."""
        return []

    def first_line(self) -> str:
        """The verdict in one line, in the words the check shows: "Check failed: softmax(...) is off ..."."""
        problem = getattr(self, "problem", None)
        lines = (str(self) if problem is None else problem).strip().splitlines()
        return f"{self.heading}: {lines[0]}" if lines else self.heading

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback: the message, the details and the hint, in a few lines."""
        problem = getattr(self, "problem", None)
        problem = str(self) if problem is None else problem
        hint = getattr(self, "hint", None)
        hint_lines = hint.strip().splitlines()[:MAX_HINT_LINES] if hint else []
        details = self._details()
        lines = problem.strip().splitlines() or [type(self).__name__]
        room = max(1, MAX_SHOWN_LINES - len(details) - len(hint_lines))
        if len(lines) > room:
            lines = lines[:room - 1] + [f"... ({len(lines) - room + 1} more lines)"] if room > 1 else lines[:1]
        shown = [verdict_line(self.heading, lines[0]), *lines[1:], *details]
        if hint_lines:
            shown += [f"{BOLD}Hint:{RESET} {hint_lines[0]}", *hint_lines[1:]]
        return wrapped(shown)


class StudentCodeRaised(CheckFailed):
    """The student's function raised an exception (kept as ``__cause__``)."""

    @property
    def heading(self) -> str:  # a stub that is not written yet raised nothing of the student's own
        return "Your code raised an error" if self.__cause__ is not None else "Check failed"

    def _details(self) -> list[str]:
        cause = self.__cause__
        if cause is None:
            return []
        if raised_under_the_grader(cause):  # its message and lines stayed in the submission's process
            return [WHERE_IT_RAISED] if getattr(cause, "from_the_submission", False) else []
        remote = getattr(cause, "remote_frames", None)  # a failure of the channel: no frames of the student's
        if isinstance(remote, list):
            return remote[-MAX_STUDENT_FRAMES:]
        return student_frame_lines(cause, MAX_STUDENT_FRAMES)


class LibraryShortcutUsed(CheckFailed):
    """The student's code called the library function the exercise asks them to write."""

    heading = "Not allowed"


# Under the grader the student's function runs in the submission's process, which holds the hidden inputs it was
# called with: its exception's message, its frames and the name of a class of its own can carry them. A verdict
# made there names a builtin exception's type and nothing else of it (the trusted side never receives the rest),
# and says where to see the whole of it: the same check in the student's own notebook, which quotes it.
BUILTIN_EXCEPTIONS = frozenset(name for name, value in vars(builtins).items()
                               if isinstance(value, type) and issubclass(value, BaseException))
WHERE_IT_RAISED = "  (its message and line: run this check in your notebook)"


def shown_exception(name: str) -> str:
    """How a verdict made under the grader names an exception of the student's code: a builtin's name, else
    "an exception" (a class of the student's own can be named after anything it recorded)."""
    return name if name in BUILTIN_EXCEPTIONS else "an exception"


def raised_under_the_grader(error: BaseException) -> bool:
    """An exception the trusted side made for one raised in the submission's process or by its channel."""
    return isinstance(getattr(error, "remote_frames", None), list)
