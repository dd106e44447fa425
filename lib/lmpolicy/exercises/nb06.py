"""Notebook 06, the KL estimators k1, k2, k3: Lab Task 3, 11.4(c), 11.4(d), 11.6(c) and 11.9(d), and their visible
checks.

The numeric answers of 11.4(c), 11.4(d), 11.9(d) and the verdicts of 11.6(c) are read by name from the check cell's
``globals()``, never passed as names: a name a test cell reads must be made by a plain assignment in its answer cell
(``lmpolicy.notebook.code_rule``), and the chapter's own answers unpack several at once (``k1_common, k1_rare =
log_ratio``). A name the answer cell has not set reads as None, which the checks call a stub.
"""
from __future__ import annotations

import math

import torch

from lmpolicy.demos.base import check_answer_not_from_demo
from lmpolicy.exercises.exercise import Exercise, numbers
from lmpolicy.exercises.older_names import module_getattr
from lmpolicy.notebook import checks
from lmpolicy.notebook.forbidden import KL, KL_PLACEMENT, Shortcuts
from lmpolicy.per_student import variants

# the library's estimators (Task 3 writes them; 11.6(c) differentiates them)
ESTIMATES = Shortcuts(library=(f"{KL}:kl_estimates", f"{KL_PLACEMENT}:kl_estimate"))


# --- Lab Task 3: kl_estimators -----------------------------------------------------------------------------

def check_kl_estimators(kl_estimators, logp, ref_logp, label):
    """Call the student's kl_estimators; compare with the definitions written through u = pi_ref / pi_theta."""
    what = f"kl_estimators({label})"
    result = checks.call_student(kl_estimators, logp, ref_logp)
    checks.check(isinstance(result, (tuple, list)) and len(result) == 3,
                 f"{what} returned {type(result).__name__}; return the tuple (k1, k2, k3)")
    u = torch.exp(ref_logp.detach().double() - logp.detach().double())
    log_ratio = -torch.log(u)
    wanted = {"k1": log_ratio, "k2": 0.5 * log_ratio ** 2, "k3": u - 1 - torch.log(u)}
    mistakes = {"k1": ((-log_ratio, "has the wrong sign: l = log pi_theta - log pi_ref"),),
                "k2": ((log_ratio ** 2, "is l^2: k2 = l^2 / 2 has a factor 1/2"),),
                "k3": ((torch.exp(log_ratio) - 1 - log_ratio, "uses the ratio upside down: u = pi_ref / pi_theta "
                        "= e^(-l), so k3 = e^(-l) - 1 + l"),
                       (u - 1 + torch.log(u), "has the wrong sign on the log term: k3 = u - 1 - log u = e^(-l) - 1 + l"))}
    for name, value in zip(("k1", "k2", "k3"), result):
        checks.check_type(value, torch.Tensor, f"{name} of {what}")
        checks.check_shape(value, logp.shape, f"{name} of {what}")
        if logp.requires_grad:
            checks.check(value.requires_grad, f"{name} of {what} carries no gradient: compute it from logp with torch "
                         "operations (no .detach(), .item() or numpy), so that a loss can be differentiated")
        if not torch.allclose(value.detach().double(), wanted[name], atol=1e-6, rtol=1e-5):
            for wrong, says in mistakes[name]:
                checks.check(not torch.allclose(value.detach().double(), wrong, atol=1e-6, rtol=1e-5),
                             f"{name} of {what} {says}")
        checks.check_close(value, wanted[name], f"{name} of {what}", atol=1e-6, rtol=1e-5)
    return result


def _kl_estimators_checks(exercise: Exercise, kl_estimators) -> None:
    # the chapter's three-token example: pi_theta = (0.6, 0.3, 0.1), pi_ref = (0.4, 0.4, 0.2)
    p_theta = torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64)
    p_ref = torch.tensor([0.4, 0.4, 0.2], dtype=torch.float64)
    with exercise.blocked():
        _, _, k3 = check_kl_estimators(kl_estimators, p_theta.log().requires_grad_(), p_ref.log(),
                                       "log pi_theta, log pi_ref")
    exact_kl = float((p_theta * (p_theta / p_ref).log()).sum())
    checks.check_close(float((p_theta * k3.detach()).sum()), exact_kl, "the mean of k3 under pi_theta", atol=1e-9,
                       hint="k3 must be unbiased: its mean under pi_theta is the exact KL")


KL_ESTIMATORS = Exercise("task3", _kl_estimators_checks, ESTIMATES)


