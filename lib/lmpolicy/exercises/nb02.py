"""Notebook 02, temperature, top-k and top-p, and the temperature's effect on the policy: its exercises and their
visible checks."""
from __future__ import annotations

import math

import numpy as np
import torch

from lmpolicy.exact import temperature as exact
from lmpolicy.exercises.exercise import Exercise
from lmpolicy.exercises.older_names import module_getattr
from lmpolicy.notebook import checks
from lmpolicy.notebook.forbidden import GENERATE, Shortcuts
from lmpolicy.per_student import variants

# the library's sampler computes each of the three samplers' quantities
SAMPLING = Shortcuts(library=(f"{GENERATE}:sample_next_token", f"{GENERATE}:generate"))


def _token_ids(draws, rows, what):
    checks.check_type(draws, torch.Tensor, what)
    checks.check(tuple(draws.shape) == (rows,), f"{what} returned shape {tuple(draws.shape)}; expected ({rows},), "
                 "one token id per row", hint="greedy: logits.argmax(dim=-1); sampled: torch.multinomial(...) has "
                 "shape (B, 1), so .squeeze(-1)")
    checks.check(draws.dtype == torch.long, f"{what} returned dtype {draws.dtype}; token ids are torch.long")
    return draws


def _frequencies(exercise: Exercise, sample_with_temperature, row, temperature, hint, n=20000, seed=0):
    what = f"sample_with_temperature(logits of shape ({n}, {row.shape[-1]}), {temperature}, generator)"
    draws = exercise.call_hinting(hint, sample_with_temperature, row.expand(n, row.shape[-1]), temperature,
                                  torch.Generator().manual_seed(seed))
    return np.bincount(_token_ids(draws, n, what).numpy(), minlength=row.shape[-1]) / n


def _sample_with_temperature_checks(exercise: Exercise, sample_with_temperature) -> None:
    z = torch.tensor([[2.0, 1.0, 0.0]])
    at_1 = _frequencies(exercise, sample_with_temperature, z, 1.0,
                        hint="sample from softmax(logits / temperature) with torch.multinomial")
    checks.check_close(at_1, exact.softmax([2.0, 1.0, 0.0]), "the sampled frequencies of tokens 0, 1, 2 at T = 1",
                       atol=0.015, rtol=0, hint="sample from softmax(logits / temperature)")

    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 5.0, 1.0]])
    greedy = exercise.call_hinting("at T = 0 the sampler is greedy: return the argmax of each row, "
                                   "without dividing by T = 0", sample_with_temperature, logits, 0)
    _token_ids(greedy, 2, "sample_with_temperature(logits of shape (2, 3), 0)")
    checks.check_equal(greedy, [0, 1], "sample_with_temperature(torch.tensor([[2., 1., 0.], [0., 5., 1.]]), 0)",
                       hint="at temperature 0 the sampler is greedy: the argmax of each row")

    at_2 = _frequencies(exercise, sample_with_temperature, z, 2.0, hint="sample from softmax(logits / temperature)")
    checks.check(at_2[0] < at_1[0] - 0.05, "the top token is sampled at least as often at T = 2 as at T = 1, but a "
                 "higher temperature flattens the distribution", hint="divide the logits by the temperature; "
                 "multiplying by T sharpens it instead")
    checks.check_close(at_2, exact.softmax([2.0, 1.0, 0.0], 2.0), "the sampled frequencies of tokens 0, 1, 2 at T = 2",
                       atol=0.015, rtol=0, hint="sample from softmax(logits / temperature)")
    cold = _frequencies(exercise, sample_with_temperature, torch.tensor([[1.0, 0.999, 0.0]]), 1e-3,
                        hint="at T = 0.001 the logits / T are in the thousands and exp overflows: use torch.softmax, "
                             "which subtracts the maximum")
    checks.check_close(cold, exact.softmax([1.0, 0.999, 0.0], 1e-3), "the sampled frequencies at T = 0.001",
                       atol=0.02, rtol=0, hint="a stable softmax of logits / temperature")
    ruled_out = _frequencies(exercise, sample_with_temperature, torch.tensor([[0.5, -np.inf, 0.0]]), 0.7,
                             hint="a logit of -inf has probability 0")
    checks.check(ruled_out[1] == 0, "a token with logit -inf was sampled",
                 hint="sample from softmax(logits / T) itself")

    rows = torch.randn(500, 6, generator=torch.Generator().manual_seed(3))
    draws = []
    for seed, global_seed in [(42, 1), (42, 2), (43, 1)]:
        torch.manual_seed(global_seed)  # an answer that ignores its generator draws from this global one
        draws.append(exercise.call(sample_with_temperature, rows, 1.0, torch.Generator().manual_seed(seed)))
    checks.check(torch.equal(draws[0], draws[1]), "two calls with generators of the same seed gave different samples: "
                 "sample_with_temperature ignores its `generator`",
                 hint="pass generator=generator to torch.multinomial")
    checks.check(not torch.equal(draws[0], draws[2]), "generators with different seeds gave the same samples: "
                 "sample_with_temperature does not draw from the `generator` it is given",
                 hint="pass generator=generator to torch.multinomial")


