"""The tilted optimum, the objective J, soft values and the token-level optimum.

Expected numbers: the chapter's printed values (compared at the printed precision), hand formulas
written out with math.exp / math.log, brute-force enumeration, and the Gibbs identity.
"""
import itertools
import math

import numpy as np
import pytest

from lmpolicy.exact.tilting import (expected_reward, frontier, kl_objective, soft_values, tilted_optimum,
                              token_level_optimum)
from lmpolicy.exact.toy import ToyLM

WORKED = ToyLM(("a", "b"), [[0.7, 0.3], [[0.6, 0.4], [0.5, 0.5]]])
REWARDS = {"aa": 0.0, "ab": 1.0, "ba": 0.0, "bb": 2.0}
REF = [0.42, 0.28, 0.15, 0.15]


def approx_printed(value: float, printed: float, decimals: int) -> bool:
    """True when ``value`` rounds to ``printed`` at the printed number of decimals."""
    return round(float(value), decimals) == printed


def test_worked_example_beta_1_sequence_level():
    opt = tilted_optimum(WORKED, REWARDS, 1.0)
    assert approx_printed(opt.partition, 2.439, 3)
    for value, printed in zip(opt.probs, (0.172, 0.312, 0.0615, 0.454)):
        assert approx_printed(value, printed, len(str(printed)) - 2)
    assert approx_printed(opt.expected_reward, 1.221, 3)
    assert approx_printed(opt.kl, 0.329, 3)
    assert approx_printed(opt.objective, 0.892, 3)
    # J(pi*) = beta log Z = ln Z, here computed by hand
    z = 0.42 + 0.28 * math.e + 0.15 + 0.15 * math.e ** 2
    assert opt.log_partition == pytest.approx(math.log(z), rel=1e-14)
    assert opt.objective == pytest.approx(math.log(z), rel=1e-12)
    assert opt.beta_log_partition == pytest.approx(math.log(z), rel=1e-14)


def test_alternatives_at_beta_1():
    assert kl_objective(REF, REF, [0, 1, 0, 2], 1.0) == pytest.approx(0.58)
    always_bb = kl_objective([0, 0, 0, 1], WORKED, REWARDS, 1.0)
    assert approx_printed(2.0 - always_bb, 1.897, 3)  # KL = ln(1 / 0.15)
    assert approx_printed(always_bb, 0.103, 3)
    assert always_bb == pytest.approx(2 - math.log(1 / 0.15), rel=1e-13)
    # mass where pi_ref has none: J = -inf
    zero_ref = [0.5, 0.5, 0.0, 0.0]
    assert kl_objective([0, 0, 0, 1], zero_ref, [0, 1, 0, 2], 1.0) == -np.inf


def test_gibbs_identity_for_random_policies():
    rng = np.random.default_rng(0)
    toy = ToyLM.random(("a", "b", "c"), depth=3, seed=1)
    rewards = rng.normal(size=27)
    for beta in (0.1, 1.0, 5.0):
        opt = tilted_optimum(toy, rewards, beta)
        for _ in range(5):
            policy = rng.dirichlet(np.ones(27))
            gibbs = opt.beta_log_partition - beta * np.sum(policy * np.log(policy / opt.probs))
            assert kl_objective(policy, toy, rewards, beta) == pytest.approx(gibbs, rel=1e-10)
            assert kl_objective(policy, toy, rewards, beta) < opt.objective


def test_soft_values_and_token_level_optimum_beta_1():
    values = soft_values(WORKED, REWARDS, 1.0)
    assert approx_printed(values[1][0], 0.523, 3)
    assert approx_printed(values[1][1], 1.434, 3)
    assert values[1][0] == pytest.approx(math.log(0.6 + 0.4 * math.e), rel=1e-14)
    assert values[1][1] == pytest.approx(math.log(0.5 + 0.5 * math.e ** 2), rel=1e-14)
    np.testing.assert_array_equal(values[2], [[0, 1], [0, 2]])
    policy = token_level_optimum(WORKED, REWARDS, 1.0)
    assert approx_printed(policy.tables[0][0], 0.484, 3)
    assert approx_printed(policy.tables[1][0][1], 0.644, 3)
    assert approx_printed(policy.tables[1][1][1], 0.881, 3)
    np.testing.assert_allclose(policy.response_probs(), tilted_optimum(WORKED, REWARDS, 1.0).probs,
                               rtol=0, atol=1e-12)


