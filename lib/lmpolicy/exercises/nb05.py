"""Notebook 05, the tilted optimum: Lab Tasks 4 and 5 and Exercises 11.5(b) to 11.9(c), and their visible checks.

Lab Task 4 is checked in two cells (``tilted_optimum``, then ``kl_objective``), each part declared with the same
shortcuts. The checks of one case of Lab Tasks 4 and 5 (``check_tilted_optimum`` ...) call the student's function
as they find it: the visible checks leave the shortcuts open, the hidden tests (``lmpolicy_grader.hidden_tests.nb05``)
run the same checks inside the declaration's ``blocked()``.
"""
from __future__ import annotations

import warnings

import numpy as np

from lmpolicy.demos.base import check_answer_not_from_demo
from lmpolicy.exact.scenarios import get_scenario
from lmpolicy.exact.temperature import temperature_curve
from lmpolicy.exact.tilting import frontier, soft_values as exact_soft_values, tilted_optimum as exact_tilted
from lmpolicy.exercises.exercise import Exercise, numbers
from lmpolicy.exercises.older_names import module_getattr
from lmpolicy.notebook import checks
from lmpolicy.notebook.forbidden import KL, TEMPERATURE, TILTING, Shortcuts
from lmpolicy.per_student import variants

# Lab Task 4's two parts: the library's solvers of the tilted optimum and its objective, and the power
# distribution (the tilted optimum of the reward log pi_ref); kl is given for other uses and computes a part
TASK4_SHORTCUTS = Shortcuts(library=(f"{TILTING}:tilted_optimum", f"{TILTING}:kl_objective", f"{TILTING}:frontier",
                                     f"{TILTING}:token_level_optimum", f"{TILTING}:soft_values",
                                     f"{TEMPERATURE}:power_distribution"),
                            parts=(f"{KL}:kl",))


# --- Lab Task 4 ------------------------------------------------------------------------------------------

def worked_example() -> tuple[np.ndarray, np.ndarray]:
    """The chapter's worked example, pi_ref and r over (aa, ab, ba, bb), as new arrays (the student's function
    may change the ones it is given)."""
    return np.array([0.42, 0.28, 0.15, 0.15]), np.array([0.0, 1.0, 0.0, 2.0])


def check_tilted_optimum(tilted_optimum, ref_probs, rewards, beta, expected_probs, expected_log_z, label,
                         numpy_warnings: list | None = None):
    """The student's ``tilted_optimum`` on one case; the RuntimeWarnings it raised (log of 0) go to
    ``numpy_warnings``. Returns its (pi_star, log_Z)."""
    what = f"tilted_optimum({label})"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = checks.call_student(tilted_optimum, ref_probs, rewards, beta)
    if numpy_warnings is not None:
        numpy_warnings.extend(w for w in caught if issubclass(w.category, RuntimeWarning))
    checks.check(isinstance(result, (tuple, list)) and len(result) == 2,
                 f"{what} returned {type(result).__name__}; return the pair (pi_star, log_Z)")
    pi_star, log_z = result
    log_z = checks.check_number(log_z, f"log_Z of {what}")
    checks.check_finite(pi_star, f"pi_star of {what}",
                        hint="exp overflowed, or every weight underflowed to 0: work in log space, with log-weights "
                             "log pi_ref + r/beta, and subtract their maximum before exponentiating")
    pi_star = np.asarray(pi_star, dtype=float)
    checks.check_shape(pi_star, np.shape(ref_probs), f"pi_star of {what}")
    checks.check(bool((pi_star >= 0).all()), f"pi_star of {what} has a negative probability")
    zero = np.asarray(ref_probs) == 0
    checks.check(bool((pi_star[zero] == 0).all()), f"pi_star of {what} gives probability to a response with "
                 "pi_ref = 0: a response the reference never writes must stay impossible (log 0 = -inf, no epsilon)")
    checks.check_close(pi_star.sum(), 1.0, f"the sum of pi_star of {what}", atol=1e-9,
                       hint="normalise: divide the weights by their sum")
    checks.check_close(pi_star, expected_probs, f"pi_star of {what}", atol=1e-9, rtol=1e-6)
    if not np.isclose(log_z, expected_log_z, rtol=1e-9, atol=1e-9):
        with np.errstate(divide="ignore"):
            shift = np.max(np.log(np.asarray(ref_probs, dtype=float)) + np.asarray(rewards, dtype=float) / beta)
        for wrong, says in ((beta * expected_log_z, "is beta * log Z; return log Z itself (beta * log_Z is J(pi*))"),
                            (expected_log_z / np.log(10), "is a base-10 log; log_Z is the natural log, np.log"),
                            (expected_log_z - shift, "leaves out the maximum m you subtracted: log Z = m + log(sum)")):
            checks.check(not np.isclose(log_z, wrong, rtol=1e-6, atol=1e-9), f"log_Z of {what} {says}")
    checks.check_close(log_z, expected_log_z, f"log_Z of {what}", atol=1e-9, rtol=1e-9,
                       hint="log Z = log sum_y pi_ref(y) e^(r(y)/beta), the natural log of Z itself")
    return pi_star, log_z


