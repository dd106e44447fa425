"""Notebook 04, the two MDP views of a language model: the bandit's and the token-level gradient, and the KL's
chain rule (11.3(a), (b), (c)), with their visible checks."""
from __future__ import annotations

import numpy as np
import torch

from lmpolicy.exact import scenarios, tilting
from lmpolicy.exact.toy import ToyLM
from lmpolicy.exercises.exercise import Exercise
from lmpolicy.exercises.older_names import module_getattr
from lmpolicy.notebook import checks
from lmpolicy.notebook.forbidden import KL, TILTING, Shortcuts


def exact_objective(theta, second, rewards):
    """J from the library's exact solver, with the first-token softmax written out in numpy."""
    first = np.exp(theta - theta.max()) / np.exp(theta - theta.max()).sum()
    return tilting.expected_reward(ToyLM(tuple("abc"[:len(first)]), [first, second]), rewards.reshape(-1))


def exact_gradient(theta, second, rewards, h=1e-6):
    """dJ/dtheta by central differences of ``exact_objective``."""
    return np.array([(exact_objective(theta + h * e, second, rewards) - exact_objective(theta - h * e, second, rewards))
                     / (2 * h) for e in np.eye(len(theta))])


def _near(got, want, atol=1e-6, rtol=1e-5):
    return bool(np.all(np.abs(np.asarray(got, dtype=float) - want) <= atol + rtol * np.abs(want)))


def _worked_bandit():
    """The worked example as the notebook's bandit: pi(y2 | y1), the reward table, theta_ref, and dJ/dtheta there."""
    worked = scenarios.get_scenario("worked")
    second = np.array(worked.model.tables[1])
    rewards = np.array(worked.rewards).reshape(2, 2)
    theta = np.log([0.7, 0.3])
    return second, rewards, theta, exact_gradient(theta, second, rewards)


def _bandit_objective_checks(exercise: Exercise, bandit_objective, grad_b_bandit) -> None:
    second, rewards, theta, want = _worked_bandit()
    what = "bandit_objective(theta_ref, second_probs, rewards)"
    leaf = torch.tensor(theta, requires_grad=True)
    objective = exercise.call_hinting("theta requires grad here, and J must stay differentiable in it: torch "
                                      "operations only (torch.softmax), no numpy, .detach() or .item()",
                                      bandit_objective, leaf, torch.tensor(second), torch.tensor(rewards), call=what)
    checks.check_type(objective, torch.Tensor, what)
    checks.check_number(objective, what)
    checks.check(objective.requires_grad, f"{what} is not differentiable in theta",
                 hint="build J from theta with torch operations only (torch.softmax(theta, -1)): no numpy, no .item()")
    checks.check_close(objective, exact_objective(theta, second, rewards), what,
                       hint="J = sum over y1, y2 of softmax(theta)[y1] * pi(y2 | y1) * r(y1 y2)")
    shifted = checks.check_number(exercise.call(
        bandit_objective, torch.tensor(theta + 1.0), torch.tensor(second), torch.tensor(rewards),
        call="bandit_objective(theta_ref + 1, second_probs, rewards)"), "bandit_objective(theta_ref + 1, ...)")
    checks.check(abs(shifted - objective.item()) < 1e-9, "bandit_objective(theta_ref + 1, ...) differs from "
                 "bandit_objective(theta_ref, ...), but adding the same constant to both logits leaves the policy "
                 "unchanged", hint="the first-token probabilities are softmax(theta), not exp(theta)")
    (yours,) = torch.autograd.grad(objective, leaf)
    checks.check(_near(yours.numpy(), want), "the autograd gradient of your bandit_objective at theta_ref is off",
                 hint="only softmax(theta) depends on theta; second_probs and rewards are constants")
    grad_b = checks.check_number(grad_b_bandit, "grad_b_bandit")
    checks.check(not _near(grad_b, want[0]), "grad_b_bandit is the theta_a component of the gradient (index 0)",
                 hint="theta_b is index 1: grad[1]")
    checks.check(_near(grad_b, want[1]), "grad_b_bandit is off",
                 hint="dJ/dtheta_b at theta_ref: autograd of your bandit_objective, component 1 of the gradient")


BANDIT_OBJECTIVE = Exercise("ex11_3a", _bandit_objective_checks,
                            Shortcuts(library=(f"{TILTING}:expected_reward",)))

_TOKEN_LEVEL_HINT = ("weight (r(y) - b) * grad log pi(y1) by pi_theta(y1 y2) = softmax(theta)[y1] * pi(y2 | y1), and "
                     "sum over all responses; for a softmax, grad log pi(y1) = e_y1 - softmax(theta)")