def test_worked_example_beta_half():
    values = soft_values(WORKED, REWARDS, 0.5)
    opt = tilted_optimum(WORKED, REWARDS, 0.5)
    policy = token_level_optimum(WORKED, REWARDS, 0.5)
    assert approx_printed(values[1][0], 0.634, 3)
    assert approx_printed(values[1][1], 1.663, 3)  # the chapter prints 1.662
    assert values[1][1] == pytest.approx(0.5 * math.log(0.5 + 0.5 * math.e ** 4), rel=1e-14)
    assert approx_printed(opt.beta_log_partition, 1.191, 3)
    assert approx_printed(values[0], 1.191, 3)
    assert approx_printed(policy.tables[0][0], 0.230, 3)
    assert approx_printed(opt.probs[3], 0.756, 3)


def test_worked_example_beta_2():
    opt = tilted_optimum(WORKED, REWARDS, 2.0)
    assert approx_printed(opt.kl, 0.0794, 4)
    assert approx_printed(opt.expected_reward, 0.887, 3)


def _brute_force_optimum(ref, rewards, beta):
    weights = [p * math.exp(r / beta) for p, r in zip(ref, rewards)]
    return np.array(weights) / sum(weights)


def test_frontier_matches_brute_force_and_is_monotone():
    betas = np.geomspace(0.05, 50, 40)
    front = frontier(WORKED, REWARDS, betas)
    for i, beta in enumerate(betas):
        expected = _brute_force_optimum(REF, [0, 1, 0, 2], beta)
        np.testing.assert_allclose(front.probs[i], expected, rtol=1e-12)
        assert front.kl[i] == pytest.approx(sum(p * math.log(p / q) for p, q in zip(expected, REF)), rel=1e-10)
    assert np.all(np.diff(front.kl) < 0) and np.all(np.diff(front.expected_reward) < 0)
    np.testing.assert_allclose(front.objective, front.beta_log_partition, rtol=1e-12)


def test_pi_star_at_kl_0_045_earns_0_809():
    # bisection on the brute-force optimum: KL falls as beta grows
    def kl_at(beta):
        p = _brute_force_optimum(REF, [0, 1, 0, 2], beta)
        return sum(a * math.log(a / b) for a, b in zip(p, REF))
    lo, hi = 0.5, 20.0
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if kl_at(mid) > 0.045 else (lo, mid)
    assert approx_printed(tilted_optimum(WORKED, REWARDS, lo).expected_reward, 0.809, 3)


def test_tiny_beta_is_stable_and_zero_reference_stays_zero():
    toy = ToyLM(("a", "b"), [[0.7, 0.3], [[1.0, 0.0], [0.5, 0.5]]])  # pi_ref(ab) = 0
    rewards = {"aa": 0.0, "ab": 5.0, "ba": 0.0, "bb": 2.0}
    with np.errstate(divide="raise", over="raise", invalid="raise"):
        for beta in (1e-3, 1e-4):
            opt = tilted_optimum(toy, rewards, beta)
            assert opt.probs[1] == 0.0
            assert opt.probs[3] == pytest.approx(1.0, abs=1e-12)
            assert np.isfinite(opt.log_partition) and np.isfinite(opt.kl)
            assert opt.kl == pytest.approx(math.log(1 / 0.15), rel=1e-9)
            values = soft_values(toy, rewards, beta)
            assert all(np.all(np.isfinite(v)) for v in values)
            policy = token_level_optimum(toy, rewards, beta)
            assert policy.tables[1][0][1] == 0.0
            np.testing.assert_allclose(policy.response_probs(), opt.probs, atol=1e-12)
    assert tilted_optimum(toy, rewards, 1e-3).partition == np.inf  # e^(2000) overflows; log Z does not