def _tilted_optimum_checks(exercise: Exercise, tilted_optimum) -> None:
    """The worked example at beta = 1 (Z = 2.439, J = 0.892); the same at beta = 1e-3, where e^(r/beta) overflows
    float64; and a response pi_ref never writes, with the top reward."""
    numpy_warnings = []  # RuntimeWarnings the student's function raised (log of 0), for a tip at the end
    worked_ref, worked_rewards = worked_example()
    weights = worked_ref * np.exp(worked_rewards)  # safe at beta = 1
    check_tilted_optimum(tilted_optimum, worked_ref, worked_rewards, 1.0, weights / weights.sum(),
                         np.log(weights.sum()), "worked, beta=1", numpy_warnings)
    # at beta = 1e-3 "bb" takes all the mass: the other weights are e^-1000 times smaller, so Z = 0.15 e^2000
    check_tilted_optimum(tilted_optimum, worked_ref, worked_rewards, 1e-3, [0.0, 0.0, 0.0, 1.0],
                         np.log(0.15) + 2 / 1e-3, "worked, beta=1e-3", numpy_warnings)
    # the fourth response is impossible (pi_ref = 0) and has the top reward; of the others the second wins outright
    check_tilted_optimum(tilted_optimum, np.array([0.5, 0.3, 0.2, 0.0]), np.array([0.0, 1.0, 0.5, 5.0]), 0.005,
                         [0.0, 1.0, 0.0, 0.0], np.log(0.3) + 1 / 0.005,
                         "pi_ref = (0.5, 0.3, 0.2, 0), r = (0, 1, 0.5, 5), beta=0.005", numpy_warnings)
    if numpy_warnings:
        print(f"Your answer is right, but numpy warned: {numpy_warnings[0].message}. Wrap np.log of the probabilities "
              "in `with np.errstate(divide=\"ignore\"):` to say that log 0 = -inf is intended.")


TILTED_OPTIMUM = Exercise("task4", _tilted_optimum_checks, TASK4_SHORTCUTS, part="task4__tilted_optimum_tests")


def check_kl_objective(kl_objective, policy, ref_probs, rewards, beta, expected, label):
    """The student's ``kl_objective`` on one case; returns what it gave."""
    what = f"kl_objective({label})"
    got = checks.check_number(checks.call_student(kl_objective, policy, ref_probs, rewards, beta), what)
    checks.check(not np.isnan(got), f"{what} is NaN: 0 * log 0 gave NaN. By convention 0 log 0 = 0: a response "
                 "the policy never writes adds nothing to the KL (sum only where policy_probs > 0)")
    if np.isinf(expected):
        checks.check(got == expected, f"{what} returned {got}; expected {expected} (the policy puts mass where pi_ref "
                     "has none, so the KL is infinite)")
        return got
    policy, ref_probs, rewards = (np.asarray(x, dtype=float) for x in (policy, ref_probs, rewards))
    reward = float(policy @ rewards)
    divergence = (reward - expected) / beta  # KL(pi || pi_ref), from the expected objective
    with np.errstate(divide="ignore", invalid="ignore"):
        swapped = float(np.sum(ref_probs * np.log(ref_probs / policy)))  # KL(pi_ref || pi), inf if pi misses one
    if not np.isclose(got, expected, rtol=1e-9, atol=1e-9):
        for wrong, says in ((reward - beta * swapped, "computes KL(pi_ref || pi): the objective's KL is "
                             "KL(pi || pi_ref) = sum_y pi(y) log(pi(y) / pi_ref(y)), weighted by the policy"),
                            (reward + beta * divergence, "adds the KL: J = E[r] - beta * KL subtracts it"),
                            (reward - divergence, "leaves out beta: J = E[r] - beta * KL"),
                            (reward - beta * divergence / np.log(10),
                             "takes base-10 logs; the KL is in nats (np.log)")):
            checks.check(not np.isclose(got, wrong, rtol=1e-6, atol=1e-9), f"{what} {says}")
    checks.check_close(got, expected, what, atol=1e-9, rtol=1e-9,
                       hint="J = sum_y pi(y) r(y) - beta * sum over the responses with pi(y) > 0 of "
                            "pi(y) log(pi(y) / pi_ref(y))")
    return got


