"""Typical wrong answers, one module per notebook (``nb01.py`` ... ``nb08.py``, each a list ``WRONG_ANSWERS``).

For each ``WrongAnswer``, the notebook with ``source`` in place of the answer cell ``cell`` must fail
the hidden tests of ``exercise``, while the reference solution passes. Each is tagged by ``kind``:

- ``PITFALL``: a mistake the exercise's text warns about or that students typically make; the
  *visible* check must fail on it too, in at most a few lines, with a message containing ``names``
  (a phrase, matched case-insensitively), so the student learns of it at once;
- ``BREADTH``: a mistake only the hidden tests need to catch (other shapes, dtypes, edge cases);
- ``FROM_DEMO``: right numbers, taken from a demo object in the answer cell. In the student's
  JupyterLab it passes; under nbgrader (``nbgrader validate`` and grading alike) the demo hands out no
  numbers, so the answer cell itself fails with the demo's message, containing ``names``, and the exercise
  scores 0 with that message in the feedback.
tests/notebooks/test_wrong_answers.py runs them; ``python -m lmpolicy_grader examples`` places them as example
submissions.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from enum import StrEnum

from lmpolicy.notebook.catalogue import exercise_key


# the phrase a FROM_DEMO answer's message holds: what a demo says when asked for numbers under nbgrader
DEMO_MESSAGE = "the demo is not there while your notebook is graded"


class Kind(StrEnum):
    PITFALL = "pitfall"
    BREADTH = "breadth"
    FROM_DEMO = "from_demo"


@dataclass(frozen=True)
class WrongAnswer:
    notebook: str  # e.g. "01_policy_softmax" (source/ch11/<notebook>.ipynb)
    cell: str      # grade_id of the answer cell it replaces, e.g. "ex11_1a__sequence_logprob"
    source: str    # the full replacement cell source
    why: str       # the mistake, in words
    kind: Kind | None = None  # PITFALL, BREADTH or FROM_DEMO; tests/notebooks/test_wrong_answers.py requires one
    names: str | None = None  # PITFALL: a phrase the visible check's message must contain; FROM_DEMO: the demo's

    @property
    def exercise(self) -> str:
        """The exercise whose hidden tests must fail, e.g. "ex11_1a" (from the cell's grade id)."""
        return exercise_key(self.cell)


def _collect() -> list[WrongAnswer]:
    answers: list[WrongAnswer] = []
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("nb")):
        answers.extend(importlib.import_module(f"{__name__}.{module}").WRONG_ANSWERS)
    return answers


WRONG_ANSWERS: list[WrongAnswer] = _collect()
