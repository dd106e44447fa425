"""One graded exercise, declared once, and what its checks do with the student's answer.

A notebook's module (``lmpolicy.exercises.nb01``) declares each of its exercises as an ``Exercise``: its key (the
grade ids' prefix), its visible checks, and the shortcuts that earn it nothing. A check cell reads
``nb01.SOFTMAX.check(softmax)``; the grader's hidden test of the same exercise calls the student's function through
``SOFTMAX.call``, so the two never disagree on what is blocked.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from lmpolicy.notebook import checks, forbidden
from lmpolicy.notebook.forbidden import Shortcuts
from lmpolicy.per_student import variants


@dataclass(frozen=True)
class Exercise:
    """``key``: the exercise's key (``nb01_softmax``, ``ex11_1a``, ``task2``); ``visible``: its visible checks,
    called as ``visible(exercise, *answers)`` with the student's names in the order the check cell passes them;
    ``forbids``: the library functions, torch names and name pattern that compute its quantity (a varying
    exercise forbids its answer key as well, see ``shortcuts``); ``part``: for an exercise checked in more than
    one cell (Lab Task 4), which cell's checks these are, each part declared with the same ``forbids``."""

    key: str
    visible: Callable[..., None] = field(repr=False)
    forbids: Shortcuts = Shortcuts()
    part: str | None = None

    @property
    def varies(self) -> bool:
        """Whether every student gets their own numbers (``lmpolicy.per_student.variants`` holds how)."""
        return self.key in variants.VARYING

    @property
    def shortcuts(self) -> Shortcuts:
        """What earns nothing while this exercise is checked: ``forbids``, and for a varying exercise the
        per-student answer key."""
        if not self.varies or forbidden.ANSWER_KEY in self.forbids.library:
            return self.forbids
        return replace(self.forbids, library=(*self.forbids.library, forbidden.ANSWER_KEY))

    def check(self, *answers) -> None:
        """The visible checks on the student's ``answers`` (refused, not judged, when one is left from a run of its
        cell that raised: ``checks.answers_from_finished_runs``); when they all pass, say so and record it."""
        checks.checking(self.key)
        checks.answers_from_finished_runs(*answers)
        self.visible(self, *answers)
        checks.done(self.key)

    def call(self, fn, *args, **kwargs):
        """The student's ``fn`` called as ``checks.call_student`` calls it, with this exercise's shortcuts
        blocked."""
        with forbidden.blocked(self.shortcuts):
            return checks.call_student(fn, *args, **kwargs)

    def call_hinting(self, hint: str, fn, *args, **kwargs):
        """``call``; when the student's code raises, the failure carries ``hint`` (what usually makes it raise).
        The stub's "not written yet" stays as it is: it needs no hint."""
        try:
            return self.call(fn, *args, **kwargs)
        except checks.StudentCodeRaised as error:
            if error.__cause__ is None:
                raise
            raise checks.StudentCodeRaised(error.problem, hint) from error.__cause__

    def blocked(self):
        """A context in which this exercise's shortcuts earn nothing (for checks that call the student's code
        in ways ``call`` does not cover)."""
        return forbidden.blocked(self.shortcuts)


def numbers(namespace, names) -> dict[str, float]:
    """The student's answers ``names``, each checked to be one number, read from the check cell's ``namespace``
    (its ``globals()``): a name the student never made reads None, and the check says the answer is a stub. The
    names stay strings, outside the cell's code: the code rule's tested names (``lmpolicy.notebook.code_rule``) are
    the names a check cell's code reads, and these answers may be made by any assignment, tuple unpacking
    included. An answer whose cell raised the last time it ran is refused, not judged."""
    checks.answers_from_finished_runs(names=names, namespace=namespace)
    return {name: checks.check_number(namespace.get(name), name) for name in names}