def _kl_objective_checks(exercise: Exercise, kl_objective) -> None:
    """The Gibbs identity J(pi*) = beta log Z on the worked example, pi_ref itself, always "bb" (a policy that
    never writes three responses) at beta = 0.5, and mass where pi_ref has none."""
    worked_ref, worked_rewards = worked_example()
    tilted_weights = worked_ref * np.exp(worked_rewards)  # pi* at beta = 1, computed here so this check stands alone
    check_kl_objective(kl_objective, tilted_weights / tilted_weights.sum(), worked_ref, worked_rewards, 1.0,
                       np.log(tilted_weights.sum()), "pi* of the worked example, beta=1")  # J(pi*) = beta log Z
    check_kl_objective(kl_objective, worked_ref, worked_ref, worked_rewards, 1.0, 0.58, "pi_ref, worked, beta=1")
    check_kl_objective(kl_objective, np.array([0, 0, 0, 1.0]), worked_ref, worked_rewards, 0.5,
                       2 - 0.5 * np.log(1 / 0.15), "always bb, beta=0.5")
    check_kl_objective(kl_objective, np.array([0.25, 0.25, 0.5]), np.array([0.5, 0.5, 0.0]), np.array([0.0, 1.0, 2.0]),
                       1.0, -np.inf, "mass on a response with pi_ref = 0")


KL_OBJECTIVE = Exercise("task4", _kl_objective_checks, TASK4_SHORTCUTS, part="task4__kl_objective_tests")


# --- Lab Task 5 ------------------------------------------------------------------------------------------

