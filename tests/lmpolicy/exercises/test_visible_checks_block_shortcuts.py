"""A visible check blocks what its exercise's declaration forbids, as the hidden tests do: an answer that hands the
work to the library's own implementation is told so where the student works, not only in the grade."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lmpolicy.exact import kl, scenarios, tilting
from lmpolicy.exact.toy import ToyLM
from lmpolicy.exercises import nb04
from lmpolicy.notebook import checks


def _model(first, second):
    return ToyLM(tuple("abc"[:len(first)]), [np.asarray(first, dtype=float), np.asarray(second, dtype=float)])


def kl_chain_rule_by_the_library(p_first, p_second, q_first, q_second):
    return kl.sequence_kl(_model(p_first, p_second), _model(q_first, q_second))


def kl_chain_rule_written(p_first, p_second, q_first, q_second):
    def rows(p, q):
        p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0).sum(axis=-1)
    return float(rows(p_first, q_first) + np.asarray(p_first) @ rows(p_second, q_second))


def token_level_gradient_by_the_library(theta, second_probs, rewards, baseline=0.0, h=1e-6):
    """The right numbers, by central differences of the library's exact expected reward."""
    return torch.tensor(nb04.exact_gradient(theta.numpy(), second_probs.numpy(), rewards.numpy(), h))


def token_level_gradient_written(theta, second_probs, rewards, baseline=0.0):
    first = torch.softmax(theta.detach(), dim=-1)
    scores = torch.eye(len(first), dtype=first.dtype) - first
    weight = first[:, None] * second_probs * (rewards - baseline)
    return (weight.sum(dim=1)[:, None] * scores).sum(dim=0)


def _worked_kl_pi_star(kl_chain_rule):
    worked = scenarios.get_scenario("worked")
    star = tilting.token_level_optimum(worked.model, worked.rewards, 1.0)
    return kl_chain_rule(star.tables[0], star.tables[1], worked.model.tables[0], worked.model.tables[1])


def _worked_grad_b(token_level_gradient):
    worked = scenarios.get_scenario("worked")
    second = torch.tensor(np.array(worked.model.tables[1]))
    rewards = torch.tensor(np.array(worked.rewards).reshape(2, 2))
    return token_level_gradient(torch.tensor(np.log([0.7, 0.3])), second, rewards)[1].item()


def test_the_chain_rule_handed_to_the_librarys_kl_fails_its_visible_check():
    kl_pi_star = nb04.kl_pi_star_exact()  # the right number, so that only the shortcut can fail
    with pytest.raises(checks.LibraryShortcutUsed, match="calling lmpolicy.exact.kl.sequence_kl gets no credit"):
        nb04.KL_CHAIN_RULE.check(kl_chain_rule_by_the_library, kl_pi_star)
    p, q = _model([0.5, 0.5], [[0.5, 0.5], [0.2, 0.8]]), _model([0.3, 0.7], [[0.6, 0.4], [0.5, 0.5]])
    assert kl.sequence_kl(p, q) > 0  # the library is whole again after the check


def test_the_token_level_gradient_handed_to_the_librarys_expected_reward_fails_its_visible_check():
    grad_b = _worked_grad_b(token_level_gradient_by_the_library)
    with pytest.raises(checks.LibraryShortcutUsed, match="calling lmpolicy.exact.tilting.expected_reward gets no credit"):
        nb04.TOKEN_LEVEL_GRADIENT.check(token_level_gradient_by_the_library, grad_b, grad_b)


def test_the_same_exercises_written_by_hand_pass_their_visible_checks(capsys):
    nb04.KL_CHAIN_RULE.check(kl_chain_rule_written, _worked_kl_pi_star(kl_chain_rule_written))
    grad_b = _worked_grad_b(token_level_gradient_written)
    nb04.TOKEN_LEVEL_GRADIENT.check(token_level_gradient_written, grad_b, grad_b)
    printed = capsys.readouterr().out
    assert "Exercise 11.3(c) passed the visible checks" in printed
    assert "Exercise 11.3(b) passed the visible checks" in printed
