"""Every student their own numbers: the per-student variants of the chapter's numeric exercises.

This module owns the variants' parameters: which exercises vary (``VARYING``), the family each one
draws from, the grid of a draw from the student id, and the line a student reads above the exercise.
Their exact answers, and the draw itself (which judges each candidate by its answers), are the answer
key, ``lmpolicy.per_student.variant_answers``: computed with ``lmpolicy.exact``, never copied, and never in a grading
kernel (its library view lacks the module; the grader hands it the student's parameters in
``LMPOLICY_VARIANT_PARAMS``). This module's answer-key names (``answers``, ``answer``,
``other_variant_message``, ...) are read from there when first used.

Where the id comes from (``student_id``): ``LMPOLICY_STUDENT_ID`` (``make lab STUDENT=...`` and the
grader set it), else ``JUPYTERHUB_USER`` (on a hub); with neither, or with ``LMPOLICY_VARIANTS=off``
(the course switched variants off), there is no id and every exercise has the chapter's own numbers.

The draw: each parameter is picked from a grid by a SHA-256 hash of (student id, family, attempt,
parameter name), so the same id gives the same numbers on every machine and every Python; a draw
that would make the exercise degenerate, easier, or too close to the chapter's answers is rejected
and the next attempt taken. Exercises that read the same model share a family (11.4(c) and (d);
11.5(b) and 11.9(a); 11.8(b) and 11.9(c)).

    >>> v = for_exercise("ex11_2b", student="alice")
    >>> v.chapter, v.logits == for_exercise("ex11_2b", student="alice").logits
    (False, True)
    >>> for_exercise("ex11_2b", student=None).logits
    (2.0, 1.0, 0.0)
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType

import numpy as np

from lmpolicy.exact.scenarios import KL_DEMO_REF_PROBS, Scenario, get_scenario
from lmpolicy.exact.scenarios import kl_demo_policy_for  # noqa: F401 (notebook 06 reads it here)
from lmpolicy.exact.toy import ToyLM

STUDENT_ID_VARIABLE = "LMPOLICY_STUDENT_ID"
HUB_USER_VARIABLE = "JUPYTERHUB_USER"
VARIANTS_OFF_VARIABLE = "LMPOLICY_VARIANTS"
OFF = "off"
SET_ID_HOW = ("start JupyterLab with `make lab STUDENT=<your id>` on your own machine (on the course's hub "
              "your user name is your id)")
CHAPTER_NUMBERS_NOTE = f"No student id is set, so these are the book's numbers; for your own, {SET_ID_HOW}."

_UNSET = object()


def variants_off() -> bool:
    """True when the course switched variants off (``LMPOLICY_VARIANTS=off``): everyone has the book's numbers."""
    return os.environ.get(VARIANTS_OFF_VARIABLE, "").strip().lower() == OFF


def student_id() -> str | None:
    """The current student's id: ``LMPOLICY_STUDENT_ID``, else ``JUPYTERHUB_USER``, else None.

    None too when variants are off. Read at every call (a kernel forked before the id was known
    still sees it). Surrounding blanks are ignored; an empty value counts as no id.
    """
    if variants_off():
        return None
    for variable in (STUDENT_ID_VARIABLE, HUB_USER_VARIABLE):
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return None


PARAMS_VARIABLE = "LMPOLICY_VARIANT_PARAMS"  # the student's parameters, drawn by the grader


# -- the draw ----------------------------------------------------------------------------------