def worked_two_tokens() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The worked example as a two-token model: pi_ref(y1), pi_ref(y2 | y1) and r(y1 y2), as new arrays."""
    return np.array([0.7, 0.3]), np.array([[0.6, 0.4], [0.5, 0.5]]), np.array([[0.0, 1.0], [0.0, 2.0]])


def check_token_level_optimum(token_level_optimum, first, second, rewards, beta, label):
    """The student's tables, checked against an independent brute force over all K * K responses."""
    what = f"token_level_optimum({label})"
    result = checks.call_student(token_level_optimum, first, second, rewards, beta)
    checks.check(isinstance(result, (tuple, list)) and len(result) == 4,
                 f"{what} returned {type(result).__name__}; return (first_star, second_star, V, V0)")
    first_star, second_star, V, V0 = result
    K = len(first)
    # the soft values first: the tables are built from them
    checks.check_finite(V, f"V of {what}", hint="exp overflowed: work in log space (log pi_ref + r/beta with "
                        "log 0 = -inf) and reduce with np.logaddexp.reduce")
    V = np.asarray(V, dtype=float)
    checks.check_shape(V, (K,), f"V of {what}")
    V0 = checks.check_number(V0, f"V0 of {what}")
    # brute force over all responses, in log space: pi*(y1 y2) = pi_ref(y1 y2) e^{r/beta} / Z
    with np.errstate(divide="ignore"):
        log_second = np.log(second)
        log_w = np.log(first)[:, None] + log_second + rewards / beta
    log_z = np.logaddexp.reduce(log_w.ravel())
    soft = beta * np.logaddexp.reduce(log_second + rewards / beta, axis=1)  # V(y1) by its definition
    if not np.allclose(V, soft, rtol=1e-8, atol=1e-8):
        for wrong, says in ((soft / beta, "is log sum pi_ref e^(r/beta): multiply by beta, V = beta log sum ..."),
                            (beta * np.logaddexp.reduce(log_second + rewards, axis=1),
                             "divides by beta outside only: inside the exponential it is r / beta"),
                            ((second * rewards).sum(axis=1), "is the pi_ref-average of the rewards; a soft value is "
                             "a soft maximum, V = beta log sum pi_ref e^(r/beta)")):
            checks.check(not np.allclose(V, wrong, rtol=1e-6, atol=1e-8), f"V of {what} {says}")
        reachable = np.where(second > 0, rewards, -np.inf).max(axis=1)
        checks.check(bool((V <= reachable + 1e-9).all()), f"V of {what} exceeds the largest reward pi_ref can reach "
                     "after that token: an impossible continuation (pi_ref = 0) must not count "
                     "(log 0 = -inf, no epsilon)")
    checks.check_close(V, soft, f"V of {what}", atol=1e-8, rtol=1e-8,
                       hint="V(y1) = beta * log sum_y2 pi_ref(y2 | y1) e^(r(y1 y2)/beta), natural log")
    if not np.isclose(V0, beta * log_z, rtol=1e-8, atol=1e-8):
        checks.check(not np.isclose(V0, log_z, rtol=1e-6, atol=1e-8),
                     f"V0 of {what} is log Z; return V0 = beta * log Z")
    checks.check_close(V0, beta * log_z, f"V0 of {what}", atol=1e-8, rtol=1e-8, hint="V0 = beta * log Z")
    for name, value in (("first_star", first_star), ("second_star", second_star)):
        checks.check_finite(value, f"{name} of {what}", hint="exp overflowed, or 0 * inf gave NaN: work in log space "
                            "(log pi_ref + r/beta with log 0 = -inf)")
    first_star, second_star = np.asarray(first_star, dtype=float), np.asarray(second_star, dtype=float)
    checks.check_shape(first_star, (K,), f"first_star of {what}")
    checks.check_shape(second_star, (K, K), f"second_star of {what}")
    checks.check(bool((first_star >= 0).all() and (second_star >= 0).all()), f"{what} has a negative probability")
    checks.check(bool((first_star[first == 0] == 0).all() and (second_star[second == 0] == 0).all()),
                 f"{what} gives probability to a token pi_ref never writes: it must stay impossible (no epsilon)")
    checks.check_close(first_star.sum(), 1.0, f"the sum of first_star of {what}", atol=1e-9,
                       hint="pi*(y1) = pi_ref(y1) e^((V(y1) - V0)/beta): subtract V0 = beta log Z")
    checks.check_close(second_star.sum(axis=1), np.ones(K), f"the row sums of second_star of {what}", atol=1e-9,
                       hint="each row pi*(. | y1) must sum to 1: subtract V(y1), not V0, in the second token")
    checks.check_close(first_star[:, None] * second_star, np.exp(log_w - log_z),
                       f"first_star[y1] * second_star[y1, y2] of {what} (the sequence-level pi*)", atol=1e-9, rtol=1e-6)
    return first_star, second_star, V, V0


def _token_level_optimum_checks(exercise: Exercise, token_level_optimum) -> None:
    """Against an independent brute force over all K * K responses: the worked example at beta = 1 (V(a) = 0.523,
    V(b) = 1.434, pi*(a) = 0.484) and at beta = 1e-3, and a 3-token model with impossible tokens."""
    first_v, second_v, rewards_v = worked_two_tokens()
    check_token_level_optimum(token_level_optimum, first_v, second_v, rewards_v, 1.0, "worked, beta=1")
    check_token_level_optimum(token_level_optimum, first_v, second_v, rewards_v, 1e-3, "worked, beta=1e-3")
    # token c is never written first, and the continuations with the largest rewards are impossible
    check_token_level_optimum(token_level_optimum, np.array([0.6, 0.4, 0.0]),
                              np.array([[0.5, 0.5, 0.0], [0.0, 0.3, 0.7], [0.2, 0.3, 0.5]]),
                              np.array([[0.0, 1.0, 4.0], [5.0, 0.0, 2.0], [3.0, 3.0, 3.0]]), 0.05,
                              "3 tokens, zeros, beta=0.05")