SAMPLE_WITH_TEMPERATURE = Exercise("task2", _sample_with_temperature_checks, SAMPLING)


def _top_k_checked(exercise: Exercise, top_k_filter, logits, k, expected, what, hint):
    """Compare top_k_filter(logits, k) with `expected`; if it raises, the message names the call."""
    before = logits.clone()
    out = exercise.call_hinting(hint, top_k_filter, logits, k)
    checks.check_type(out, torch.Tensor, what)
    checks.check_shape(out, tuple(logits.shape), what)
    checks.check(torch.equal(logits, before), f"{what} modified its input",
                 hint="return a new tensor (masked_fill, not masked_fill_ or item assignment)")
    checks.check_equal(out, torch.tensor(expected, dtype=logits.dtype), what, hint=hint)


def _top_k_filter_checks(exercise: Exercise, top_k_filter) -> None:
    inf = math.inf
    _top_k_checked(exercise, top_k_filter, torch.tensor([2.0, -1.0, 1.0, 0.0]), 2, [2.0, -inf, 1.0, -inf],
                   "top_k_filter(torch.tensor([2., -1., 1., 0.]), 2)",
                   hint="keep the 2 largest logits unchanged and set the others to -inf (float('-inf'), not 0 or -1e9)")
    _top_k_checked(exercise, top_k_filter, torch.tensor([1.0, 3.0, 1.0, 0.0]), 2, [1.0, 3.0, 1.0, -inf],
                   "top_k_filter(torch.tensor([1., 3., 1., 0.]), 2)",
                   hint="ties with the k-th largest logit are kept: cut only the logits *smaller* than the k-th "
                        "largest value, rather than keeping exactly k indices")
    _top_k_checked(exercise, top_k_filter, torch.tensor([[2.0, -1.0, 1.0, 0.0], [0.0, 1.0, 3.0, 2.0]]), 2,
                   [[2.0, -inf, 1.0, -inf], [-inf, -inf, 3.0, 2.0]],
                   "top_k_filter(torch.tensor([[2., -1., 1., 0.], [0., 1., 3., 2.]]), 2)",
                   hint="compare every row with its own k-th largest logit: "
                        "logits.topk(min(k, logits.shape[-1]), dim=-1).values[..., -1:]")
    _top_k_checked(exercise, top_k_filter, torch.tensor([0.5, 0.2, -1.0]), 5, [0.5, 0.2, -1.0],
                   "top_k_filter(torch.tensor([0.5, 0.2, -1.]), 5)",
                   hint="when k is at least the vocabulary size nothing is cut (logits.topk(k) raises for k > V)")


TOP_K_FILTER = Exercise("nb02_top_k", _top_k_filter_checks, SAMPLING)


def _kept_by(exercise: Exercise, top_p_filter, logits, p, what):
    """Which tokens top_p_filter(logits, p) keeps, after checking it returns logits or -inf in every position."""
    before = logits.clone()
    out = exercise.call(top_p_filter, logits, p)
    checks.check_type(out, torch.Tensor, what)
    checks.check_shape(out, tuple(logits.shape), what)
    checks.check(torch.equal(logits, before), f"{what} modified its input", hint="return a new tensor (masked_fill)")
    cut = torch.isneginf(out)
    checks.check(bool(torch.where(cut, True, out == logits).all()),
                 f"{what} holds an entry that is neither the logit at its position nor -inf",
                 hint="keep the tokens in their original positions (put the decision back with scatter) and set "
                      "the cut ones to -inf (float('-inf'), not 0 or -1e9)")
    return (~cut).tolist()


