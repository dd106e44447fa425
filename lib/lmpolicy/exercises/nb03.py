"""Notebook 03, the three stages of post-training: RFT's and REINFORCE's gradients (11.1(c)) and their visible
checks."""
from __future__ import annotations

import numpy as np
import torch

from lmpolicy.exercises.exercise import Exercise
from lmpolicy.exercises.older_names import module_getattr
from lmpolicy.notebook import checks

_HINTS = {"rft_gradient": "average grad log pi(y_i) over the k kept samples: divide their sum by k, not by N",
         "reinforce_gradient": "average r_i * grad log pi(y_i) over all N samples: divide by N"}


def _gradient(exercise: Exercise, fn, logits, samples, rewards, what):
    """fn's gradient (a snapshot), after checking its type and shape and that `logits` was left alone."""
    before = logits.detach().clone()
    got = exercise.call(fn, logits, samples, rewards, call=what)
    checks.check_type(got, torch.Tensor, what)
    checks.check_shape(got, tuple(logits.shape), what)
    checks.check(torch.equal(logits.detach(), before) and not logits.requires_grad,
                 f"{what} changed `logits` (its values or its requires_grad)",
                 hint="work on a copy: theta = logits.detach().clone().requires_grad_(True)")
    return got.detach().clone()


def _gradients_checks(exercise: Exercise, rft_gradient, reinforce_gradient) -> None:
    logits = torch.zeros(3, dtype=torch.float64)
    samples = torch.tensor([0, 1, 0, 2])
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    # by hand: grad log pi(0) = e_0 - pi = (2/3, -1/3, -1/3) for uniform pi; RFT averages it over the two kept
    # samples, REINFORCE sums it twice and divides by N = 4
    for fn, want in [(rft_gradient, [2 / 3, -1 / 3, -1 / 3]), (reinforce_gradient, [1 / 3, -1 / 6, -1 / 6])]:
        what = f"{fn.__name__}(zeros(3), samples [0, 1, 0, 2], rewards [1, 0, 1, 0])"
        got = _gradient(exercise, fn, logits, samples, rewards, what)
        checks.check_finite(got, what)
        checks.check(float((got + torch.tensor(want, dtype=got.dtype)).abs().max()) > 1e-9,
                     f"{what} points the opposite way", hint="return the gradient of the objective, which raises "
                     "log pi of the kept samples, not of the loss (minus the objective)")
        checks.check_close(got, want, what, hint=_HINTS[fn.__name__])
        again = _gradient(exercise, fn, logits, samples, rewards, f"a second call of {what}")
        checks.check_close(again, got, f"a second call of {what}", hint="gradients accumulate in .grad across "
                           "backward() calls: use torch.autograd.grad on a copy")
    what = "rft_gradient(zeros(3), samples [0, 1, 2], rewards [0, 0, 0])"
    none = _gradient(exercise, rft_gradient, logits, torch.tensor([0, 1, 2]), torch.zeros(3, dtype=torch.float64), what)
    checks.check_finite(none, what, hint="with k = 0 there is nothing to average (0 / 0 is NaN): return zeros")
    checks.check_close(none, np.zeros(3), what, hint="with k = 0 there is nothing to train on: return zeros")


RFT_AND_REINFORCE_GRADIENTS = Exercise("ex11_1c", _gradients_checks)

EXERCISES = (RFT_AND_REINFORCE_GRADIENTS,)

__getattr__ = module_getattr(__name__)  # older copies' names of its exercises, and what it holds
