"""Notebook 03's hidden tests: RFT's and REINFORCE's gradients (11.1(c)) on policies and samples the student never
saw."""
from __future__ import annotations

import numpy as np
import torch

from lmpolicy.exact import temperature as exact
from lmpolicy.exercises.nb03 import RFT_AND_REINFORCE_GRADIENTS
from lmpolicy.notebook.checks import check, check_close, check_equal, check_finite, check_shape
from lmpolicy.per_student.hidden_inputs import hidden_seed


def _score(logits, samples):
    """grad log pi(y) = onehot(y) - pi for a softmax policy, one row per sample."""
    pi = exact.softmax(logits.numpy())
    return np.eye(len(pi))[samples.numpy()] - pi


def rft_and_reinforce_gradients(student_rft_gradient, student_reinforce_gradient) -> None:
    def rft(*args):
        return RFT_AND_REINFORCE_GRADIENTS.call(student_rft_gradient, *args)

    def reinforce(*args):
        return RFT_AND_REINFORCE_GRADIENTS.call(student_reinforce_gradient, *args)

    generator = torch.Generator().manual_seed(hidden_seed(3111))
    for vocabulary, n in [(3, 8), (6, 32), (10, 5), (4, 1), (5, 64)]:
        theta = 2 * torch.randn(vocabulary, generator=generator, dtype=torch.float64)
        before = theta.clone()
        samples = torch.randint(0, vocabulary, (n,), generator=generator)
        rewards = (torch.rand(n, generator=generator) < 0.4).double()
        if n > 1:
            rewards[0] = 1.0  # at least one kept sample
        k = int(rewards.sum())
        scores = _score(theta, samples)
        label = f"V={vocabulary}, N={n}, k={k}"
        rft_grad = rft(theta, samples, rewards)
        check_shape(rft_grad, (vocabulary,), f"rft_gradient ({label})")
        rft_grad = rft_grad.detach().clone()  # a snapshot: a later call must not be able to change it
        reinforce_grad = reinforce(theta, samples, rewards)
        check_shape(reinforce_grad, (vocabulary,), f"reinforce_gradient ({label})")
        reinforce_grad = reinforce_grad.detach().clone()
        if k:
            check_close(rft_grad, scores[rewards.numpy() > 0].mean(0), f"rft_gradient ({label})",
                        hint="average over the kept samples only (divide by k)")
        check_close(reinforce_grad, (rewards.numpy()[:, None] * scores).mean(0), f"reinforce_gradient ({label})",
                    hint="average r_i * grad log pi(y_i) over all N samples")
        check_close(reinforce_grad, k / n * rft_grad.detach().numpy(),
                    f"reinforce_gradient vs k/N times rft_gradient ({label})")
        check_equal(theta, before, "`logits` after your functions ran",
                    hint="your function changed `logits`; work on a copy")
        check(not theta.requires_grad, "your function switched on requires_grad of `logits`; work on a copy")
        check_close(rft(theta, samples, rewards), rft_grad.detach().numpy(),
                    f"a second call of rft_gradient ({label})",
                    hint="gradients accumulated between calls: use torch.autograd.grad")
        check_close(reinforce(theta, samples, rewards), reinforce_grad.detach().numpy(),
                    f"a second call of reinforce_gradient ({label})",
                    hint="gradients accumulated between calls: use torch.autograd.grad")
    none = rft(torch.zeros(4, dtype=torch.float64), torch.tensor([0, 1, 2]), torch.zeros(3, dtype=torch.float64))
    check_finite(none, "rft_gradient when no sample is correct",
                 hint="with k = 0 there is nothing to average: return zeros")
    check_close(none, np.zeros(4), "rft_gradient when no sample is correct")
    every = torch.ones(6, dtype=torch.float64)
    samples = torch.tensor([0, 2, 2, 1, 0, 2])
    check_close(rft(torch.ones(3, dtype=torch.float64), samples, every),
                reinforce(torch.ones(3, dtype=torch.float64), samples, every).detach().numpy(),
                "rft_gradient vs reinforce_gradient when every sample is correct (k = N)")