def _index(student: str, family: str, attempt: int, name: str, size: int) -> int:
    digest = hashlib.sha256(f"{student}\x1f{family}\x1f{attempt}\x1f{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % size


class _Picker:
    """Picks each parameter of one attempt from its grid, by hash."""

    def __init__(self, student: str, family: str, attempt: int) -> None:
        self.student, self.family, self.attempt = student, family, attempt

    def grid(self, name: str, low: float, high: float, step: float) -> float:
        """One of low, low + step, ..., high (rounded to the step's decimals)."""
        count = int(round((high - low) / step)) + 1
        decimals = max(0, -int(math.floor(math.log10(step))) + 1)
        return round(low + step * _index(self.student, self.family, self.attempt, name, count), decimals)

    def choice(self, name: str, options):
        options = tuple(options)
        return options[_index(self.student, self.family, self.attempt, name, len(options))]


@dataclass(frozen=True)
class _Family:
    name: str
    keys: tuple[str, ...]
    chapter: Mapping                                     # the chapter's parameters
    draw: Callable[[_Picker], dict]                      # a candidate's parameters
    describe: Callable[[str, Mapping], str]              # (key, params) -> one line of markdown
    extra: Callable[[Mapping, bool], dict] = field(default=lambda params, chapter: {})  # derived objects (a Scenario)


@dataclass(frozen=True)
class Variant:
    """The parameters of one exercise for one student (``student`` None: the chapter's own numbers).

    ``params`` maps parameter names to values; each is also an attribute (``variant.logits``).
    ``chapter`` is True for the book's numbers. Derived objects (a ``Scenario`` for the tilting
    exercises) are attributes too.
    """

    exercise: str
    student: str | None
    params: Mapping

    @property
    def chapter(self) -> bool:
        return self.student is None

    def __getattr__(self, name: str):
        params = self.__dict__.get("params", {})
        if name in params:
            return params[name]
        raise AttributeError(f"the variant of {self.exercise} has no parameter {name!r}; it has "
                             f"{', '.join(params) or 'none'}")

    def __getitem__(self, name: str):
        return self.params[name]


# -- 11.1(a): the probability and log-prob of "86<eos>" ------------------------------------------

def _draw_1a(pick: _Picker) -> dict:
    return {"token_probs": (pick.grid("first", 0.50, 0.85, 0.005), pick.grid("second", 0.03, 0.15, 0.0025),
                            pick.grid("eos", 0.90, 0.995, 0.005))}


def _describe_1a(key, params) -> str:
    first, second, eos = params["token_probs"]
    return (f"the model answers `37+48=` with `86<eos>`, with token probabilities "
            f"${first:g}$ (`8`), ${second:g}$ (`6`) and ${eos:g}$ (`<eos>`)")


# -- 11.2(b): the temperature at which the top token gets the target probability ---------------

def _draw_2b(pick: _Picker) -> dict:
    spacing, offset = pick.grid("spacing", 0.5, 2.5, 0.005), pick.choice("offset", (-2.0, -1.0, 0.0, 1.0, 2.0, 3.0))
    return {"logits": (round(offset + 2 * spacing, 3), round(offset + spacing, 3), offset),
            "target": pick.grid("target", 0.80, 0.99, 0.005)}


def _describe_2b(key, params) -> str:
    logits = ", ".join(f"{z:g}" for z in params["logits"])
    return f"logits $z = ({logits})$ and target probability ${params['target']:g}$ for the top token"


# -- 11.4(c), (d): k1 and k3 when pi_theta is sharp -----------------------------------------------

BATCH_TOKENS = 16


def _draw_4(pick: _Picker) -> dict:
    rare = pick.grid("rare", 0.004, 0.030, 0.0005)
    common_ref = pick.grid("common_ref", 0.30, 0.70, 0.005)
    return {"p_theta": (round(1 - rare, 4), rare), "p_ref": (common_ref, round(1 - common_ref, 3))}


def _describe_4(key, params) -> str:
    (common, rare), (ref_common, ref_rare) = params["p_theta"], params["p_ref"]
    return (f"$\\pi_\\theta = ({common:g}, {rare:g})$ and $\\pi_\\text{{ref}} = ({ref_common:g}, {ref_rare:g})$ "
            f"(token 0 common, token 1 rare); batches of $N = {BATCH_TOKENS}$ tokens")


# -- 11.5(b), 11.9(a): the worked example at beta = 0.5 -------------------------------------------

WORKED_BETA = 0.5


def _worked_scenario(params, name: str, title: str) -> Scenario:
    first_a, a_after_a, a_after_b = params["first_a"], params["a_after_a"], params["a_after_b"]
    model = ToyLM(("a", "b"), [(first_a, 1 - first_a), [(a_after_a, 1 - a_after_a), (a_after_b, 1 - a_after_b)]])
    rewards = model.response_values({"aa": 0.0, "ab": params["reward_ab"], "ba": 0.0, "bb": params["reward_bb"]})
    rewards.setflags(write=False)
    return Scenario(name=name, title=title, model=model, rewards=rewards, true_rewards=rewards)


_WORKED_CHAPTER = {"first_a": 0.7, "a_after_a": 0.6, "a_after_b": 0.5, "reward_ab": 1.0, "reward_bb": 2.0,
                   "beta": WORKED_BETA}
YOUR_WORKED = "your_worked"
YOUR_BLIND_SPOT = "your_blind_spot"


def _draw_worked(pick: _Picker) -> dict:
    return {"first_a": pick.grid("first_a", 0.60, 0.80, 0.01), "a_after_a": pick.grid("a_after_a", 0.50, 0.70, 0.01),
            "a_after_b": pick.grid("a_after_b", 0.35, 0.60, 0.01), "reward_ab": pick.grid("reward_ab", 0.6, 1.4, 0.1),
            "reward_bb": pick.grid("reward_bb", 1.6, 2.4, 0.1), "beta": WORKED_BETA}


def _describe_worked(key, params) -> str:
    first_a, a_after_a, a_after_b = params["first_a"], params["a_after_a"], params["a_after_b"]
    text = (f"$\\pi_\\text{{ref}}(a) = {first_a:g}$, $\\pi_\\text{{ref}}(a \\mid a) = {a_after_a:g}$, "
            f"$\\pi_\\text{{ref}}(a \\mid b) = {a_after_b:g}$; rewards $r(aa) = 0$, $r(ab) = {params['reward_ab']:g}$, "
            f"$r(ba) = 0$, $r(bb) = {params['reward_bb']:g}$; $\\beta = {params['beta']:g}$")
    if key == "ex11_9a":
        text += ' (in the demo: scenario "Your model (11.5(b), 11.9(a))")'
    return text


# -- 11.8(b), 11.9(c): the blind spot ------------------------------------------------------------

_BLIND_CHAPTER = {"first": (0.5, 0.4, 0.1), "after_a": (0.5, 0.3, 0.2), "after_b": (0.2, 0.6, 0.2),
                  "after_c": (0.4, 0.4, 0.2), "reward_bb": 1.0, "reward_cc": 1.6}
_BLIND_OTHER_REWARDS = {"aa": 0.2, "ab": 0.2, "ac": 0.2, "ba": 0.4, "bc": 0.4, "ca": 0.7, "cb": 0.7}


def _blind_scenario(params, name: str, title: str) -> Scenario:
    first = params["first"]
    model = ToyLM(("a", "b", "c"), [first, [params["after_a"], params["after_b"], params["after_c"]]])
    proxy = {**_BLIND_OTHER_REWARDS, "bb": params["reward_bb"], "cc": params["reward_cc"]}
    rewards = model.response_values(proxy)
    true_rewards = model.response_values({**proxy, "cc": 0.0}, "true rewards")
    for array in (rewards, true_rewards):
        array.setflags(write=False)
    return Scenario(name=name, title=title, model=model, rewards=rewards, true_rewards=true_rewards)


def _draw_blind(pick: _Picker) -> dict:
    first_c, first_b = pick.grid("first_c", 0.06, 0.14, 0.005), pick.grid("first_b", 0.30, 0.50, 0.01)
    b_after_b, c_after_c = pick.grid("b_after_b", 0.45, 0.70, 0.01), pick.grid("c_after_c", 0.12, 0.30, 0.005)
    side_b, side_c = round((1 - b_after_b) / 2, 3), round((1 - c_after_c) / 2, 3)
    return {"first": (round(1 - first_b - first_c, 3), first_b, first_c), "after_a": (0.5, 0.3, 0.2),
            "after_b": (side_b, round(1 - 2 * side_b, 3), side_b), "after_c": (side_c, side_c, round(1 - 2 * side_c, 3)),
            "reward_bb": pick.grid("reward_bb", 0.8, 1.2, 0.02), "reward_cc": pick.grid("reward_cc", 1.3, 2.0, 0.02)}


def _describe_blind(key, params) -> str:
    scenario = _blind_scenario(params, "describe", "")
    probs, model = scenario.model.response_probs(), scenario.model
    bb, cc = model.response_index("bb"), model.response_index("cc")
    text = (f'$\\pi_\\text{{ref}}(cc) = {probs[cc]:.4g}$ with reward-model score ${params["reward_cc"]:g}$ '
            f'(true reward 0); "bb": $\\pi_\\text{{ref}}(bb) = {probs[bb]:.4g}$, reward ${params["reward_bb"]:g}$; '
            f"the other rewards as in the chapter")
    if key == "ex11_9c":
        text += ' (in the demo: scenario "Your blind spot (11.8(b), 11.9(c))")'
    else:
        text += " (`blind` in the cell below: the whole model)"
    return text


def _draw_9d(pick: _Picker) -> dict:
    top = pick.grid("top", 0.50, 0.72, 0.005)
    weights = sorted((pick.grid(f"tail{i}", 1, 40, 1) for i in range(7)), reverse=True)
    tail = np.maximum(np.round(np.asarray(weights) / sum(weights) * (1 - top) / 0.005) * 0.005, 0.01)
    tail = np.round(tail, 3)
    tail[0] = round(1 - top - tail[1:].sum(), 3)
    return {"ref_probs": tuple(float(p) for p in (top, *tail)), "x": pick.choice("x", (-1.0, -0.95, -0.9, -0.85, -0.8, -0.75, -0.7))}


def _describe_9d(key, params) -> str:
    ref = ", ".join(f"{p:g}" for p in params["ref_probs"])
    return (f"$\\pi_\\text{{ref}} = ({ref})$, slider at $x = {params['x']:g}$, $N = {BATCH_TOKENS}$ "
            '(in the demo: reference "yours")')


# -- the catalogue of families -----------------------------------------------------------------

_FAMILIES = (
    _Family("ex11_1a", ("ex11_1a",), {"token_probs": (0.665, 0.08, 0.97)}, _draw_1a, _describe_1a),
    _Family("ex11_2b", ("ex11_2b",), {"logits": (2.0, 1.0, 0.0), "target": 0.95}, _draw_2b, _describe_2b),
    _Family("ex11_4", ("ex11_4c", "ex11_4d"), {"p_theta": (0.99, 0.01), "p_ref": (0.5, 0.5)}, _draw_4, _describe_4),
    _Family("worked", ("ex11_5b", "ex11_9a"), _WORKED_CHAPTER, _draw_worked, _describe_worked,
            extra=lambda params, chapter: {"scenario": get_scenario("worked") if chapter else
                                           _worked_scenario(params, YOUR_WORKED, "Your model (11.5(b), 11.9(a))")}),
    _Family("blind_spot", ("ex11_8b", "ex11_9c"), _BLIND_CHAPTER, _draw_blind, _describe_blind,
            extra=lambda params, chapter: {"scenario": get_scenario("blind_spot") if chapter else
                                           _blind_scenario(params, YOUR_BLIND_SPOT, "Your blind spot (11.8(b), 11.9(c))")}),
    _Family("ex11_9d", ("ex11_9d",), {"ref_probs": tuple(float(p) for p in KL_DEMO_REF_PROBS), "x": -1.0},
            _draw_9d, _describe_9d),
)
_FAMILY_OF = {key: family for family in _FAMILIES for key in family.keys}
VARYING: tuple[str, ...] = tuple(key for family in _FAMILIES for key in family.keys)


def _family(exercise_key: str) -> _Family:
    if exercise_key not in _FAMILY_OF:
        raise ValueError(f"exercise {exercise_key!r} has no variants; the varying exercises are {', '.join(VARYING)}")
    return _FAMILY_OF[exercise_key]


def _check_student(student) -> str | None:
    if student is None:
        return None
    if not isinstance(student, str) or not student.strip():
        raise ValueError(f"a student id is a non-empty string (or None for the chapter's numbers), got {student!r}")
    return student.strip()


def _handed(family: _Family, student: str) -> dict | None:
    """``family``'s parameters for ``student`` from ``LMPOLICY_VARIANT_PARAMS``, if it holds that student's."""
    text = os.environ.get(PARAMS_VARIABLE, "").strip()
    if not text:
        return None
    handed = json.loads(text)
    if handed.get("student") != student:
        return None
    as_tuples = lambda value: tuple(map(as_tuples, value)) if isinstance(value, list) else value  # noqa: E731
    return {name: as_tuples(value) for name, value in handed["families"][family.name].items()}


@lru_cache(maxsize=512)
def _params(family_name: str, student: str | None) -> Mapping:
    family = next(f for f in _FAMILIES if f.name == family_name)
    if student is None:
        params = dict(family.chapter)
    else:
        params = _handed(family, student) or _answer_key().drawn(family, student)
    return MappingProxyType({**params, **family.extra(params, student is None)})


def for_exercise(exercise_key: str, student: str | None = _UNSET) -> Variant:
    """The parameters of ``exercise_key`` for ``student`` (default: the current student, ``student_id()``).

    ``student=None`` gives the chapter's own numbers (``variant.chapter`` is True). The same id
    always gives the same parameters. ValueError for an exercise that does not vary.
    """
    student = student_id() if student is _UNSET else _check_student(student)
    family = _family(exercise_key)
    return Variant(exercise=exercise_key, student=student, params=_params(family.name, student))


def describe(exercise_key: str, student: str | None = _UNSET) -> str:
    """One line of markdown: the student's parameters for ``exercise_key`` (or that these are the book's)."""
    variant = for_exercise(exercise_key, student)
    line = _family(exercise_key).describe(exercise_key, variant.params)
    if variant.chapter:
        return f"**The chapter's numbers:** {line}. {CHAPTER_NUMBERS_NOTE}"
    return f"**Your own model** (student id `{variant.student}`): {line}."


def show(exercise_key: str) -> None:
    """Display ``describe(exercise_key)`` for the current student (markdown in a notebook, text elsewhere)."""
    text = describe(exercise_key)
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython is part of every notebook environment
        print(text)
        return
    if get_ipython() is None:
        print(text)
    else:
        display(Markdown(text))


def tilting_scenarios(student: str | None = _UNSET) -> dict[str, Scenario]:
    """The student's own scenarios for the tilting demo, by name (none without an id)."""
    if (student_id() if student is _UNSET else _check_student(student)) is None:
        return {}
    student = student_id() if student is _UNSET else student
    return {variant.scenario.name: variant.scenario
            for variant in (for_exercise("ex11_9a", student), for_exercise("ex11_9c", student))}


def kl_demo_reference(student: str | None = _UNSET) -> np.ndarray | None:
    """The student's own reference for the KL demo (11.9(d)); None without an id."""
    variant = for_exercise("ex11_9d", student)
    return None if variant.chapter else np.asarray(variant.ref_probs, dtype=float)


def scenario(exercise_key: str, student: str | None = _UNSET) -> Scenario:
    """The tilting scenario of 11.5(b), 11.9(a) (the worked example) or 11.8(b), 11.9(c) (the blind spot)
    for ``student``: the chapter's own (``get_scenario``) without an id."""
    variant = for_exercise(exercise_key, student)
    if "scenario" not in variant.params:
        raise ValueError(f"{exercise_key} reads no tilting scenario")
    return variant.scenario


# -- the answer key, with the grader ----------------------------------------------------------------

ANSWER_KEY_NAMES = frozenset({
    "Answer", "answers", "answer", "drawn_for", "matches_other_variant", "other_variant_message",
    "demo_readouts_range", "blind_spot_on_peak", "OTHER_VARIANT_MESSAGE", "CLASSMATE_MESSAGE", "LOW_BETA",
    "PRINTED_SLACK", "MAX_ATTEMPTS"})


def _answer_key():
    from lmpolicy.per_student import variant_answers  # not in a grading kernel: there this import says so
    return variant_answers


def __getattr__(name: str):
    """``variants.answers`` and the rest of the answer key's names, read from ``lmpolicy.per_student.variant_answers``."""
    if name in ANSWER_KEY_NAMES:
        return getattr(_answer_key(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
