"""Notebook 01, the policy's softmax and a response's log-prob: its exercises and their visible checks."""
from __future__ import annotations

import math

import numpy as np
import torch

from lmpolicy.exact import temperature as exact
from lmpolicy.exercises.exercise import Exercise
from lmpolicy.exercises.older_names import module_getattr
from lmpolicy.notebook import checks
from lmpolicy.notebook.forbidden import LOGPROBS, SOFTMAX_NAMES, SOFTMAX_OPERATORS, TEMPERATURE, Shortcuts

LIBRARY_SOFTMAX = frozenset({"softmax", "log_softmax", "Softmax", "LogSoftmax"})


def _names_used(code) -> set[str]:
    """The global and attribute names a function's code (nested functions included) refers to."""
    return set(code.co_names).union(*(_names_used(c) for c in code.co_consts if hasattr(c, "co_names")))


def _softmax_checks(exercise: Exercise, softmax) -> None:
    code = getattr(softmax, "__code__", None)
    checks.check(code is None or not LIBRARY_SOFTMAX & _names_used(code),
                 "your softmax calls a library softmax (torch.softmax, F.softmax, .softmax() or log_softmax), "
                 "which gets no credit", hint="write it yourself with torch.exp, max and sum")

    what = "softmax(torch.tensor([2., 1., 0.]))"
    probs = checks.check_type(exercise.call(softmax, torch.tensor([2.0, 1.0, 0.0])), torch.Tensor, what)
    checks.check_shape(probs, (3,), what)
    checks.check_close(probs, exact.softmax([2.0, 1.0, 0.0]), what, hint="divide exp(z) by the sum of exp(z)")

    what = "softmax(torch.tensor([1000., 999., 998.]))"
    out = checks.check_type(exercise.call(softmax, torch.tensor([1000.0, 999.0, 998.0])), torch.Tensor, what)
    checks.check_finite(out, what, hint="exp(1000) overflows to inf, and inf / inf is NaN: "
                        "subtract the maximum logit from every logit before exponentiating")
    checks.check_close(out, exact.softmax([1000.0, 999.0, 998.0]), what,
                       hint="subtract the maximum from every logit, in the numerator and in the sum alike")

    what = "softmax(torch.tensor([1., -inf, 0.5]))"
    out = checks.check_type(exercise.call(softmax, torch.tensor([1.0, -np.inf, 0.5])), torch.Tensor, what)
    checks.check_finite(out, what, hint="a logit of -inf rules its token out, and exp(-inf) = 0; "
                        "shift by the maximum (finite), not by the mean or the minimum (both -inf here)")
    checks.check(float(out[1]) == 0.0, f"{what} gives the token with logit -inf probability {float(out[1]):.3g}, "
                 "not exactly 0", hint="exp(-inf) is already 0: no clamping, no epsilon")
    checks.check_close(out, exact.softmax([1.0, -np.inf, 0.5]), what)

    batch = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]])
    for dim in (-1, 0):
        what = f"softmax(torch.tensor([[2., 1., 0.], [0., 3., 1.]]), dim={dim})"
        out = exercise.call_hinting("take max and sum with keepdim=True: the reduced dimension stays, with size 1, "
                                    "and broadcasts against logits", softmax, batch, dim=dim)
        checks.check_type(out, torch.Tensor, what)
        checks.check_shape(out, (2, 3), what)
        checks.check_close(out.sum(dim=dim), torch.ones_like(batch.sum(dim=dim)), f"the sum along dim={dim} of {what}",
                           hint="normalise along `dim` only: max and sum with dim=dim, keepdim=True, "
                                "so that every slice along `dim` sums to 1")
        checks.check_close(out, exact.softmax(batch.numpy(), axis=dim), what)