def _nucleus_size_check(kept, expected, what):
    size, want = sum(kept), sum(expected)
    checks.check(size > 0, f"{what} keeps no token at all; the most likely token is always kept",
                 hint="keep a token while the probability of the tokens sorted *before* it is below p "
                      "(for the first token that is 0)")
    checks.check(size >= want, f"{what} keeps {size} token(s), too few: the nucleus includes the token that "
                 "crosses p", hint="keep a token while the probability *before* it (cumsum - probs) is below p")
    checks.check(size <= want, f"{what} keeps {size} tokens, too many: once the kept tokens reach p, cut the rest",
                 hint="keep a token while the probability *before* it (cumsum - probs) is below p")
    checks.check(kept == expected, f"{what} keeps the right number of tokens, but not the most likely ones",
                 hint="sort the probabilities in decreasing order; keep the tokens in their original positions")


def _top_p_filter_checks(exercise: Exercise, top_p_filter) -> None:
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    for p, expected in [(0.3, [True, False, False, False]), (0.7, [True, True, False, False])]:
        what = f"top_p_filter(torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05])), {p})"
        _nucleus_size_check(_kept_by(exercise, top_p_filter, torch.log(probs), p, what), expected, what)
    what = "top_p_filter(torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05])) + 4.0, 0.7)"
    checks.check(_kept_by(exercise, top_p_filter, torch.log(probs) + 4.0, 0.7, what) == [True, True, False, False],
                 f"{what} keeps other tokens than without the + 4.0, but adding a constant to every logit leaves "
                 "the probabilities unchanged", hint="compute the probabilities with a softmax of the logits first")
    shuffled = torch.log(torch.tensor([[0.15, 0.5, 0.05, 0.3], [0.05, 0.15, 0.3, 0.5]]))
    what = "top_p_filter(torch.log(torch.tensor([[0.15, 0.5, 0.05, 0.3], [0.05, 0.15, 0.3, 0.5]])), 0.7)"
    kept = _kept_by(exercise, top_p_filter, shuffled, 0.7, what)
    for row, expected in zip(kept, [[False, True, False, True], [False, False, True, True]]):
        _nucleus_size_check(row, expected, what)


TOP_P_FILTER = Exercise("nb02_top_p", _top_p_filter_checks, SAMPLING)


def numbers_at_target(temperature_at_target) -> dict[str, float]:
    """11.2(b)'s number, checked to be one."""
    return {"temperature_at_target": checks.check_number(temperature_at_target, "temperature_at_target")}


def _temperature_at_target_checks(exercise: Exercise, temperature_at_target) -> None:
    numbers = numbers_at_target(temperature_at_target)
    temperature = numbers["temperature_at_target"]
    checks.check(temperature > 0, f"temperature_at_target is {temperature}; a temperature is positive")
    checks.check_own_variant(exercise.key, numbers)
    yours = variants.for_exercise(exercise.key)  # your model's logits and target (the chapter's without a student id)
    top = exact.softmax(list(yours.logits), temperature)[0]
    checks.check(abs(top - yours.target) < 0.05, f"at temperature_at_target = {temperature:.6g} the top token has "
                 f"probability {top:.4f}, far from {yours.target:g}", hint="lower temperatures make the top token "
                 "more likely; did you give kappa = 1/T instead of T?")
    checks.check(abs(top - yours.target) < 2e-7, f"at temperature_at_target = {temperature:.6g} the top token has "
                 f"probability {top:.7f}, not {yours.target:g} to six digits", hint="a three-digit answer like the "
                 "chapter's 0.334 is rounded: solve the equation exactly (a quadratic in u = exp(-d/T)) or "
                 "numerically to six digits or more")