# --- 11.4(c): the estimators' values and spreads on the student's two-token model ---------------------------

ESTIMATOR_VALUE_NAMES = ("kl_exact", "k1_common", "k1_rare", "k3_common", "k3_rare", "std_k1", "std_k3")


def _estimator_values_checks(exercise: Exercise, namespace) -> None:
    # types, and that the values are consistent with each other (k3 from the same l as k1, both estimators
    # unbiased, standard deviations of two-valued variables)
    answer = numbers(namespace, ESTIMATOR_VALUE_NAMES)
    checks.check_own_variant(exercise.key, answer)
    # the student's pi_theta (the chapter's without a student id)
    common_p, rare_p = variants.for_exercise(exercise.key).p_theta
    checks.check(answer["kl_exact"] >= 0, "kl_exact is negative, but a KL is never negative: "
                 "KL(pi_theta || pi_ref) = sum pi_theta log(pi_theta / pi_ref)")
    for token in ("common", "rare"):
        log_ratio, k3 = answer[f"k1_{token}"], answer[f"k3_{token}"]
        from_log_ratio = math.exp(-log_ratio) - 1 + log_ratio  # k3 from the student's own k1 = l
        tolerance = 1e-2 * max(1, abs(from_log_ratio))  # loose: three significant digits of l move k3_rare by 0.1
        if abs(k3 - from_log_ratio) > tolerance:
            checks.check(abs(k3 - (math.exp(-log_ratio) - 1 - log_ratio)) > tolerance,
                         f"k3_{token} has the wrong sign on the log term: k3 = u - 1 - log u = e^(-l) - 1 + l")
            checks.check(abs(k3 - (math.exp(log_ratio) - 1 - log_ratio)) > tolerance,
                         f"k3_{token} uses the ratio upside down: u = pi_ref / pi_theta = e^(-l)")
        checks.check(abs(k3 - from_log_ratio) <= tolerance,
                     f"k3_{token} is not e^(-l) - 1 + l for your l = k1_{token}", hint="l = log(pi_theta / pi_ref), "
                     "with the natural log, and k3 = u - 1 - log u with u = pi_ref / pi_theta = e^(-l)")
    checks.check(answer["std_k1"] >= 0 and answer["std_k3"] >= 0, "a standard deviation cannot be negative")
    checks.check(answer["k3_common"] >= 0 and answer["k3_rare"] >= 0, "k3 is never negative (Exercise 11.4(a))")
    checks.check_close(common_p * answer["k1_common"] + rare_p * answer["k1_rare"], answer["kl_exact"],
                       "the mean of your k1 values under pi_theta", atol=2e-3, hint="k1 is unbiased: its mean is the KL")
    checks.check_close(common_p * answer["k3_common"] + rare_p * answer["k3_rare"], answer["kl_exact"],
                       "the mean of your k3 values under pi_theta", atol=2e-3, hint="k3 is unbiased: its mean is the KL")
    for k in ("k1", "k3"):
        # a variable with two values a (probability p) and b has standard deviation sqrt(p (1 - p)) |a - b|
        two_point = math.sqrt(common_p * rare_p) * abs(answer[f"{k}_common"] - answer[f"{k}_rare"])
        checks.check(abs(answer[f"std_{k}"] - two_point) <= 5e-3 * max(1, two_point),
                     f"std_{k} is not the standard deviation of your two {k} values under pi_theta",
                     hint="subtract the mean before squaring: std = sqrt(E[(k - E[k])^2]), not sqrt(E[k^2])")
    # the student's own model's value itself (a failure says which number is off, never the right value)
    checks.check_variant_answers(exercise.key, answer, show_expected=False)


ESTIMATOR_VALUES = Exercise("ex11_4c", _estimator_values_checks)


# --- 11.4(d): batch estimates of 16 draws with and without the rare token -----------------------------------

BATCH_ESTIMATE_NAMES = ("p_no_rare", "k3_estimate_none", "k1_estimate_none", "k3_estimate_one")


