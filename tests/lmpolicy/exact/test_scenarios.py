"""The demo scenarios: their data, and the chapter's readouts they must reproduce.

Readouts are checked at the printed precision against the library, and the library against
independent computations written here (brute-force pi* with numpy, bisection, sampling).
"""
import math

import numpy as np
import pytest

from lmpolicy.exact.kl import estimator_moments, probability_mean_below
from lmpolicy.exact.scenarios import (KL_DEMO_DEFAULT_X, KL_DEMO_REF_PROBS, SCENARIOS, get_scenario,
                                kl_demo_policy)
from lmpolicy.exact.temperature import temperature_curve
from lmpolicy.exact.tilting import frontier, tilted_optimum


def brute_optimum(ref, rewards, beta):
    weights = np.asarray(ref) * np.exp(np.asarray(rewards) / beta)
    return weights / weights.sum()


def brute_kl(p, q):
    return float(sum(a * math.log(a / b) for a, b in zip(p, q) if a > 0))


def beta_with_kl(ref, rewards, target, lo=1e-3, hi=1e3):
    """Bisection in log beta: KL(pi*_beta || pi_ref) falls as beta grows."""
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if brute_kl(brute_optimum(ref, rewards, mid), ref) > target else (lo, mid)
    return lo


def test_menu_and_titles():
    assert list(SCENARIOS) == ["worked", "likely", "blind_spot"]
    assert get_scenario("worked").title == "Worked example from the text (vocabulary a, b)"
    # the parenthesis names the vocabulary (responses are two tokens long), not a length
    assert get_scenario("likely").title.endswith("(vocabulary a, b, c)")
    for scenario in SCENARIOS.values():
        assert "tokens)" not in scenario.title and scenario.model.depth == 2
        assert scenario.title.endswith(f"(vocabulary {', '.join(scenario.model.tokens)})")
    assert get_scenario("likely").title.startswith("Likely answers are good answers")
    assert get_scenario("blind_spot").title.startswith("Reward model with a blind spot")
    with pytest.raises(ValueError) as error:
        get_scenario("overoptimisation")
    for name in ("'overoptimisation'", "'worked'", "'likely'", "'blind_spot'"):
        assert name in str(error.value)


def test_scenario_data():
    worked = get_scenario("worked")
    assert worked.model.tokens == ("a", "b")
    np.testing.assert_allclose(worked.model.response_probs(), [0.42, 0.28, 0.15, 0.15])
    np.testing.assert_array_equal(worked.rewards, [0, 1, 0, 2])
    assert not worked.has_blind_spot
    likely = get_scenario("likely")
    np.testing.assert_allclose(likely.model.tables[1][1], [0.7, 0.2, 0.1])
    np.testing.assert_array_equal(likely.rewards, [0.8, 0.3, 0, 1.0, 0.3, 0, 0.5, 0.2, 0])
    blind = get_scenario("blind_spot")
    np.testing.assert_array_equal(blind.rewards, [0.2, 0.2, 0.2, 0.4, 1.0, 0.4, 0.7, 0.7, 1.6])
    np.testing.assert_array_equal(blind.true_rewards, [0.2, 0.2, 0.2, 0.4, 1.0, 0.4, 0.7, 0.7, 0.0])
    assert blind.has_blind_spot
    with pytest.raises(ValueError):
        blind.rewards[0] = 5.0


def test_blind_spot_reference():
    blind = get_scenario("blind_spot")
    probs = blind.model.response_probs()
    assert round(probs[blind.model.response_index("cc")], 2) == 0.02  # 0.1 * 0.2
    assert round(probs[blind.model.response_index("bb")], 2) == 0.24  # 0.4 * 0.6
    assert round(float(probs @ blind.true_rewards), 2) == 0.46


def test_blind_spot_true_reward_peaks_then_collapses():
    blind = get_scenario("blind_spot")
    ref = blind.model.response_probs()

    def true_reward(beta):
        return float(brute_optimum(ref, blind.rewards, beta) @ blind.true_rewards)

    lo, hi = 0.2, 1.0  # golden-section search for the peak
    for _ in range(100):
        a, b = hi - 0.618 * (hi - lo), lo + 0.618 * (hi - lo)
        lo, hi = (lo, b) if true_reward(a) > true_reward(b) else (a, hi)
    peak = (lo + hi) / 2
    assert round(peak, 3) == 0.427
    opt = tilted_optimum(blind.model, blind.rewards, peak)
    assert round(float(opt.probs @ blind.true_rewards), 3) == 0.626
    assert round(opt.kl, 2) == 0.50
    assert round(opt.expected_reward, 2) == 0.90
    low = tilted_optimum(blind.model, blind.rewards, 0.1)
    assert round(low.expected_reward, 2) == 1.58
    assert round(float(low.probs @ blind.true_rewards), 2) == 0.03
    # the frontier's true reward on a grid peaks at the same place
    betas = np.linspace(0.3, 0.6, 301)
    curve = frontier(blind.model, blind.rewards, betas)
    assert round(float(betas[np.argmax(curve.probs @ blind.true_rewards)]), 3) == pytest.approx(0.427, abs=1e-3)


