"""The answer key of the per-student variants (``lmpolicy.per_student.variants``): each family's exact answers, what
makes a drawn candidate acceptable, the draw (which judges every candidate by its answers), and the
comparison of a submitted number with the student's own answer and with other variants'.

Computed with the exact solvers of ``lmpolicy.exact``, never copied. The student's own install holds it
(the visible checks compare with it); a grading kernel never does (``lmpolicy.notebook.forbidden`` declares it,
and the grader's library view leaves it out): there the student's parameters come from the grader
(``LMPOLICY_VARIANT_PARAMS``) and the checks that need the answers run in the trusted kernel.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lmpolicy.exact.kl import estimator_moments, probability_mean_below
from lmpolicy.exact.scenarios import Scenario, kl_demo_policy_for
from lmpolicy.exact.temperature import softmax
from lmpolicy.exact.tilting import frontier, soft_values, tilted_optimum, token_level_optimum
from lmpolicy.per_student.variants import (_BLIND_CHAPTER, _FAMILIES, _UNSET, BATCH_TOKENS, _blind_scenario, _check_student,
                               _family, _Family, _Picker, _worked_scenario, for_exercise)

OTHER_VARIANT_MESSAGE = ("this is the chapter's value; your model's is different: see the parameters at the "
                         "top of the exercise")
CLASSMATE_MESSAGE = ("this is another student's value; your model's is different: see the parameters at the "
                     "top of the exercise")
MAX_ATTEMPTS = 400
PRINTED_SLACK = 0.005  # the chapter prints three significant digits: its numbers are this close, relatively


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


def _acceptable_1a(params) -> bool:
    logs = np.log(params["token_probs"])
    return bool(np.argmin(logs) == 1 and logs[1] / logs.sum() >= 0.6)  # the unlikely digit still dominates


def _answers_1a(key, params) -> dict:
    logs = np.log(np.asarray(params["token_probs"], dtype=float))
    return {"prob_86": Answer(float(np.exp(logs.sum())), atol=5e-5),
            "logprob_86": Answer(float(logs.sum()), atol=2e-3),
            "main_contributor": Answer(("8", "6", "<eos>")[int(np.argmin(logs))])}


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
    return {"temperature_at_target": Answer(_temperature_for(params["logits"], params["target"]), atol=1e-6)}


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
LOW_BETA = 0.1
LOW_BETA_SLIDER = (0.097, 0.1, 0.102)  # the betas the demo's slider may show when set as close to 0.1 as it allows
PEAK_GRID = (0.05, 20.0, 2000)   # the betas 11.9(c)'s peak is looked for on (within the demo's slider)
PEAK_TOLERANCE = 0.008            # a beta whose true reward is this close to the peak is on the (flat) peak


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


def _separated(family: _Family, params: Mapping) -> bool:
    """Every numeric answer of the family differs from the chapter's by more than ``separation`` tolerances."""
    answer_key = _KEYS[family.name]
    for key in family.keys:
        own, chapter = answer_key.answers(key, params), _chapter_answers(key)
        for name, answer in own.items():
            if answer.numeric:
                reference = chapter[name]
                tolerance = reference.atol + reference.rtol * abs(reference.value)
                gap = abs(answer.value - reference.value)
                if gap <= answer_key.separation * max(tolerance, 1e-9) or gap <= 4 * PRINTED_SLACK * abs(reference.value):
                    return False
    return True


@lru_cache(maxsize=None)
def _chapter_answers(exercise_key: str) -> dict:
    family = _family(exercise_key)
    return _KEYS[family.name].answers(exercise_key, family.chapter)


def drawn(family: _Family, student: str) -> dict:
    """The first acceptable draw of ``family`` for ``student`` (the exact solvers judge each attempt)."""
    for attempt in range(MAX_ATTEMPTS):
        params = family.draw(_Picker(student, family.name, attempt))
        if _KEYS[family.name].acceptable(params) and _separated(family, params):
            return params
    raise RuntimeError(  # pragma: no cover - the tests draw many ids; a family this narrow is a bug
        f"no acceptable variant of {family.name} for {student!r} in {MAX_ATTEMPTS} attempts")


@lru_cache(maxsize=64)
def drawn_for(student: str) -> str:
    """Every family's parameters for ``student``, drawn here, as the JSON a process that must not draw them
    itself takes in ``LMPOLICY_VARIANT_PARAMS`` (the grading kernel, whose library lacks the solvers)."""
    student = _check_student(student)
    return json.dumps({"student": student, "families": {f.name: drawn(f, student) for f in _FAMILIES}})


def answers(exercise_key: str, student: str | None = _UNSET) -> dict[str, Answer]:
    """The expected answers of ``exercise_key`` for ``student``, each with the tolerance its check uses."""
    variant = for_exercise(exercise_key, student)
    return _KEYS[_family(exercise_key).name].answers(exercise_key, variant.params)


def answer(exercise_key: str, student: str | None = _UNSET) -> dict:
    """The exact expected answer(s) of ``exercise_key`` for ``student``, by the notebook's variable names.

    Computed with the library's exact solvers from the student's parameters (never a copied number).
    For 11.9(a) and (c), read off a demo, a value is the middle of what the slider can show.
    """
    return {name: a.value for name, a in answers(exercise_key, student).items()}


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


# -- the families' answers -------------------------------------------------------------------------

@dataclass(frozen=True)
class _Key:
    """A family's answer key: its answers, what makes a draw acceptable, how far from the chapter's."""

    answers: object                                      # (key, params) -> {name: Answer}
    acceptable: object = lambda params: True             # well-posed, same difficulty
    separation: float = 3.0                              # answers differ from the chapter's by this many tolerances


_KEYS = {
    "ex11_1a": _Key(_answers_1a, _acceptable_1a),
    "ex11_2b": _Key(_answers_2b, separation=1000.0),
    "ex11_4": _Key(_answers_4, _acceptable_4),
    "worked": _Key(_answers_worked, _acceptable_worked),
    "blind_spot": _Key(_answers_blind, _acceptable_blind),
    "ex11_9d": _Key(_answers_9d, _acceptable_9d, separation=2.0),
}