def _batch_estimates_checks(exercise: Exercise, namespace) -> None:
    # types, ranges, and two plausibility checks that do not give the numbers away
    answer = numbers(namespace, BATCH_ESTIMATE_NAMES)
    checks.check_own_variant(exercise.key, answer)
    yours = variants.for_exercise(exercise.key)  # the student's model of 11.4(c) (the chapter's without a student id)
    u_rare = yours.p_ref[1] / yours.p_theta[1]
    checks.check(0 <= answer["p_no_rare"] <= 1, f"p_no_rare = {answer['p_no_rare']:.4g} is not a probability")
    checks.check(answer["p_no_rare"] > 0.5, f"p_no_rare = {answer['p_no_rare']:.3g} makes a batch without a rare token "
                 "unlikely, but 16 draws hold only 0.16 rare tokens on average: is it the probability of at least one?")
    checks.check(answer["k3_estimate_none"] >= 0 and answer["k3_estimate_one"] >= 0, "a k3 estimate is never negative")
    # one rare token adds its k3 = u - 1 - log u < u = pi_ref(rare) / pi_theta(rare) to a sum of 16 values
    checks.check(answer["k3_estimate_one"] < answer["k3_estimate_none"] + u_rare / 16,
                 "k3_estimate_one is too large for the mean of 16 values of which one is rare: the batch estimate is the "
                 "mean of its 16 per-token values")
    # the student's own model's value itself (a failure says which number is off, never the right value)
    checks.check_variant_answers(exercise.key, answer, show_expected=False)


BATCH_ESTIMATES = Exercise("ex11_4d", _batch_estimates_checks)


# --- 11.6(c): the expected gradients of the three estimators as losses, and which KL each gives ----------------

OPTIONS = ("zero", "reverse KL", "forward KL")
OPTION_FUNCTIONS = {"zero": "zero", "reverse KL": "your reverse_kl_gradient", "forward KL": "your forward_kl_gradient"}


def kl_pair(theta, ref_probs):
    p = torch.softmax(theta, -1)
    return float((p * (p / ref_probs).log()).sum()), float((ref_probs * (ref_probs / p).log()).sum())


def estimator_losses(theta, weights, ref_probs):
    """sum_y weights(y) k_i(y) for k1, k2, k3 at logits theta, the weights fixed numbers."""
    log_ratio = torch.log_softmax(theta, -1) - ref_probs.log()
    per_token = (log_ratio, 0.5 * log_ratio ** 2, torch.exp(-log_ratio) - 1 + log_ratio)
    return torch.stack([(weights * k).sum() for k in per_token])


def finite_difference_gradients(theta, ref_probs, step=1e-6):
    """Central differences, one logit at a time, of (reverse KL, forward KL) and of the three estimator losses."""
    weights = torch.softmax(theta, -1)
    kls, losses = torch.zeros(2, theta.shape[0], dtype=torch.float64), torch.zeros(3, theta.shape[0], dtype=torch.float64)
    for i in range(theta.shape[0]):
        bump = torch.zeros_like(theta)
        bump[i] = step
        up, down = kl_pair(theta + bump, ref_probs), kl_pair(theta - bump, ref_probs)
        kls[:, i] = (torch.tensor(up, dtype=torch.float64) - torch.tensor(down, dtype=torch.float64)) / (2 * step)
        losses[:, i] = (estimator_losses(theta + bump, weights, ref_probs)
                        - estimator_losses(theta - bump, weights, ref_probs)) / (2 * step)
    return kls[0], kls[1], losses


def check_gradients(expected_estimator_gradients, reverse_kl_gradient, forward_kl_gradient, theta, ref_probs):
    """The student's two KL gradients against finite differences of the KLs, and their g's against finite
    differences of the loss sum_y pi_theta(y) k(y) with the weights held fixed: (g's, reverse, forward gradient)."""
    reverse_fd, forward_fd, losses_fd = finite_difference_gradients(theta, ref_probs)
    shape = theta.shape
    for fn, expected in ((reverse_kl_gradient, reverse_fd), (forward_kl_gradient, forward_fd)):
        got = checks.check_type(checks.call_student(fn, theta.clone(), ref_probs), torch.Tensor, f"{fn.__name__}(...)")
        checks.check_shape(got, shape, f"{fn.__name__}(...)")
        checks.check_close(got, expected, f"{fn.__name__}(...)", atol=1e-6, rtol=1e-5,
                           hint="compare with a finite difference: (KL(theta + h e_i) - KL(theta - h e_i)) / 2h")
    result = checks.call_student(expected_estimator_gradients, theta.clone(), ref_probs)
    checks.check(isinstance(result, (tuple, list)) and len(result) == 3,
                 f"expected_estimator_gradients returned {type(result).__name__}; return the tuple (g1, g2, g3)")
    for i, g in enumerate(result, start=1):
        checks.check_type(g, torch.Tensor, f"g{i} of expected_estimator_gradients(...)")
        checks.check_shape(g, shape, f"g{i} of expected_estimator_gradients(...)")
        checks.check_finite(g, f"g{i} of expected_estimator_gradients(...)")
        checks.check(abs(float(g.sum())) < 1e-8, f"the entries of g{i} sum to {float(g.sum()):.3g}; any gradient with "
                     "respect to softmax logits sums to 0 (adding a constant to every logit changes nothing)")
        checks.check(torch.allclose(g.detach().double(), losses_fd[i - 1], atol=1e-6, rtol=1e-5),
                     f"g{i} is not the gradient of sum_y pi_theta(y) k{i}(y) with the weights pi_theta(y) held fixed",
                     hint="the weights are the sampling distribution, not part of the loss: use logp.exp().detach()")
    return result, reverse_fd, forward_fd