TOKEN_LEVEL_OPTIMUM = Exercise(
    "task5", _token_level_optimum_checks,
    Shortcuts(library=(f"{TILTING}:tilted_optimum", f"{TILTING}:soft_values", f"{TILTING}:token_level_optimum",
                       f"{TILTING}:frontier")))


# --- Exercise 11.5(b) ------------------------------------------------------------------------------------

SOFT_VALUE_NAMES = ("V_a", "V_b", "beta_log_Z", "pi_star_a", "pi_star_bb")


def _soft_values_checks(exercise: Exercise, namespace) -> None:
    """Types, ranges, and that the five numbers agree with each other at beta = 0.5 (three decimals are enough;
    the hidden tests compare them with the exact solver)."""
    answer = numbers(namespace, SOFT_VALUE_NAMES)
    V_a, V_b, V0, first_a, whole_bb = answer.values()
    checks.check(0 <= first_a <= 1 and 0 <= whole_bb <= 1, "pi_star_a and pi_star_bb are probabilities")
    checks.check_own_variant(exercise.key, answer)
    worked_v = variants.scenario(exercise.key)  # your model (the chapter's without a student id)
    (ref_a, ref_b), ref_after = worked_v.model.tables
    rewards_v = worked_v.rewards.reshape(2, 2)
    values_at_1 = exact_soft_values(worked_v.model, worked_v.rewards, 1.0)[1]
    checks.check(not np.allclose([V_a, V_b], values_at_1, atol=2e-3),
                 "V_a and V_b are the soft values at beta = 1 (section 4); this exercise redoes the example at "
                 "beta = 0.5")
    mean_a, mean_b = ref_after[0] @ rewards_v[0], ref_after[1] @ rewards_v[1]
    checks.check(mean_a + 1e-3 < V_a < rewards_v[0].max() - 1e-3 and mean_b + 1e-3 < V_b < rewards_v[1].max() - 1e-3,
                 "a soft value is a soft maximum: it lies strictly between the pi_ref-average and the maximum of the "
                 f"rewards that can follow ({mean_a:.3g} and {rewards_v[0].max():g} after a, {mean_b:.3g} and "
                 f"{rewards_v[1].max():g} after b)",
                 hint="V(y1) = beta * log sum_y2 pi_ref(y2 | y1) e^(r/beta), with the natural log and beta = 0.5")
    beta = 0.5
    root = beta * np.log(ref_a * np.exp(V_a / beta) + ref_b * np.exp(V_b / beta))  # V0 from your V(a), V(b)
    checks.check(abs(V0 - root) < 3e-3 or abs(V0 - root / beta) > 3e-3,
                 "beta_log_Z is log Z; the answer is beta * log Z")
    checks.check(abs(V0 - root) < 3e-3, "beta_log_Z does not agree with your V_a and V_b: V0 is their soft maximum, "
                 "beta * log(pi_ref(a) e^(V(a)/beta) + pi_ref(b) e^(V(b)/beta)), at beta = 0.5")
    first_from_values = ref_a * np.exp((V_a - V0) / beta)
    checks.check(abs(first_a - first_from_values) < 3e-3 or abs(first_a - (1 - first_from_values)) > 3e-3,
                 "pi_star_a is the optimum's probability of b as the first token; the answer asks for a")
    checks.check(abs(first_a - first_from_values) < 3e-3, "pi_star_a does not agree with your V_a and beta_log_Z: "
                 "pi*(a) = pi_ref(a) e^((V(a) - V0)/beta)",
                 hint=f"the reference's own pi_ref(a) = {ref_a:g} is not the answer")
    ref_bb, reward_bb = ref_b * ref_after[1, 1], rewards_v[1, 1]
    bb_given_b = ref_after[1, 1] * np.exp((reward_bb - V_b) / beta)  # pi*(b | b) from your V(b)
    checks.check(abs(whole_bb - bb_given_b) > 3e-3 or abs(bb_given_b - ref_bb * np.exp((reward_bb - V0) / beta)) < 3e-3,
                 "pi_star_bb is pi*(b | b), the second token's probability; the answer is the whole response's, "
                 "pi*(b) * pi*(b | b)")
    checks.check(abs(whole_bb - ref_bb * np.exp((reward_bb - V0) / beta)) < 5e-3, "pi_star_bb does not agree with your "
                 "beta_log_Z: pi*(bb) = pi_ref(bb) e^((r(bb) - V0)/beta) = pi*(b) * pi*(b | b)")
    # your own model's value itself (a failure says which number is off, never the right value)
    checks.check_variant_answers(exercise.key, answer, show_expected=False)


