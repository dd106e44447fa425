"""The order a class's notebooks are handed to the workers: the longest first, as the last grading timed them.

Each worker takes the next notebook when it is done with one, so whatever starts last decides how long the
others stand idle at the end. Graded student by student, the last student's notebook 08 (about 13 s in the
grader, the others 2-3 s) would start last, and one worker would grade it while the rest wait. Handing out
the longest first (the LPT rule) leaves only short notebooks for the end.

How long a notebook will take is read from the last grading (``grading_status.json``): that student's own
notebook's time if it was graded before (a slow answer stays slow), else the median over the students
whose same notebook was; a notebook never timed goes first, as it may be the longest. With no times at all
(a course's first grading) the order stays student by student, notebook by notebook.
"""
from __future__ import annotations

import math
from statistics import median

from lmpolicy_grader.class_grading.course import Outcome

Unit = tuple[str, str]  # (student, notebook)


def longest_first(units: list[Unit], history: list[Outcome]) -> list[Unit]:
    """``units`` ordered by their expected grading time, longest first (ties keep their order)."""
    timed = {(o.student, o.notebook): o.seconds for o in history if o.seconds > 0}
    if not timed:
        return list(units)
    by_notebook: dict[str, list[float]] = {}
    for (_, notebook), seconds in timed.items():
        by_notebook.setdefault(notebook, []).append(seconds)
    typical = {notebook: median(seconds) for notebook, seconds in by_notebook.items()}

    def expected(unit: Unit) -> float:
        return timed.get(unit, typical.get(unit[1], math.inf))

    return sorted(units, key=expected, reverse=True)