def _estimator_gradients_checks(exercise: Exercise, expected_estimator_gradients, reverse_kl_gradient,
                                forward_kl_gradient, namespace) -> None:
    # shapes; the KL gradients against finite differences of the KLs; the g's against finite differences of the
    # loss sum_y pi_theta(y) k(y) with the weights held fixed; the verdicts against the student's own g's
    theta = torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64).log()
    ref_probs = torch.tensor([0.4, 0.4, 0.2], dtype=torch.float64)
    with exercise.blocked():
        gradients, _, _ = check_gradients(expected_estimator_gradients, reverse_kl_gradient, forward_kl_gradient,
                                          theta, ref_probs)
        measured = {"zero": torch.zeros_like(theta), "reverse KL": reverse_kl_gradient(theta.clone(), ref_probs),
                    "forward KL": forward_kl_gradient(theta.clone(), ref_probs)}
    for i, g in enumerate(gradients, start=1):
        name = f"k{i}_loss_gives"
        value = namespace.get(name)
        checks.check(value in OPTIONS, f"{name} is {value!r}; set it to one of {OPTIONS}")
        checks.check(torch.allclose(g.detach().double(), measured[value].double(), atol=1e-8),
                     f"{name} is {value!r}, but your g{i} differs from {OPTION_FUNCTIONS[value]}: "
                     "set each verdict to what your own gradients show")


ESTIMATOR_GRADIENTS = Exercise("ex11_6c", _estimator_gradients_checks, ESTIMATES)


# --- 11.9(d): what the estimator demo shows at the student's own setting ------------------------------------

def _demo_readings_checks(exercise: Exercise, namespace) -> None:
    # types, and one misconception; the hidden tests compare with the exact distribution of the batch estimates
    check_answer_not_from_demo()  # while nbgrader runs this notebook, an answer taken from the demo gets nothing
    shown_kl = checks.check_number(namespace.get("true_kl"), "true_kl")
    checks.check(shown_kl > 0, f"true_kl = {shown_kl:.4g}, but pi_theta differs from pi_ref here, so their KL is positive")
    fraction = checks.check_number(namespace.get("fraction_k3_below_kl"), "fraction_k3_below_kl")
    checks.check_own_variant(exercise.key, {"true_kl": shown_kl, "fraction_k3_below_kl": fraction})
    checks.check(0 <= fraction <= 1, f"fraction_k3_below_kl = {fraction:.3g} is not a fraction between 0 and 1")
    checks.check(abs(fraction - 0.5) > 1e-9, "fraction_k3_below_kl is exactly 0.5: an unbiased estimator's mean is the "
                 "KL, but half of its values lie below its median, not its mean; read the share off the histogram")
    checks.check(namespace.get("smallest_std") in ("k1", "k2", "k3"),
                 f"smallest_std is {namespace.get('smallest_std')!r}; set it to 'k1', 'k2' or 'k3'")
    checks.check(namespace.get("smaller_std_of_k1_k3") in ("k1", "k3"),
                 f"smaller_std_of_k1_k3 is {namespace.get('smaller_std_of_k1_k3')!r}; set it to 'k1' or 'k3'")
    # the student's own setting's exact KL, and the share within 0.04 of the exact one (a failure never shows the
    # right value)
    checks.check_variant_answers(exercise.key, {"true_kl": shown_kl, "fraction_k3_below_kl": fraction},
                                 show_expected=False, hint="let a few thousand batches accumulate at your own setting")


DEMO_READINGS = Exercise("ex11_9d", _demo_readings_checks)

EXERCISES = (KL_ESTIMATORS, ESTIMATOR_VALUES, BATCH_ESTIMATES, ESTIMATOR_GRADIENTS, DEMO_READINGS)

__getattr__ = module_getattr(__name__)  # older copies' names of its exercises, and what it holds