SOFT_VALUES = Exercise("ex11_5b", _soft_values_checks)


# --- Exercise 11.7 ---------------------------------------------------------------------------------------

def _beta_for_temperature_checks(exercise: Exercise, beta_for_temperature) -> None:
    """beta_for_temperature returns a positive number that grows with T, and at that beta the tilted optimum with
    reward log pi_ref is the power distribution p_T (on a small reference)."""
    betas = [checks.check_number(exercise.call(beta_for_temperature, T), f"beta_for_temperature({T})")
             for T in (0.2, 0.5, 0.8)]
    checks.check(all(beta > 0 for beta in betas), "beta must be positive for 0 < T < 1")
    checks.check(betas[0] < betas[1] < betas[2], "a temperature closer to 1 changes less, so it needs a larger beta")
    small_ref = np.array([0.5, 0.3, 0.2])
    for T, beta in zip((0.2, 0.5, 0.8), betas):
        tilted = small_ref * np.exp(np.log(small_ref) / beta)
        powered = small_ref ** (1 / T)
        checks.check(np.allclose(tilted / tilted.sum(), powered / powered.sum(), atol=1e-9),
                     f"at beta_for_temperature({T}) = {beta:.4g}, pi_ref e^(log pi_ref / beta) / Z is not the power "
                     f"distribution pi_ref^(1/T) / Z",
                     hint="write pi_ref e^(log pi_ref / beta) as a power of pi_ref and match the exponents")


BETA_FOR_TEMPERATURE = Exercise("ex11_7a", _beta_for_temperature_checks)


def _power_and_token_temperature_checks(exercise: Exercise, power_probs, token_temperature_probs) -> None:
    """Two distributions over the three responses ("aa", "ab", "bc"), and p_T is a power."""
    for name, value in (("power_probs", power_probs), ("token_temperature_probs", token_temperature_probs)):
        checks.check(value is not None, f"{name} is None: the answer is still a stub")
        checks.check_finite(value, name)
        value = np.asarray(value, dtype=float)
        checks.check_shape(value, (3,), name)
        checks.check(bool((value >= 0).all()), f"{name} has a negative probability")
        checks.check_close(value.sum(), 1.0, f"the sum of {name}", atol=1e-6)
    reference_responses = np.array([0.5 * 0.5, 0.5 * 0.5, 0.5 * 1.0])  # pi_ref of aa, ab, bc
    squared = reference_responses ** 2
    checks.check(np.allclose(power_probs, squared / squared.sum(), atol=2e-3),
                 "power_probs is not proportional to pi_ref(y)^(1/T) = pi_ref(y)^2 over the responses (aa, ab, bc)",
                 hint="the power distribution raises whole-response probabilities to 1/T and renormalises")
    checks.check(not np.allclose(power_probs, token_temperature_probs, atol=2e-3),
                 "power_probs and token_temperature_probs are the same distribution, but the exercise shows they "
                 "differ",
                 hint="token-level temperature sharpens each next-token distribution separately, then multiplies along "
                      "the response")


POWER_PROBS = Exercise("ex11_7b", _power_and_token_temperature_checks)


# --- Exercise 11.8(b) ------------------------------------------------------------------------------------

BLIND_SPOT_NAMES = ("beta_equal_mass", "true_reward_at_beta_0_1")