def _token_level_gradient_checks(exercise: Exercise, token_level_gradient, grad_b_token, grad_b_token_baseline) -> None:
    second, rewards, theta, want = _worked_bandit()

    def gradient(at, baseline, what):
        got = exercise.call(token_level_gradient, torch.tensor(at), torch.tensor(second), torch.tensor(rewards),
                            baseline, call=what)
        checks.check_type(got, torch.Tensor, what)
        checks.check_shape(got, (2,), what)
        return got.detach().numpy()

    what = "token_level_gradient(theta_ref, second_probs, rewards)"
    checks.check(_near(gradient(theta, 0.0, what), want), f"{what} is off", hint=_TOKEN_LEVEL_HINT)
    other = np.array([0.5, -1.0])
    what = "token_level_gradient(torch.tensor([0.5, -1.]), second_probs, rewards)"
    checks.check_close(gradient(other, 0.0, what), exact_gradient(other, second, rewards), what,
                       atol=1e-6, rtol=1e-5, hint="it is right at theta_ref: weight each response by its probability "
                       "under pi_theta, not pi_ref")
    what = "token_level_gradient(torch.tensor([0.5, -1.]), second_probs, rewards, 10.0)"
    checks.check_close(gradient(other, 10.0, what), exact_gradient(other, second, rewards), what,
                       atol=1e-6, rtol=1e-5, hint="a constant baseline does not change the exact expectation: "
                       "use (r(y) - baseline) in place of r(y) and nothing else")
    for name, value in [("grad_b_token", grad_b_token), ("grad_b_token_baseline", grad_b_token_baseline)]:
        value = checks.check_number(value, name)
        checks.check(not _near(value, want[0]), f"{name} is the theta_a component of the gradient (index 0)",
                     hint="theta_b is index 1")
        checks.check(_near(value, want[1]), f"{name} is off", hint="component 1 of token_level_gradient(theta_ref, "
                     "second_probs, reward_table, b), with b = 0 or b = E_ref[r]; a baseline does not change it")


TOKEN_LEVEL_GRADIENT = Exercise("ex11_3b", _token_level_gradient_checks,
                                Shortcuts(library=(f"{TILTING}:expected_reward",)))

_CHAIN_RULE_HINT = ("KL(p || q) = KL(p(y1) || q(y1)) + sum_y1 p(y1) KL(p(. | y1) || q(. | y1)): the first-token KL "
                    "plus the second-token KLs weighted by p's own first-token probabilities, each term p log(p / q)")


def kl_pi_star_exact() -> float:
    """KL(pi* || pi_ref) of the worked example at beta = 1, from the library's exact solver."""
    worked = scenarios.get_scenario("worked")
    return tilting.tilted_optimum(worked.model, worked.rewards, 1.0).kl


def _kl_chain_rule_checks(exercise: Exercise, kl_chain_rule, kl_pi_star) -> None:
    worked = scenarios.get_scenario("worked")
    star = tilting.token_level_optimum(worked.model, worked.rewards, 1.0)
    want = kl_pi_star_exact()
    what = "kl_chain_rule(pi* tables, pi_ref tables)"
    yours = checks.check_number(exercise.call(kl_chain_rule, star.tables[0], star.tables[1],
                                              worked.model.tables[0], worked.model.tables[1], call=what), what)
    checks.check_finite(yours, what, hint=_CHAIN_RULE_HINT)
    checks.check(abs(yours - want) <= 1e-8 + 1e-6 * abs(want), f"{what} is off", hint=_CHAIN_RULE_HINT)
    what = "kl_chain_rule([1, 0], [[0.5, 0.5], [0, 1]], [0.5, 0.5], [[0.5, 0.5], [0.5, 0.5]])"
    got = checks.check_number(exercise.call(
        kl_chain_rule, np.array([1.0, 0.0]), np.array([[0.5, 0.5], [0.0, 1.0]]), np.array([0.5, 0.5]),
        np.array([[0.5, 0.5], [0.5, 0.5]]), call=what), what)
    checks.check_finite(got, what, hint="0 log 0 counts as 0: a token that p never writes contributes nothing "
                        "(np.where(p > 0, ..., 0.0))")
    checks.check_close(got, np.log(2), what, atol=1e-8, rtol=1e-6, hint="0 log 0 counts as 0")
    checks.check(abs(checks.check_number(kl_pi_star, "kl_pi_star") - yours) <= 1e-9 * max(1.0, abs(yours)),
                 "kl_pi_star is not your kl_chain_rule of pi*'s token-level tables against pi_ref's",
                 hint="kl_chain_rule(pi_star.tables[0], pi_star.tables[1], toy.tables[0], toy.tables[1]): p = pi*, "
                      "q = pi_ref, in that order")


KL_CHAIN_RULE = Exercise("ex11_3c", _kl_chain_rule_checks,
                         Shortcuts(library=(f"{KL}:kl", f"{KL}:sequence_kl", f"{KL}:chain_rule_kl")))

EXERCISES = (BANDIT_OBJECTIVE, TOKEN_LEVEL_GRADIENT, KL_CHAIN_RULE)

__getattr__ = module_getattr(__name__)  # older copies' names of its exercises, and what it holds
