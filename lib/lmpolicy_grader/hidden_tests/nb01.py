"""Notebook 01's hidden tests: the softmax and 11.1(a) on inputs the student never saw."""
from __future__ import annotations

import math

import numpy as np
import torch

from lmpolicy.exact import temperature as exact
from lmpolicy.exercises.nb01 import SEQUENCE_LOGPROB, SOFTMAX, numbers_86
from lmpolicy.notebook.checks import check, check_close, check_finite, check_shape, check_variant_answers
from lmpolicy.per_student import variants
from lmpolicy.per_student.hidden_inputs import hidden_seed


def _expected_softmax(logits, dim):
    return exact.softmax(logits.double().numpy(), axis=dim)


def softmax(student_softmax) -> None:
    generator = torch.Generator().manual_seed(hidden_seed(1101))
    for shape, dim in [((4, 7), -1), ((2, 3, 5), -1), ((6, 2), 0), ((1, 9), -1), ((5,), 0), ((3, 4, 2), 1)]:
        logits = 3 * torch.randn(shape, generator=generator, dtype=torch.float64)
        what = f"softmax(logits of shape {shape}, dim={dim})"
        out = SOFTMAX.call(student_softmax, logits, dim=dim)
        check_shape(out, shape, what)
        check_close(out, _expected_softmax(logits, dim), what,
                    hint="normalise along `dim` only: every slice along `dim` must sum to 1")
    huge = torch.tensor([[1000.0, 999.0, 0.0], [-1000.0, -1001.0, -1003.0]])
    out = SOFTMAX.call(student_softmax, huge)
    check_finite(out, "softmax of logits near +-1000", hint="subtract the largest logit before exp")
    check_close(out, _expected_softmax(huge, -1), "softmax of logits near +-1000")
    ruled_out = torch.tensor([1.0, float("-inf"), 0.5, float("-inf")])
    out = SOFTMAX.call(student_softmax, ruled_out)
    check_finite(out, "softmax with a logit of -inf")
    check(float(out[1]) == 0.0 and float(out[3]) == 0.0, "a token with logit -inf must get probability exactly 0")
    check_close(out, _expected_softmax(ruled_out, -1), "softmax with a logit of -inf")
    wide = 20 * torch.randn(8, 50, generator=generator)
    out = SOFTMAX.call(student_softmax, wide)
    check(bool((out >= 0).all()), "softmax returned a negative probability")
    check_close(out.sum(-1), torch.ones(8), "the row sums of softmax(logits)", atol=1e-5)


def sequence_logprob(student_sequence_logprob, prob_86, logprob_86, main_contributor) -> None:
    generator = torch.Generator().manual_seed(hidden_seed(1111))
    for shape in [(5,), (4, 6), (1, 3), (2, 3, 7)]:
        probs = torch.rand(shape, generator=generator, dtype=torch.float64) * 0.99 + 0.01
        out = SEQUENCE_LOGPROB.call(student_sequence_logprob, probs)
        what = f"sequence_logprob(probabilities of shape {shape})"
        check_shape(out, shape[:-1], what)
        check_close(out, np.log(probs.numpy()).sum(-1), what, hint="sum over the last dimension only")
    long = torch.full((2, 1000), 0.9, dtype=torch.float32)
    out = SEQUENCE_LOGPROB.call(student_sequence_logprob, long)
    check_finite(out, "sequence_logprob of 1000 tokens of probability 0.9 in float32",
                 hint="the product underflows to 0 in float32: sum the logs instead")
    check_close(out, [1000 * math.log(0.9)] * 2, "sequence_logprob of 1000 tokens of probability 0.9", rtol=1e-4)
    out = SEQUENCE_LOGPROB.call(student_sequence_logprob, torch.tensor([[0.5, 0.0, 0.5], [0.5, 0.5, 0.5]]))
    check(not bool(torch.isnan(out).any()), "a token of probability 0 gave NaN; the log-prob should be -inf")
    check(float(out[0]) == -math.inf, f"a response containing a token of probability 0 has log-prob -inf, got {float(out[0])}")
    check_close(out[1], 3 * math.log(0.5), "the log-prob of the row without zeros")
    # the student's own model's answers, computed from its token probabilities (the chapter's without a student id)
    check_variant_answers(SEQUENCE_LOGPROB.key, numbers_86(prob_86, logprob_86))
    check(main_contributor == variants.answer(SEQUENCE_LOGPROB.key)["main_contributor"],
          f"main_contributor is {main_contributor!r}, not the token with the most negative log-probability")