# varies per student: its answer key is blocked by the declaration itself (Exercise.shortcuts)
TEMPERATURE_AT_TARGET = Exercise("ex11_2b", _temperature_at_target_checks)


def exact_entropy(logits, kappa) -> float:
    """The entropy, in nats, of softmax(kappa * logits)."""
    probs = exact.softmax(np.asarray(logits, dtype=float) * kappa)
    return -float(np.sum(probs[probs > 0] * np.log(probs[probs > 0])))


def minus_kappa_var(logits, kappa):
    """dH/dkappa of softmax(kappa * logits): -kappa times the variance of the logits under that policy."""
    probs = exact.softmax(np.asarray(logits, dtype=float) * kappa)
    mean = probs @ logits
    return -kappa * (probs @ (np.asarray(logits) - mean) ** 2)


def autograd_slope(entropy, logits, kappa, what) -> tuple[float, float]:
    """The student's entropy(logits, kappa) and its derivative in kappa, differentiated here, independently of
    their entropy_slope()."""
    leaf = torch.tensor(float(kappa), dtype=torch.float64, requires_grad=True)
    value = ENTROPY_SLOPE.call(entropy, logits, leaf)
    checks.check_type(value, torch.Tensor, what)
    checks.check(value.requires_grad,
                 f"{what} is not differentiable in kappa: build it with torch operations from kappa")
    (slope,) = torch.autograd.grad(value, leaf)
    return value.item(), slope.item()


def _entropy_slope_checks(exercise: Exercise, entropy, entropy_slope) -> None:
    z = torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64)
    what = "entropy(torch.tensor([2., 1., 0.]), 1.0)"
    value, slope = autograd_slope(entropy, z, 1.0, what)
    checks.check(abs(value - exact_entropy([2.0, 1.0, 0.0], 1.0)) < 1e-6, f"{what} returned {value:.6g}, "
                 "which is not the entropy of softmax(kappa * z) in nats",
                 hint="H = -sum_a pi(a) log pi(a) with the natural log, pi = softmax(kappa * logits)")
    checks.check(abs(slope - minus_kappa_var([2.0, 1.0, 0.0], 1.0)) < 1e-5,
                 "the autograd derivative of your entropy with respect to kappa, at kappa = 1, is off",
                 hint="build H from kappa * logits with torch operations only")
    big = torch.tensor([1000.0, 0.0, -1000.0], dtype=torch.float64)
    what = "entropy(torch.tensor([1000., 0., -1000.]), 1.0)"
    value, slope = autograd_slope(entropy, big, 1.0, what)
    checks.check_finite(value, what, hint="exp(1000) overflows: compute log pi with torch.log_softmax, which "
                        "subtracts the maximum")
    checks.check_finite(slope, f"the autograd derivative of {what}", hint="use torch.log_softmax")

    what = "entropy_slope(torch.tensor([2., 1., 0.]), 1.0)"
    # whether entropy_slope calls entropy(): autograd through it, not the formula
    with exercise.blocked():
        yours, calls = checks.call_counting(entropy_slope, "entropy", z, 1.0)
    yours = checks.check_number(yours, what)
    checks.check(calls > 0, f"{what} never calls entropy(): it must differentiate your entropy by autograd, "
                 "not evaluate the formula you derived",
                 hint="k = torch.tensor(kappa, dtype=torch.float64, requires_grad=True), then "
                      "torch.autograd.grad(entropy(logits, k), k)")
    checks.check(yours < 0, f"{what} returned {yours:.4g}, which is not negative, but entropy falls as kappa = 1/T "
                 "rises", hint="differentiate with respect to kappa = 1/T, not T")
    checks.check(abs(yours - minus_kappa_var([2.0, 1.0, 0.0], 1.0)) < 1e-5, f"{what} is off",
                 hint="the derivative of entropy(logits, k) with respect to k, at k = kappa, by autograd")


ENTROPY_SLOPE = Exercise("ex11_2c", _entropy_slope_checks)

EXERCISES = (SAMPLE_WITH_TEMPERATURE, TOP_K_FILTER, TOP_P_FILTER, TEMPERATURE_AT_TARGET, ENTROPY_SLOPE)

__getattr__ = module_getattr(__name__)  # older copies' names of its exercises, and what it holds