def test_blind_spot_bb_equals_cc():
    # 0.24 e^(1/beta) = 0.02 e^(1.6/beta)  <=>  beta = 0.6 / ln 12
    beta = 0.6 / math.log(12)
    assert round(beta, 3) == 0.241
    blind = get_scenario("blind_spot")
    probs = tilted_optimum(blind.model, blind.rewards, beta).probs
    assert probs[blind.model.response_index("bb")] == pytest.approx(probs[blind.model.response_index("cc")], rel=1e-12)


def test_likely_answers_lower_temperature_helps_but_stays_below_the_frontier():
    likely = get_scenario("likely")
    ref = likely.model.response_probs()
    curve = temperature_curve(likely.model, likely.rewards, [1.0, 0.5, 0.1])
    assert [round(float(x), 3) for x in curve.expected_reward] == [0.601, 0.726, 0.800]
    temperatures = [0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 0.99, 1.01, 1.5, 2.0, 3.16]
    curve = temperature_curve(likely.model, likely.rewards, temperatures)
    for t, reward, divergence in zip(temperatures, curve.expected_reward, curve.kl):
        beta = beta_with_kl(ref, likely.rewards, divergence)
        best = float(brute_optimum(ref, likely.rewards, beta) @ likely.rewards)
        assert reward < best - 1e-6, f"T = {t}: temperature reward {reward} reaches the frontier {best}"


def test_worked_temperature_against_the_frontier():
    worked = get_scenario("worked")
    ref = worked.model.response_probs()
    beta = beta_with_kl(ref, worked.rewards, 0.045)
    assert round(float(brute_optimum(ref, worked.rewards, beta) @ worked.rewards), 3) == 0.809
    hot = temperature_curve(worked.model, worked.rewards, [3.16])
    assert round(float(hot.expected_reward[0]), 3) == 0.699 and round(float(hot.kl[0]), 3) == 0.045


def test_kl_demo_policy():
    np.testing.assert_allclose(kl_demo_policy(0.0), KL_DEMO_REF_PROBS, rtol=1e-13)
    np.testing.assert_allclose(kl_demo_policy(1.0), np.full(8, 0.125))
    squared = np.asarray(KL_DEMO_REF_PROBS) ** 2
    np.testing.assert_allclose(kl_demo_policy(-1.0), squared / squared.sum(), rtol=1e-13)
    powered = np.asarray(KL_DEMO_REF_PROBS) ** 0.8
    np.testing.assert_allclose(kl_demo_policy(0.2), powered / powered.sum(), rtol=1e-13)
    assert KL_DEMO_REF_PROBS.sum() == pytest.approx(1.0)
    for bad in (-1.01, 1.5, float("nan")):
        with pytest.raises(ValueError, match="between -1.0 and 1.0"):
            kl_demo_policy(bad)


def test_kl_demo_default_half_the_k1_values_are_negative():
    powered = np.asarray(KL_DEMO_REF_PROBS) ** 0.8
    p_theta = powered / powered.sum()
    share = float(p_theta[p_theta < KL_DEMO_REF_PROBS].sum())  # k1 = log(p_theta / p_ref) < 0
    assert round(share, 3) == 0.521
    moments = estimator_moments(kl_demo_policy(KL_DEMO_DEFAULT_X), KL_DEMO_REF_PROBS)
    assert moments.negative_share["k1"] == pytest.approx(share, rel=1e-12)
    assert moments.negative_share["k3"] == 0.0


def test_kl_demo_far_right_k2_is_biased_up_about_45_percent():
    moments = estimator_moments(kl_demo_policy(1.0), KL_DEMO_REF_PROBS)
    uniform = np.full(8, 0.125)
    assert round(moments.kl, 1) == 1.0
    assert moments.kl == pytest.approx(brute_kl(uniform, KL_DEMO_REF_PROBS), rel=1e-12)
    k2_by_hand = float(np.mean(0.5 * np.log(uniform / KL_DEMO_REF_PROBS) ** 2))
    relative_bias = k2_by_hand / moments.kl - 1
    assert round(relative_bias, 2) == 0.45  # exactly 0.4459: "about 45%"
    assert moments.bias["k2"] / moments.kl == pytest.approx(relative_bias, rel=1e-12)


def test_kl_demo_far_left_k3_batches_land_low():
    p_theta = kl_demo_policy(-1.0)
    moments = estimator_moments(p_theta, KL_DEMO_REF_PROBS)
    assert moments.std["k3"] > moments.std["k1"]
    # Exercise 11.9(d): k2 now has the smallest spread but is biased low
    assert moments.std["k2"] < moments.std["k1"] and moments.bias["k2"] < -0.05
    exact = probability_mean_below(p_theta, KL_DEMO_REF_PROBS, 16, estimator="k3")
    assert round(exact, 3) == 0.704
    # independent check by sampling 200,000 batches of 16 tokens (standard error about 0.001)
    rng = np.random.default_rng(0)
    draws = rng.choice(8, size=(200_000, 16), p=p_theta)
    ratio = KL_DEMO_REF_PROBS[draws] / p_theta[draws]
    batch_means = (ratio - 1 - np.log(ratio)).mean(axis=1)
    assert np.mean(batch_means < moments.kl) == pytest.approx(exact, abs=0.005)