@pytest.mark.parametrize("beta", [0.07, 1.0, 30.0])
def test_token_product_equals_sequence_optimum_at_depth_8(beta):
    toy = ToyLM.random(("a", "b", "c"), depth=8, seed=11)
    rewards = np.random.default_rng(2).uniform(0, 2, size=3 ** 8)
    policy = token_level_optimum(toy, rewards, beta)
    np.testing.assert_allclose(policy.response_probs(), tilted_optimum(toy, rewards, beta).probs,
                               rtol=0, atol=1e-12)


def test_soft_values_by_brute_force_at_depth_3():
    toy = ToyLM.random(("a", "b", "c"), depth=3, seed=5)
    rewards = np.random.default_rng(3).normal(size=27)
    beta = 0.7
    values = soft_values(toy, rewards, beta)
    probs = toy.response_probs()
    for length in range(4):
        for prefix in itertools.product("abc", repeat=length):
            prefix = "".join(prefix)
            # V(s) = beta log E_{pi_ref}[exp(r / beta) | s], summing over completions of s
            total = weight = 0.0
            for i, y in enumerate(toy.responses):
                if y.startswith(prefix):
                    total += probs[i] * math.exp(rewards[i] / beta)
                    weight += probs[i]
            assert values[length][toy.prefix_index(prefix)] == pytest.approx(beta * math.log(total / weight), rel=1e-12, abs=1e-12)


def test_expected_reward():
    assert expected_reward(WORKED, REWARDS) == pytest.approx(0.58)
    assert expected_reward([0, 0, 0, 1], [0, 1, 0, 2]) == 2.0


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), float("inf"), "one"])
def test_bad_beta_is_rejected(bad):
    for call in (lambda: tilted_optimum(WORKED, REWARDS, bad), lambda: soft_values(WORKED, REWARDS, bad),
                 lambda: token_level_optimum(WORKED, REWARDS, bad), lambda: frontier(WORKED, REWARDS, [1.0, bad]),
                 lambda: kl_objective(REF, REF, [0, 1, 0, 2], bad)):
        with pytest.raises(ValueError, match="beta must be"):
            call()


def test_bad_rewards_and_policies_are_rejected():
    with pytest.raises(ValueError, match="missing"):
        tilted_optimum(WORKED, {"aa": 0}, 1.0)
    with pytest.raises(ValueError, match="one number per response"):
        tilted_optimum(REF, [0, 1, 2], 1.0)
    with pytest.raises(ValueError, match="sums to"):
        kl_objective([0.5, 0.6, 0, 0], REF, [0, 1, 0, 2], 1.0)
    with pytest.raises(ValueError, match="same responses"):
        kl_objective([0.5, 0.5], REF, [0, 1, 0, 2], 1.0)


def test_exercise_11_5b_intermediate_numbers():
    opt = tilted_optimum(WORKED, REWARDS, 0.5)
    policy = token_level_optimum(WORKED, REWARDS, 0.5)
    # Z = 0.7 (0.6 + 0.4 e^2) + 0.3 (0.5 + 0.5 e^4)
    z = 0.7 * (0.6 + 0.4 * math.e ** 2) + 0.3 * (0.5 + 0.5 * math.e ** 4)
    assert round(opt.partition, 2) == 10.83 and opt.partition == pytest.approx(z, rel=1e-13)
    assert round(float(policy.tables[0][1]), 3) == 0.770
    assert round(float(policy.tables[1][1][1]), 3) == 0.982


def test_exercise_11_9a_slider_step_beta_0_501():
    opt = tilted_optimum(WORKED, REWARDS, 0.501)
    assert round(opt.beta_log_partition, 3) == 1.190
    assert round(float(opt.probs[3]), 3) == 0.755
