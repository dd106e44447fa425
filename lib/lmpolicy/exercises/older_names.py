"""The names a check cell finds in a notebook's module beyond its own: the names older copies of the notebook give
its exercises, and for any other name an AttributeError that says what the module holds.

An exercise is named after its answer in capitals (``TEMPERATURE_AT_TARGET`` checks ``temperature_at_target``), so
each renamed answer of ``name_advice.RENAMED`` renames its exercise alike: a check cell copied before the rename
(``nb02.TEMPERATURE_095.check(temperature_095)``) gets the exercise under its current name, which judges the value
it is passed as the current check cell's would be.
"""
from __future__ import annotations

import sys

from lmpolicy.exercises.exercise import Exercise
from lmpolicy.notebook.name_advice import RENAMED

# an exercise's name in an older copy of its notebook -> its name in the module
OLDER_EXERCISE_NAMES = {older.upper(): current.upper() for older, current in RENAMED.items()}


def exercise_names(module) -> list[str]:
    """The names under which ``module`` holds its exercises, in the order it declares them."""
    return [name for name, value in vars(module).items() if isinstance(value, Exercise) and not name.startswith("_")]


def module_getattr(module_name: str):
    """The module-level ``__getattr__`` (PEP 562) of the notebook's module ``module_name``: an exercise asked for
    under its older name is the exercise; any other missing name raises an AttributeError naming the module's
    exercises."""
    def __getattr__(name: str):
        module = sys.modules[module_name]
        current = OLDER_EXERCISE_NAMES.get(name)
        if current is not None and isinstance(vars(module).get(current), Exercise):
            return vars(module)[current]
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}: its exercises are "
                             f"{', '.join(exercise_names(module))}", name=name, obj=module)
    return __getattr__
