"""Notebook 02's hidden tests: the sampler, top-k, top-p, 11.2(b) and 11.2(c) on inputs the student never saw."""
from __future__ import annotations

import math

import numpy as np
import torch

from lmpolicy.exact import temperature as exact
from lmpolicy.exercises.nb02 import (ENTROPY_SLOPE, SAMPLE_WITH_TEMPERATURE, TEMPERATURE_AT_TARGET, TOP_K_FILTER,
                                     TOP_P_FILTER, autograd_slope, exact_entropy, minus_kappa_var, numbers_at_target)
from lmpolicy.notebook.checks import (check, check_close, check_equal, check_finite, check_number, check_shape,
                                      check_variant_answers)
from lmpolicy.per_student.hidden_inputs import hidden_seed


def _frequencies(student_sample_with_temperature, logits_row, temperature, n=20000, seed=1):
    draws = SAMPLE_WITH_TEMPERATURE.call(student_sample_with_temperature, logits_row.expand(n, logits_row.shape[-1]),
                                         temperature, torch.Generator().manual_seed(hidden_seed(seed)))
    check_shape(draws, (n,), f"samples at T = {temperature}")
    return np.bincount(draws.numpy(), minlength=logits_row.shape[-1]) / n


def sample_with_temperature(student_sample_with_temperature) -> None:
    def sample(*args):
        return SAMPLE_WITH_TEMPERATURE.call(student_sample_with_temperature, *args)

    row = torch.tensor([[1.5, 0.2, -0.3, 0.9]])
    for temperature in (0.5, 2.0, 5.0):
        want = exact.softmax(row.numpy()[0], temperature)
        check_close(_frequencies(student_sample_with_temperature, row, temperature), want,
                    f"the sampled frequencies at T = {temperature}",
                    atol=5 * np.sqrt(0.25 / 20000), rtol=0, hint="divide the logits by the temperature")
    close = torch.tensor([[1.0, 0.999, 0.0]])
    check_close(_frequencies(student_sample_with_temperature, close, 1e-3), exact.softmax([1.0, 0.999, 0.0], 1e-3),
                "the frequencies at T = 0.001", atol=0.02, rtol=0,
                hint="at tiny T, logits / T is huge: use a stable softmax")
    ruled_out = torch.tensor([[0.5, float("-inf"), 0.0, float("-inf")]])
    frequencies = _frequencies(student_sample_with_temperature, ruled_out, 0.7)
    check(frequencies[1] == 0 and frequencies[3] == 0, "a token with logit -inf was sampled")
    one = sample(torch.tensor([[0.1, 3.0, 0.2]]), 0)
    check_shape(one, (1,), "sample_with_temperature on a batch of one")
    check_equal(one, [1], "greedy on a batch of one")
    batch = torch.randn(7, 11, generator=torch.Generator().manual_seed(hidden_seed(3)))
    check_equal(sample(batch, 0), batch.argmax(-1), "greedy on a batch of 7 rows")
    a = sample(batch.repeat(100, 1), 1.0, torch.Generator().manual_seed(hidden_seed(42)))
    b = sample(batch.repeat(100, 1), 1.0, torch.Generator().manual_seed(hidden_seed(42)))
    c = sample(batch.repeat(100, 1), 1.0, torch.Generator().manual_seed(hidden_seed(43)))
    check_equal(a, b, "two batches sampled with generators of the same seed",
                hint="the samples must come from the `generator` argument: "
                     "pass generator=generator to torch.multinomial")
    check(bool((a != c).any()), "generators with different seeds gave identical samples",
          hint="draw from the `generator` argument itself")


def _expected_top_k(logits, k):
    array = logits.numpy()
    kth = np.sort(array, axis=-1)[..., ::-1][..., min(k, array.shape[-1]) - 1:min(k, array.shape[-1])]
    return np.where(array < kth, -np.inf, array)


