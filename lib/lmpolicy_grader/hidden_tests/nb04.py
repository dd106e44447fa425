"""Notebook 04's hidden tests: the bandit's objective, the token-level gradient and the KL's chain rule (11.3(a),
(b), (c)) on models the student never saw."""
from __future__ import annotations

import numpy as np
import torch

from lmpolicy.exact import kl
from lmpolicy.exact.toy import ToyLM
from lmpolicy.exercises.nb04 import (BANDIT_OBJECTIVE, KL_CHAIN_RULE, TOKEN_LEVEL_GRADIENT, exact_gradient,
                                     exact_objective, kl_pi_star_exact)
from lmpolicy.notebook.checks import check, check_close, check_finite, check_number, check_shape
from lmpolicy.per_student.hidden_inputs import hidden_seed


def _random_bandits(rng, count):
    """``count`` bandits drawn from ``rng``, of 2 and 3 tokens in turn: (V, theta, pi(y2 | y1), rewards)."""
    for case in range(count):
        vocabulary = 3 if case % 2 else 2
        yield vocabulary, rng.normal(size=vocabulary) * 1.5, rng.dirichlet(np.ones(vocabulary), size=vocabulary), \
            rng.normal(size=(vocabulary, vocabulary))


def bandit_objective(student_bandit_objective, grad_b_bandit) -> None:
    def value_and_gradient(theta, second, rewards):
        leaf = torch.tensor(theta, requires_grad=True)
        value = BANDIT_OBJECTIVE.call(student_bandit_objective, leaf, torch.tensor(second), torch.tensor(rewards))
        check(isinstance(value, torch.Tensor) and value.requires_grad,
              "bandit_objective must build J from theta with torch operations, so that autograd can differentiate it")
        (grad,) = torch.autograd.grad(value, leaf)
        return value.item(), grad.numpy()

    rng = np.random.default_rng(hidden_seed(3301))
    for vocabulary, theta, second, rewards in _random_bandits(rng, 4):
        value, grad = value_and_gradient(theta, second, rewards)
        check_close(value, exact_objective(theta, second, rewards),
                    f"bandit_objective on a random model with V = {vocabulary}",
                    hint="the first-token probabilities are softmax(theta)")
        check_close(grad, exact_gradient(theta, second, rewards),
                    f"the gradient of bandit_objective on a random model with V = {vocabulary}", atol=1e-6, rtol=1e-5)
    second = np.array([[1.0, 0.0], [0.0, 1.0]])
    value, grad = value_and_gradient(np.array([0.3, -0.2]), second, np.array([[1.0, 5.0], [0.0, 3.0]]))
    check_close(value, exact_objective(np.array([0.3, -0.2]), second, np.array([[1.0, 5.0], [0.0, 3.0]])),
                "bandit_objective with zero-probability second tokens")


def token_level_gradient(student_token_level_gradient, grad_b_token, grad_b_token_baseline) -> None:
    rng = np.random.default_rng(hidden_seed(3302))
    for vocabulary, theta, second, rewards in _random_bandits(rng, 5):
        want = exact_gradient(theta, second, rewards)
        for baseline in (0.0, float(rng.normal()), 10.0):
            what = f"token_level_gradient on a random model with V = {vocabulary}, baseline {baseline:.3f}"
            got = TOKEN_LEVEL_GRADIENT.call(student_token_level_gradient, torch.tensor(theta), torch.tensor(second),
                                            torch.tensor(rewards), baseline)
            check_shape(got, (vocabulary,), what)
            check_close(got, want, what, atol=1e-6, rtol=1e-5,
                        hint="weight each response by its probability under pi_theta, not pi_ref")


def kl_chain_rule(student_kl_chain_rule, kl_pi_star) -> None:
    check_close(check_number(kl_pi_star, "kl_pi_star"), kl_pi_star_exact(), "kl_pi_star", atol=1e-6, rtol=1e-5)

    def yours(p, q):
        value = KL_CHAIN_RULE.call(student_kl_chain_rule, p.tables[0], p.tables[1], q.tables[0], q.tables[1])
        return check_number(value, "kl_chain_rule(...)")

    for seed in range(4):
        p = ToyLM.random(("a", "b", "c"), depth=2, seed=hidden_seed(10 + seed))
        q = ToyLM.random(("a", "b", "c"), depth=2, seed=hidden_seed(20 + seed), concentration=3.0)
        check_close(yours(p, q), kl.sequence_kl(p, q), f"kl_chain_rule on random 3-token models (seed {seed})",
                    atol=1e-8, rtol=1e-6)
    zero = ToyLM(("a", "b", "c"), [[0.5, 0.5, 0.0], [[0.2, 0.8, 0.0], [0.0, 1.0, 0.0], [0.3, 0.3, 0.4]]])
    reference = ToyLM.random(("a", "b", "c"), depth=2, seed=hidden_seed(5))
    value = yours(zero, reference)
    check_finite(value, "kl_chain_rule when p has zero-probability tokens", hint="0 log 0 counts as 0")
    check_close(value, kl.sequence_kl(zero, reference), "kl_chain_rule when p has zero-probability tokens",
                atol=1e-8, rtol=1e-6)
    check_close(yours(reference, reference), 0.0, "kl_chain_rule of a model with itself", atol=1e-12, rtol=0)