def _beta_equal_mass_checks(exercise: Exercise, namespace) -> None:
    """beta_equal_mass gives bb and cc equal mass; the true reward is weighted by the true rewards."""
    answer = numbers(namespace, BLIND_SPOT_NAMES)
    beta_eq, true_low = answer["beta_equal_mass"], answer["true_reward_at_beta_0_1"]
    checks.check_own_variant(exercise.key, answer)
    blind_v = variants.scenario(exercise.key)  # your blind spot (the chapter's without a student id)
    ref_v = blind_v.model.response_probs()
    bb_v, cc_v = blind_v.model.response_index("bb"), blind_v.model.response_index("cc")
    checks.check(beta_eq > 0, f"beta_equal_mass = {beta_eq:.4g} must be positive",
                 hint="solve pi_ref(bb) e^(r(bb)/beta) = pi_ref(cc) e^(r(cc)/beta) for beta, and mind which ratio ends "
                      "up under the log")
    mass_ratio = (ref_v[bb_v] * np.exp(blind_v.rewards[bb_v] / beta_eq)
                  / (ref_v[cc_v] * np.exp(blind_v.rewards[cc_v] / beta_eq)))
    checks.check(abs(mass_ratio - 1) < 0.01,
                 f"at beta_equal_mass = {beta_eq:.4g}, pi*(bb) / pi*(cc) = {mass_ratio:.3g}, not 1",
                 hint="solve pi_ref(bb) e^(r(bb)/beta) = pi_ref(cc) e^(r(cc)/beta) for beta, with the natural log")
    checks.check(true_low <= 1.0, f"true_reward_at_beta_0_1 = {true_low:.4g} is above 1, the largest true reward here: "
                 "weight pi* by blind.true_rewards, not by the reward model's blind.rewards")
    checks.check(true_low >= 0, "true rewards in this scenario lie between 0 and 1, so their expectation does too")
    honest_optimum = exact_tilted(blind_v.model, blind_v.true_rewards, 0.1).probs  # what a perfect reward model gives
    checks.check(abs(true_low - honest_optimum @ blind_v.true_rewards) > 2e-3,
                 "true_reward_at_beta_0_1 tilts pi* by the true rewards; RL tilts it by the reward model's scores "
                 "(blind.rewards), and you then measure that pi* with blind.true_rewards")
    # your own model's value itself (a failure says which number is off, never the right value)
    checks.check_variant_answers(exercise.key, {"true_reward_at_beta_0_1": true_low}, show_expected=False)


BETA_EQUAL_MASS = Exercise("ex11_8b", _beta_equal_mass_checks)


# --- Exercise 11.9(a)-(c): numbers read off the demo -----------------------------------------------------

DEMO_SOFT_VALUE_NAMES = ("demo_V_a", "demo_V_b", "demo_beta_log_Z", "demo_pi_star_bb")


def _demo_soft_values_checks(exercise: Exercise, namespace) -> None:
    """Numbers read off the demo (slider-resolution answers are accepted)."""
    check_answer_not_from_demo()  # while nbgrader runs this notebook, an answer taken from the demo gets nothing
    answer = numbers(namespace, DEMO_SOFT_VALUE_NAMES)
    checks.check(0 <= answer["demo_pi_star_bb"] <= 1, "demo_pi_star_bb is a probability")
    checks.check_own_variant(exercise.key, answer)
    worked_v = variants.scenario(exercise.key)  # your model (the chapter's worked example without a student id)
    checks.check(not np.allclose([answer["demo_V_a"], answer["demo_V_b"]],
                                 exact_soft_values(worked_v.model, worked_v.rewards, 1.0)[1], atol=3e-3),
                 "demo_V_a and demo_V_b are the soft values at beta = 1, where the demo starts: move the beta slider "
                 "to 0.5")
    checks.check(answer["demo_V_a"] < answer["demo_beta_log_Z"] < answer["demo_V_b"],
                 "on the tree, beta log Z (the root's value) is a soft maximum of V(a) and V(b): it lies between them")
    # your own model's value itself (a failure says which number is off, never the right value)
    checks.check_variant_answers(exercise.key, answer, show_expected=False,
                                 hint="set beta to 0.5 in your model's scenario of the demo")


DEMO_SOFT_VALUES = Exercise("ex11_9a", _demo_soft_values_checks)


TEMPERATURE_NAMES = ("T_matching_kl", "reward_at_T_matching_kl", "reward_pi_star_beta_2", "kl_at_max_T",
                     "reward_at_max_T")