def top_k_filter(student_top_k_filter) -> None:
    generator = torch.Generator().manual_seed(hidden_seed(2202))
    for shape, k in [((5, 10), 3), ((2, 3, 6), 2), ((1, 4), 1), ((4, 7), 7), ((3, 5), 9)]:
        logits = torch.randn(shape, generator=generator)
        before = logits.clone()
        out = TOP_K_FILTER.call(student_top_k_filter, logits, k)
        what = f"top_k_filter(logits of shape {shape}, k={k})"
        check_shape(out, shape, what)
        check_equal(out, _expected_top_k(logits, k), what, hint="compare every row with its own k-th largest logit")
        check_equal(logits, before, "the logits after top_k_filter",
                    hint="top_k_filter modified its input; return a new tensor")
    tied = torch.tensor([[1.0, 3.0, 1.0, 0.0]])
    check_equal(TOP_K_FILTER.call(student_top_k_filter, tied, 2), [[1.0, 3.0, 1.0, -math.inf]],
                "top_k_filter([[1, 3, 1, 0]], 2)", hint="ties with the k-th largest logit must be kept")


def _expected_keep(logits, p):
    probs = exact.softmax(logits.double().numpy())
    keep = np.zeros(probs.shape, dtype=bool)
    for index in np.ndindex(probs.shape[:-1]):
        row = probs[index]
        total = 0.0
        for token in np.argsort(-row, kind="stable"):
            if total < p:
                keep[index + (token,)] = True
            total += row[token]
    return keep


def top_p_filter(student_top_p_filter) -> None:
    generator = torch.Generator().manual_seed(hidden_seed(2203))
    for shape, p in [((6, 12), 0.9), ((6, 12), 0.3), ((2, 3, 8), 0.75), ((1, 5), 0.5), ((4, 9), 1.0), ((4, 9), 1e-3)]:
        logits = 2 * torch.randn(shape, generator=generator, dtype=torch.float64)
        before = logits.clone()
        out = TOP_P_FILTER.call(student_top_p_filter, logits, p)
        what = f"top_p_filter(logits of shape {shape}, p={p})"
        check_shape(out, shape, what)
        keep = _expected_keep(logits, p)
        check_equal(~np.isinf(out.numpy()), keep, f"which tokens {what} keeps (1 = kept)",
                    hint="the tokens must stay in their original positions (unsort with scatter)")
        check_equal(out.numpy()[keep], logits.numpy()[keep], f"the kept logits of {what}")
        check_equal(logits, before, "the logits after top_p_filter",
                    hint="top_p_filter modified its input; return a new tensor")


def temperature_at_target(student_temperature_at_target) -> None:
    # the student's own model's temperature, computed from its logits and target (the chapter's without a student id)
    check_variant_answers(TEMPERATURE_AT_TARGET.key, numbers_at_target(student_temperature_at_target),
                          hint="compute it to six digits or more")


def entropy_slope(student_entropy, student_entropy_slope) -> None:
    generator = torch.Generator().manual_seed(hidden_seed(2204))
    cases = [(2 * torch.randn(size, generator=generator, dtype=torch.float64), kappa)
             for size, kappa in [(2, 0.3), (5, 2.0), (8, 0.05), (4, 5.0), (6, 1.7)]]
    cases += [(torch.full((4,), 0.7, dtype=torch.float64), 1.3),
              (torch.tensor([30.0, 0.0, -30.0], dtype=torch.float64), 0.2),
              (torch.tensor([1000.0, 0.0, -1000.0], dtype=torch.float64), 1.0)]
    for z, kappa in cases:
        what = f"entropy(logits {np.round(z.numpy(), 2).tolist()}, kappa={kappa})"
        value, slope = autograd_slope(student_entropy, z.clone(), kappa, what)
        check_finite(value, what, hint="use log_softmax so that large logits do not overflow")
        check_close(value, exact_entropy(z.numpy(), kappa), what, atol=1e-8, rtol=1e-6)
        check_close(slope, minus_kappa_var(z.numpy(), kappa), f"the autograd slope of {what}", atol=1e-5, rtol=1e-4)
        yours = check_number(ENTROPY_SLOPE.call(student_entropy_slope, z.clone(), kappa), f"entropy_slope for {what}")
        check_close(yours, minus_kappa_var(z.numpy(), kappa), f"entropy_slope for {what}", atol=1e-5, rtol=1e-4)
