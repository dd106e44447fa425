"""Every student their own numbers: the per-student variants of the chapter's numeric exercises.

This module owns the variants, and nothing else draws them: which exercises vary (``VARYING``),
the family each one draws from, the draw from the student id, the exact answers (computed with
``lmpolicy.exact``, never copied) and the line a student reads above the exercise.

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

from lmpolicy.exact.kl import estimator_moments, probability_mean_below
from lmpolicy.exact.scenarios import KL_DEMO_REF_PROBS, Scenario, get_scenario
from lmpolicy.exact.temperature import power_distribution, softmax
from lmpolicy.exact.tilting import frontier, soft_values, tilted_optimum, token_level_optimum
from lmpolicy.exact.toy import ToyLM

STUDENT_ID_VARIABLE = "LMPOLICY_STUDENT_ID"
HUB_USER_VARIABLE = "JUPYTERHUB_USER"
VARIANTS_OFF_VARIABLE = "LMPOLICY_VARIANTS"
OFF = "off"
SET_ID_HOW = ("start JupyterLab with `make lab STUDENT=<your id>` on your own machine (on the course's hub "
              "your user name is your id)")
CHAPTER_NUMBERS_NOTE = f"No student id is set, so these are the book's numbers; for your own, {SET_ID_HOW}."
OTHER_VARIANT_MESSAGE = ("this is the chapter's value; your model's is different: see the parameters at the "
                         "top of the exercise")
CLASSMATE_MESSAGE = ("this is another student's value; your model's is different: see the parameters at the "
                     "top of the exercise")
MAX_ATTEMPTS = 400
PRINTED_SLACK = 0.005  # the chapter prints three significant digits: its numbers are this close, relatively

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


# -- what a family is --------------------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    """One expected answer: its value, and the tolerance a check accepts it with (numbers only)."""

    value: object
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def numeric(self) -> bool:
        return isinstance(self.value, (int, float)) and not isinstance(self.value, bool)

    def accepts(self, submitted) -> bool:
        if not self.numeric:
            return submitted == self.value
        try:
            number = float(np.asarray(submitted, dtype=float).reshape(()))
        except (TypeError, ValueError):
            return False
        return math.isfinite(number) and abs(number - self.value) <= self.atol + self.rtol * abs(self.value)

    def as_printed(self, submitted) -> bool:
        """``accepts``, or within the rounding of a number printed to three significant digits (the book's)."""
        if self.accepts(submitted) or not self.numeric:
            return self.accepts(submitted)
        number = float(np.asarray(submitted, dtype=float).reshape(()))
        return abs(number - self.value) <= PRINTED_SLACK * abs(self.value) + self.atol


@dataclass(frozen=True)
class _Family:
    name: str
    keys: tuple[str, ...]
    chapter: Mapping                                     # the chapter's parameters
    draw: Callable[[_Picker], dict]                      # a candidate's parameters
    answers: Callable[[str, Mapping], dict]              # (key, params) -> {name: Answer}
    describe: Callable[[str, Mapping], str]              # (key, params) -> one line of markdown
    acceptable: Callable[[Mapping], bool] = lambda params: True  # well-posed, same difficulty
    separation: float = 3.0                              # answers differ from the chapter's by this many tolerances
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


def _acceptable_1a(params) -> bool:
    logs = np.log(params["token_probs"])
    return bool(np.argmin(logs) == 1 and logs[1] / logs.sum() >= 0.6)  # the unlikely digit still dominates


def _answers_1a(key, params) -> dict:
    logs = np.log(np.asarray(params["token_probs"], dtype=float))
    return {"prob_86": Answer(float(np.exp(logs.sum())), atol=5e-5),
            "logprob_86": Answer(float(logs.sum()), atol=2e-3),
            "main_contributor": Answer(("8", "6", "<eos>")[int(np.argmin(logs))])}


def _describe_1a(key, params) -> str:
    first, second, eos = params["token_probs"]
    return (f"the model answers `37+48=` with `86<eos>`, with token probabilities "
            f"${first:g}$ (`8`), ${second:g}$ (`6`) and ${eos:g}$ (`<eos>`)")


# -- 11.2(b): the temperature at which the top token gets the target probability ---------------

def _draw_2b(pick: _Picker) -> dict:
    spacing, offset = pick.grid("spacing", 0.5, 2.5, 0.005), pick.choice("offset", (-2.0, -1.0, 0.0, 1.0, 2.0, 3.0))
    return {"logits": (round(offset + 2 * spacing, 3), round(offset + spacing, 3), offset),
            "target": pick.grid("target", 0.80, 0.99, 0.005)}


def _temperature_for(logits, target) -> float:
    """The T at which softmax(logits / T) gives the top token ``target``, for equally spaced logits.

    With spacing d and u = exp(-d / T), the top probability is 1 / (1 + u + u^2): a quadratic in u.
    """
    top, middle, low = logits
    spacing = top - middle
    u = (-1 + math.sqrt(1 + 4 * (1 / target - 1))) / 2
    temperature = -spacing / math.log(u)
    assert abs(softmax(np.asarray(logits, dtype=float), temperature)[0] - target) < 1e-9  # the exact softmax agrees
    return temperature


def _answers_2b(key, params) -> dict:
    return {"temperature_095": Answer(_temperature_for(params["logits"], params["target"]), atol=1e-6)}


def _describe_2b(key, params) -> str:
    logits = ", ".join(f"{z:g}" for z in params["logits"])
    return f"logits $z = ({logits})$ and target probability ${params['target']:g}$ for the top token"


# -- 11.4(c), (d): k1 and k3 when pi_theta is sharp -----------------------------------------------

BATCH_TOKENS = 16


def _draw_4(pick: _Picker) -> dict:
    rare = pick.grid("rare", 0.004, 0.030, 0.0005)
    common_ref = pick.grid("common_ref", 0.30, 0.70, 0.005)
    return {"p_theta": (round(1 - rare, 4), rare), "p_ref": (common_ref, round(1 - common_ref, 3))}


def _acceptable_4(params) -> bool:
    moments = estimator_moments(params["p_theta"], params["p_ref"])
    no_rare = params["p_theta"][0] ** BATCH_TOKENS
    # the lesson survives: k3 much noisier than k1, most batches without the rare token
    return bool(moments.std["k3"] > 3 * moments.std["k1"] and no_rare > 0.6)


def _answers_4(key, params) -> dict:
    moments = estimator_moments(params["p_theta"], params["p_ref"])
    k1, k3 = moments.values.k1, moments.values.k3

    def close(value):
        return Answer(float(value), atol=2e-3, rtol=2e-3)

    if key == "ex11_4c":
        return {"kl_exact": close(moments.kl), "k1_common": close(k1[0]), "k1_rare": close(k1[1]),
                "k3_common": close(k3[0]), "k3_rare": close(k3[1]), "std_k1": close(moments.std["k1"]),
                "std_k3": close(moments.std["k3"])}
    return {"p_no_rare": close(params["p_theta"][0] ** BATCH_TOKENS), "k3_estimate_none": close(k3[0]),
            "k1_estimate_none": close(k1[0]),
            "k3_estimate_one": close((k3[1] + (BATCH_TOKENS - 1) * k3[0]) / BATCH_TOKENS)}


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


def _acceptable_worked(params) -> bool:
    scenario = _worked_scenario(params, "check", "")
    probs = scenario.model.response_probs()
    return bool(np.argmin(probs) == 3 or probs[3] <= 0.2)  # "bb" is the best and a rare response


def _answers_worked(key, params) -> dict:
    scenario = _worked_scenario(params, "answers", "")
    model, rewards, beta = scenario.model, scenario.rewards, params["beta"]
    if key == "ex11_5b":
        values = soft_values(model, rewards, beta)
        return {"V_a": Answer(float(values[1][0]), atol=1.5e-3), "V_b": Answer(float(values[1][1]), atol=1.5e-3),
                "beta_log_Z": Answer(float(values[0]), atol=1.5e-3),
                "pi_star_a": Answer(float(token_level_optimum(model, rewards, beta).tables[0][0]), atol=1.5e-3),
                "pi_star_bb": Answer(float(tilted_optimum(model, rewards, beta).probs[3]), atol=1.5e-3)}
    readouts = demo_readouts_range(scenario, beta)
    return {name: Answer((low + high) / 2, atol=(high - low) / 2 + 2e-3) for name, (low, high) in readouts.items()}


def demo_readouts_range(scenario: Scenario, beta: float, slider_slack: float = 0.005) -> dict:
    """What the tilting demo shows of ``scenario`` for 11.9(a) at any slider position within
    ``slider_slack`` of ``beta``: ``{name: (low, high)}`` for demo_V_a, demo_V_b, demo_beta_log_Z and
    demo_pi_star_bb."""
    model, rewards = scenario.model, scenario.rewards
    getters = {"demo_V_a": lambda b: float(soft_values(model, rewards, b)[1][0]),
               "demo_V_b": lambda b: float(soft_values(model, rewards, b)[1][1]),
               "demo_beta_log_Z": lambda b: tilted_optimum(model, rewards, b).beta_log_partition,
               "demo_pi_star_bb": lambda b: float(tilted_optimum(model, rewards, b).probs[3])}
    return {name: tuple(sorted((get(beta - slider_slack), get(beta + slider_slack)))) for name, get in getters.items()}


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
LOW_BETA = 0.1
LOW_BETA_SLIDER = (0.097, 0.1, 0.102)  # the betas the demo's slider may show when set as close to 0.1 as it allows
PEAK_GRID = (0.05, 20.0, 2000)   # the betas 11.9(c)'s peak is looked for on (within the demo's slider)
PEAK_TOLERANCE = 0.008            # a beta whose true reward is this close to the peak is on the (flat) peak


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


def _equal_mass_beta(scenario: Scenario) -> float:
    probs, model = scenario.model.response_probs(), scenario.model
    bb, cc = model.response_index("bb"), model.response_index("cc")
    return float((scenario.rewards[cc] - scenario.rewards[bb]) / math.log(probs[bb] / probs[cc]))


@lru_cache(maxsize=64)
def _blind_peak(params_key: tuple) -> tuple[float, float]:
    """(beta at the peak of pi*'s true reward on the peak grid, the peak's true reward)."""
    scenario = _blind_scenario(dict(params_key), "peak", "")
    grid = frontier(scenario.model, scenario.rewards, np.geomspace(*PEAK_GRID))
    true = grid.probs @ scenario.true_rewards
    best = int(np.argmax(true))
    return float(grid.betas[best]), float(true[best])


def _frozen(params) -> tuple:
    return tuple(sorted((k, v) for k, v in params.items() if k in _BLIND_CHAPTER))


def _acceptable_blind(params) -> bool:
    scenario = _blind_scenario(params, "check", "")
    crossover = _equal_mass_beta(scenario)
    peak_beta, peak_true = _blind_peak(_frozen(params))
    low = tilted_optimum(scenario.model, scenario.rewards, LOW_BETA).probs @ scenario.true_rewards
    reference_true = scenario.model.response_probs() @ scenario.true_rewards
    # the crossover well inside the slider and above beta = 0.1; the peak after it, well inside the grid;
    # the collapse at beta = 0.1 and a real gain at the peak, as in the chapter
    # and the chapter's readouts of 11.9(c), read at the chapter's beta in this model, are not this model's
    chapter_beta = _chapter_answers("ex11_9c")["beta_best_true"].value
    at_chapter_beta = tilted_optimum(scenario.model, scenario.rewards, chapter_beta)
    chapter_readouts_fail = (abs(at_chapter_beta.kl - _chapter_answers("ex11_9c")["kl_at_best_true"].value) > 0.04
                             or abs(at_chapter_beta.expected_reward
                                    - _chapter_answers("ex11_9c")["proxy_at_best_true"].value) > 0.02)
    return bool(0.16 <= crossover <= 0.40 and 1.3 * crossover <= peak_beta <= 2.0
                and 0.015 <= low <= 0.2 and peak_true > reference_true + 0.12 and chapter_readouts_fail)


def _answers_blind(key, params) -> dict:
    scenario = _blind_scenario(params, "answers", "")
    model, rewards, true_rewards = scenario.model, scenario.rewards, scenario.true_rewards
    low = tilted_optimum(model, rewards, LOW_BETA)
    if key == "ex11_8b":
        return {"beta_equal_mass": Answer(_equal_mass_beta(scenario), rtol=3e-3),
                "true_reward_at_beta_0_1": Answer(float(low.probs @ true_rewards), atol=2e-3)}
    peak_beta, _ = _blind_peak(_frozen(params))
    at_peak = tilted_optimum(model, rewards, peak_beta)
    # near beta = 0.1 the demo's slider stops at 0.0996 or 0.1015: any beta from 0.097 to 0.102 is accepted
    near = [tilted_optimum(model, rewards, beta) for beta in LOW_BETA_SLIDER]
    proxy = [optimum.expected_reward for optimum in near]
    true = [float(optimum.probs @ true_rewards) for optimum in near]
    return {"beta_best_true": Answer(peak_beta, rtol=0.05), "kl_at_best_true": Answer(at_peak.kl, atol=0.02),
            "proxy_at_best_true": Answer(at_peak.expected_reward, atol=0.01),
            "proxy_at_beta_0_1": Answer((min(proxy) + max(proxy)) / 2, atol=(max(proxy) - min(proxy)) / 2 + 3e-3),
            "true_at_beta_0_1": Answer((min(true) + max(true)) / 2, atol=(max(true) - min(true)) / 2 + 3e-3)}


def blind_spot_on_peak(scenario: Scenario, beta: float) -> bool:
    """Whether ``beta`` lies on the (flat) peak of pi*'s true reward in ``scenario`` (11.9(c))."""
    grid = frontier(scenario.model, scenario.rewards, np.geomspace(*PEAK_GRID))
    best = float((grid.probs @ scenario.true_rewards).max())
    return bool(tilted_optimum(scenario.model, scenario.rewards, beta).probs @ scenario.true_rewards
                >= best - PEAK_TOLERANCE)


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


# -- 11.9(d): k3 when pi_theta is sharper than the reference ---------------------------------------

def kl_demo_policy_for(ref_probs, x: float) -> np.ndarray:
    """pi_theta ∝ pi_ref ** (1 - x) for any reference (the KL demo's slider, x in [-1, 1))."""
    return power_distribution(np.asarray(ref_probs, dtype=float), 1.0 / (1.0 - x))


def _draw_9d(pick: _Picker) -> dict:
    top = pick.grid("top", 0.50, 0.72, 0.005)
    weights = sorted((pick.grid(f"tail{i}", 1, 40, 1) for i in range(7)), reverse=True)
    tail = np.maximum(np.round(np.asarray(weights) / sum(weights) * (1 - top) / 0.005) * 0.005, 0.01)
    tail = np.round(tail, 3)
    tail[0] = round(1 - top - tail[1:].sum(), 3)
    return {"ref_probs": tuple(float(p) for p in (top, *tail)), "x": pick.choice("x", (-1.0, -0.95, -0.9, -0.85, -0.8, -0.75, -0.7))}


@lru_cache(maxsize=256)
def _fraction_k3_below(ref_probs: tuple, x: float) -> float:
    """The exact share of k3 batch estimates (N = 16) below the KL, for the KL demo at slider x."""
    ref = np.asarray(ref_probs, dtype=float)
    return probability_mean_below(kl_demo_policy_for(ref, x), ref, BATCH_TOKENS, estimator="k3")


def _acceptable_9d(params) -> bool:
    ref = np.asarray(params["ref_probs"])
    if abs(ref.sum() - 1) > 1e-9 or ref.min() < 0.01 or np.any(np.diff(ref) > 0):
        return False
    sharp = kl_demo_policy_for(ref, params["x"])
    stds = estimator_moments(sharp, ref).std
    if not (min(stds, key=stds.get) == "k2" and stds["k1"] < stds["k3"]):
        return False
    fraction = _fraction_k3_below(params["ref_probs"], params["x"])
    # the same lesson as the chapter's: k2 the least spread, k1 less than k3, most batches below the KL
    return bool(0.55 <= fraction <= 0.95)


def _answers_9d(key, params) -> dict:
    ref = np.asarray(params["ref_probs"])
    sharp = kl_demo_policy_for(ref, params["x"])
    moments = estimator_moments(sharp, ref)
    stds = moments.std
    return {"fraction_k3_below_kl": Answer(_fraction_k3_below(tuple(params["ref_probs"]), params["x"]), atol=0.04),
            "true_kl": Answer(moments.kl, atol=3e-4),  # the demo prints it with four decimals
            "smallest_std": Answer(min(stds, key=stds.get)),
            "smaller_std_of_k1_k3": Answer(min(("k1", "k3"), key=stds.get))}


def _describe_9d(key, params) -> str:
    ref = ", ".join(f"{p:g}" for p in params["ref_probs"])
    return (f"$\\pi_\\text{{ref}} = ({ref})$, slider at $x = {params['x']:g}$, $N = {BATCH_TOKENS}$ "
            '(in the demo: reference "yours")')


# -- the catalogue of families -----------------------------------------------------------------

_FAMILIES = (
    _Family("ex11_1a", ("ex11_1a",), {"token_probs": (0.665, 0.08, 0.97)}, _draw_1a, _answers_1a, _describe_1a,
            _acceptable_1a),
    _Family("ex11_2b", ("ex11_2b",), {"logits": (2.0, 1.0, 0.0), "target": 0.95}, _draw_2b, _answers_2b,
            _describe_2b, separation=1000.0),
    _Family("ex11_4", ("ex11_4c", "ex11_4d"), {"p_theta": (0.99, 0.01), "p_ref": (0.5, 0.5)}, _draw_4, _answers_4,
            _describe_4, _acceptable_4),
    _Family("worked", ("ex11_5b", "ex11_9a"), _WORKED_CHAPTER, _draw_worked, _answers_worked, _describe_worked,
            _acceptable_worked,
            extra=lambda params, chapter: {"scenario": get_scenario("worked") if chapter else
                                           _worked_scenario(params, YOUR_WORKED, "Your model (11.5(b), 11.9(a))")}),
    _Family("blind_spot", ("ex11_8b", "ex11_9c"), _BLIND_CHAPTER, _draw_blind, _answers_blind, _describe_blind,
            _acceptable_blind,
            extra=lambda params, chapter: {"scenario": get_scenario("blind_spot") if chapter else
                                           _blind_scenario(params, YOUR_BLIND_SPOT, "Your blind spot (11.8(b), 11.9(c))")}),
    _Family("ex11_9d", ("ex11_9d",), {"ref_probs": tuple(float(p) for p in KL_DEMO_REF_PROBS), "x": -1.0},
            _draw_9d, _answers_9d, _describe_9d, _acceptable_9d, separation=2.0),
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


def _separated(family: _Family, params: Mapping) -> bool:
    """Every numeric answer of the family differs from the chapter's by more than ``separation`` tolerances."""
    for key in family.keys:
        own, chapter = family.answers(key, params), _chapter_answers(key)
        for name, answer in own.items():
            if answer.numeric:
                reference = chapter[name]
                tolerance = reference.atol + reference.rtol * abs(reference.value)
                gap = abs(answer.value - reference.value)
                if gap <= family.separation * max(tolerance, 1e-9) or gap <= 4 * PRINTED_SLACK * abs(reference.value):
                    return False
    return True


@lru_cache(maxsize=None)
def _chapter_answers(exercise_key: str) -> dict:
    family = _family(exercise_key)
    return family.answers(exercise_key, family.chapter)


def _drawn(family: _Family, student: str) -> dict:
    """The first acceptable draw of ``family`` for ``student`` (the exact solvers judge each attempt)."""
    for attempt in range(MAX_ATTEMPTS):
        params = family.draw(_Picker(student, family.name, attempt))
        if family.acceptable(params) and _separated(family, params):
            return params
    raise RuntimeError(  # pragma: no cover - the tests draw many ids; a family this narrow is a bug
        f"no acceptable variant of {family.name} for {student!r} in {MAX_ATTEMPTS} attempts")


@lru_cache(maxsize=64)
def drawn_for(student: str) -> str:
    """Every family's parameters for ``student``, drawn here, as the JSON a process that must not draw them
    itself takes in ``LMPOLICY_VARIANT_PARAMS`` (the grading kernel, whose library lacks the solvers)."""
    student = _check_student(student)
    return json.dumps({"student": student, "families": {f.name: _drawn(f, student) for f in _FAMILIES}})


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
        params = _handed(family, student) or _drawn(family, student)
    return MappingProxyType({**params, **family.extra(params, student is None)})


def for_exercise(exercise_key: str, student: str | None = _UNSET) -> Variant:
    """The parameters of ``exercise_key`` for ``student`` (default: the current student, ``student_id()``).

    ``student=None`` gives the chapter's own numbers (``variant.chapter`` is True). The same id
    always gives the same parameters. ValueError for an exercise that does not vary.
    """
    student = student_id() if student is _UNSET else _check_student(student)
    family = _family(exercise_key)
    return Variant(exercise=exercise_key, student=student, params=_params(family.name, student))


def answers(exercise_key: str, student: str | None = _UNSET) -> dict[str, Answer]:
    """The expected answers of ``exercise_key`` for ``student``, each with the tolerance its check uses."""
    variant = for_exercise(exercise_key, student)
    return _family(exercise_key).answers(exercise_key, variant.params)


def answer(exercise_key: str, student: str | None = _UNSET) -> dict:
    """The exact expected answer(s) of ``exercise_key`` for ``student``, by the notebook's variable names.

    Computed with the library's exact solvers from the student's parameters (never a copied number).
    For 11.9(a) and (c), read off a demo, a value is the middle of what the slider can show.
    """
    return {name: a.value for name, a in answers(exercise_key, student).items()}


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


def _matches(own: Mapping[str, Answer], other: Mapping[str, Answer], submitted: Mapping, printed: bool = False) -> bool:
    """A submitted number is another variant's answer (``printed``: or it as the book prints it), not this
    student's own."""
    for name, value in submitted.items():
        if name in own and own[name].numeric and not own[name].accepts(value):
            if other[name].as_printed(value) if printed else other[name].accepts(value):
                return True
    return False


def _as_submitted(exercise_key: str, value) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    numeric = [name for name, a in _chapter_answers(exercise_key).items() if a.numeric]
    if len(numeric) != 1:
        raise ValueError(f"{exercise_key} has several answers ({', '.join(numeric)}): pass a mapping of them")
    return {numeric[0]: value}


def matches_other_variant(exercise_key: str, value, student: str | None = _UNSET, classmates=()) -> bool:
    """Whether a submitted answer is the chapter's (or a classmate's) value instead of the student's own.

    ``value``: a number for a one-number exercise, or a mapping of the notebook's variable names to
    what the student set. True when some submitted number fails the student's own answer but
    matches the chapter's (for a student with a variant) or that of one of ``classmates`` (ids).
    Always False for the chapter's numbers themselves (no id).
    """
    variant = for_exercise(exercise_key, student)
    if variant.chapter:
        return False
    submitted = _as_submitted(exercise_key, value)
    own = answers(exercise_key, variant.student)
    classmates = [answers(exercise_key, c) for c in classmates if _check_student(c) != variant.student]
    return (_matches(own, _chapter_answers(exercise_key), submitted, printed=True)
            or any(_matches(own, other, submitted) for other in classmates))


def other_variant_message(exercise_key: str, value, student: str | None = _UNSET, classmates=()) -> str | None:
    """The feedback line for a submitted answer that is another variant's (None when it is not)."""
    variant = for_exercise(exercise_key, student)
    if variant.chapter:
        return None
    submitted = _as_submitted(exercise_key, value)
    own = answers(exercise_key, variant.student)
    if _matches(own, _chapter_answers(exercise_key), submitted, printed=True):
        return OTHER_VARIANT_MESSAGE
    if any(_matches(own, answers(exercise_key, c), submitted) for c in classmates if _check_student(c) != variant.student):
        return CLASSMATE_MESSAGE
    return None


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
