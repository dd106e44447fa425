"""Every declared exercise of the chapter, found in the notebooks' modules of ``lmpolicy.exercises``.

What reads the declarations as a whole (the grader's library view, the no-credit rule's tests, the command that
checks a notebook is complete) reads them here, by key.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from functools import lru_cache

import lmpolicy.exercises
from lmpolicy.exercises.exercise import Exercise

_NOTEBOOK_MODULE = re.compile(r"nb\d\d")


def notebook_modules() -> dict[str, object]:
    """``"nb01"`` -> its module, for every notebook that has one."""
    return {info.name: importlib.import_module(f"lmpolicy.exercises.{info.name}")
            for info in pkgutil.iter_modules(lmpolicy.exercises.__path__) if _NOTEBOOK_MODULE.fullmatch(info.name)}


@lru_cache(maxsize=1)
def exercises() -> dict[str, Exercise]:
    """Every declared exercise by key (of an exercise in parts, its first part), from the notebooks' modules."""
    found: dict[str, Exercise] = {}
    for name, module in sorted(notebook_modules().items()):
        for exercise in module.EXERCISES:
            known = found.get(exercise.key)
            if known is not None and not (known.part and exercise.part and known.forbids == exercise.forbids):
                raise ValueError(f"lmpolicy.exercises.{name} declares {exercise.key} again (two parts of one "
                                 "exercise each name their part and forbid the same)")
            found.setdefault(exercise.key, exercise)
    return found


def exercise(key: str) -> Exercise:
    try:
        return exercises()[key]
    except KeyError:
        raise KeyError(f"no exercise {key!r} is declared in lmpolicy.exercises") from None


def library_functions(exercise_keys) -> dict[str, list[str]]:
    """``"module:qualname"`` -> the keys (of ``exercise_keys``) whose quantity it computes: functions only (not
    the ``parts``, which the notebook gives its students for other uses)."""
    found: dict[str, list[str]] = {}
    declared = exercises()
    for key in exercise_keys:
        if key in declared:
            for name in declared[key].shortcuts.library:
                if ":" in name:
                    found.setdefault(name, []).append(key)
    return found


def library_modules() -> dict[str, list[str]]:
    """Whole modules declared (the answer key) -> the exercise keys they answer, over every exercise."""
    found: dict[str, list[str]] = {}
    for key, declared in exercises().items():
        for name in declared.shortcuts.library:
            if ":" not in name:
                found.setdefault(name, []).append(key)
    return found