SOFTMAX = Exercise(
    "nb01_softmax", _softmax_checks,
    # power_distribution: given exp(z), it normalises it, which is the softmax
    Shortcuts(library=(f"{TEMPERATURE}:softmax", f"{TEMPERATURE}:log_softmax", f"{TEMPERATURE}:power_distribution"),
              torch=("torch.softmax", "torch.log_softmax", "torch.nn.functional.softmax",
                     "torch.nn.functional.log_softmax", "torch.Tensor.softmax", "torch.Tensor.log_softmax"),
              pattern=SOFTMAX_NAMES, operators=SOFTMAX_OPERATORS, computes="a softmax"))


def _sequence_logprob_checks(exercise: Exercise, sequence_logprob, prob_86, logprob_86, main_contributor) -> None:
    what = "sequence_logprob(torch.tensor([0.665, 0.9, 0.98]))"
    out = checks.check_type(exercise.call(sequence_logprob, torch.tensor([0.665, 0.9, 0.98], dtype=torch.float64)),
                            torch.Tensor, what)
    checks.check_shape(out, (), what)
    checks.check_close(out, math.log(0.665) + math.log(0.9) + math.log(0.98), what,
                       hint="take the natural log of every token probability and add them up")

    what = "sequence_logprob of a batch of 2 responses, shape (2, 3)"
    out = checks.check_type(exercise.call(sequence_logprob, torch.tensor([[0.5, 0.5, 0.5], [0.9, 0.8, 0.7]])),
                            torch.Tensor, what)
    checks.check(tuple(out.shape) == (2,), f"{what}, returned shape {tuple(out.shape)}; expected (2,), one log-prob "
                 "per response", hint="sum over the last dimension only: .sum(dim=-1)")

    what = "sequence_logprob of 1000 tokens of probability 0.9 in float32"
    out = checks.check_type(exercise.call(sequence_logprob, torch.full((1000,), 0.9, dtype=torch.float32)),
                            torch.Tensor, what)
    checks.check_finite(out, what, hint="the product of 1000 probabilities underflows to 0 in float32, and log(0) "
                        "= -inf: take the log of each token probability first, then sum")
    checks.check_close(out, 1000 * math.log(0.9), what, rtol=1e-4)

    what = "sequence_logprob(torch.tensor([0.5, 0.0, 0.5]))"
    out = checks.check_number(exercise.call(sequence_logprob, torch.tensor([0.5, 0.0, 0.5])), what)
    checks.check(out == -math.inf, f"{what} returned {out:.4g}; a response holding a token of probability 0 has "
                 "log-prob -inf", hint="log(0) is already -inf: don't add an epsilon or clamp the probabilities")

    numbers = numbers_86(prob_86, logprob_86)
    checks.check_own_variant(exercise.key, numbers)
    prob, logprob = numbers["prob_86"], numbers["logprob_86"]
    checks.check(0 < prob < 1, f"prob_86 is {prob}; a probability of a response lies between 0 and 1")
    checks.check(logprob < 0, f"logprob_86 is {logprob}; the log of a probability below 1 is negative")
    checks.check(abs(math.exp(logprob) - prob) <= 2e-3 * prob,
                 "exp(logprob_86) does not give prob_86 back: logprob_86 must be the natural log of prob_86",
                 hint="use math.log or torch.log (base e), not log10 or log2")
    checks.check(main_contributor in ("8", "6", "<eos>"),
                 f'main_contributor is {main_contributor!r}; it should be "8", "6" or "<eos>"')
    # the student's own model's value itself (a failure says which number is off, never the right value)
    checks.check_variant_answers(exercise.key, numbers, show_expected=False)


def numbers_86(prob_86, logprob_86) -> dict[str, float]:
    """11.1(a)'s two numbers, each checked to be a number."""
    return {"prob_86": checks.check_number(prob_86, "prob_86"), "logprob_86": checks.check_number(logprob_86, "logprob_86")}


SEQUENCE_LOGPROB = Exercise(
    "ex11_1a", _sequence_logprob_checks,
    Shortcuts(library=(f"{LOGPROBS}:sequence_logprob", f"{LOGPROBS}:response_logprobs")))

EXERCISES = (SOFTMAX, SEQUENCE_LOGPROB)

__getattr__ = module_getattr(__name__)  # older copies' names of its exercises, and what it holds