def _t_matching_kl_checks(exercise: Exercise, namespace) -> None:
    """Types and ranges, your T gives pi*'s KL at beta = 2, and E[r] is not J; the hidden tests accept any slider
    position consistent with your readouts."""
    answer = numbers(namespace, TEMPERATURE_NAMES)
    checks.check(0 < answer["T_matching_kl"] < 1, "T_matching_kl must be a temperature below 1")
    checks.check(answer["kl_at_max_T"] >= 0, "a KL is never negative")
    worked_v = get_scenario("worked")
    kl_at_your_T = temperature_curve(worked_v.model, worked_v.rewards, [answer["T_matching_kl"]]).kl[0]
    checks.check(abs(kl_at_your_T - exact_tilted(worked_v.model, worked_v.rewards, 2.0).kl) < 0.012,
                 f"at T = {answer['T_matching_kl']:.3g} the KL of pi_ref at temperature T is {kl_at_your_T:.3f}, not "
                 "about 0.08 (that of pi* at beta = 2): move T until the temperature readout's KL matches")
    objective_at_2 = exact_tilted(worked_v.model, worked_v.rewards, 2.0).objective
    checks.check(abs(answer["reward_pi_star_beta_2"] - objective_at_2) > 5e-3,
                 "reward_pi_star_beta_2 is J(pi*) = E[r] - beta KL; record pi*'s expected reward E[r]")


T_MATCHING_KL = Exercise("ex11_9b", _t_matching_kl_checks)


BEST_TRUE_NAMES = ("beta_best_true", "kl_at_best_true", "proxy_at_best_true", "proxy_at_beta_0_1", "true_at_beta_0_1")


def _beta_best_true_checks(exercise: Exercise, namespace) -> None:
    """Types and ranges, your beta sits on the (flat) peak of the true reward, and the proxy and the true reward are
    not swapped; the hidden tests check that your readouts are consistent."""
    check_answer_not_from_demo()  # while nbgrader runs this notebook, an answer taken from the demo gets nothing
    answer = numbers(namespace, BEST_TRUE_NAMES)
    checks.check_own_variant(exercise.key, {name: answer[name] for name in BEST_TRUE_NAMES[1:]})
    checks.check(answer["beta_best_true"] > 0 and answer["kl_at_best_true"] >= 0,
                 "beta is positive and a KL is never negative")
    checks.check(0 <= answer["true_at_beta_0_1"] <= 1,
                 f"true_at_beta_0_1 = {answer['true_at_beta_0_1']:.4g}, but the true rewards here lie between 0 and 1: "
                 "are the proxy (the reward model's E[r]) and the true reward (dashed red) swapped?")
    blind_v = variants.scenario(exercise.key)  # your blind spot (the chapter's without a student id)
    true_curve = frontier(blind_v.model, blind_v.rewards, np.geomspace(0.05, 20, 400)).probs @ blind_v.true_rewards
    true_at_yours = exact_tilted(blind_v.model, blind_v.rewards, answer["beta_best_true"]).probs @ blind_v.true_rewards
    checks.check(true_at_yours >= true_curve.max() - 0.008,
                 f"at beta = {answer['beta_best_true']:.3g} the true reward of pi* is below its peak: find the highest "
                 "point of the dashed red curve (the crossover of 11.8(b) is not where it peaks)")
    # your readouts at your beta, in your own model (a failure never shows the right value)
    at_yours = exact_tilted(blind_v.model, blind_v.rewards, answer["beta_best_true"])
    checks.check_close(answer["kl_at_best_true"], at_yours.kl, "kl_at_best_true for your beta", atol=0.02,
                       show_expected=False)
    checks.check_close(answer["proxy_at_best_true"], at_yours.expected_reward, "proxy_at_best_true for your beta",
                       atol=0.01, show_expected=False)
    at_low_beta = {name: answer[name] for name in ("proxy_at_beta_0_1", "true_at_beta_0_1")}
    checks.check_variant_answers(exercise.key, at_low_beta, show_expected=False,
                                 hint="set beta as close to 0.1 as the slider allows")


BETA_BEST_TRUE = Exercise("ex11_9c", _beta_best_true_checks)

EXERCISES = (TILTED_OPTIMUM, KL_OBJECTIVE, TOKEN_LEVEL_OPTIMUM, SOFT_VALUES, BETA_FOR_TEMPERATURE, POWER_PROBS,
             BETA_EQUAL_MASS, DEMO_SOFT_VALUES, T_MATCHING_KL, BETA_BEST_TRUE)

__getattr__ = module_getattr(__name__)  # older copies' names of its exercises, and what it holds
