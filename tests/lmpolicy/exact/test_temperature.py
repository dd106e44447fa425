"""softmax, token-level temperature, the power distribution and the temperature curve.

Expected numbers come from the chapter (to the precision it prints) or from hand formulas written
out here with math.exp, never from the code under test.
"""
import math

import numpy as np
import pytest

from lmpolicy.exact.numeric import logsumexp
from lmpolicy.exact.temperature import (log_softmax, power_distribution, softmax, temperature_curve,
                                        token_temperature)
from lmpolicy.exact.toy import ToyLM

WORKED = ToyLM(("a", "b"), [[0.7, 0.3], [[0.6, 0.4], [0.5, 0.5]]])
WORKED_REWARDS = {"aa": 0.0, "ab": 1.0, "ba": 0.0, "bb": 2.0}


@pytest.mark.parametrize("temperature, printed", [
    (1.0, (0.665, 0.245, 0.090)), (0.5, (0.867, 0.117, 0.016)), (2.0, (0.506, 0.307, 0.186)),
])
def test_softmax_matches_the_chapter(temperature, printed):
    np.testing.assert_allclose(softmax([2.0, 1.0, 0.0], temperature), printed, atol=5e-4)


def test_softmax_matches_hand_formula_and_power_form():
    z = np.array([2.0, 1.0, 0.0])
    for t in (0.3, 1.0, 4.0):
        weights = [math.exp(v / t) for v in z]
        np.testing.assert_allclose(softmax(z, t), np.array(weights) / sum(weights), rtol=1e-14)
        # temperature = raise the T = 1 probabilities to the power 1/T and renormalise
        powered = softmax(z) ** (1 / t)
        np.testing.assert_allclose(softmax(z, t), powered / powered.sum(), rtol=1e-12)


def test_softmax_is_stable_and_keeps_zeros():
    with np.errstate(all="raise"):
        probs = softmax([1000.0, 999.0, -np.inf], temperature=0.01)
        assert probs[2] == 0.0 and probs.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(softmax([[1e4, 1e4]]), [[0.5, 0.5]])
    assert logsumexp([-np.inf, -np.inf]) == -np.inf
    np.testing.assert_allclose(np.exp(log_softmax([1.0, 2.0], 0.5)), softmax([1.0, 2.0], 0.5))


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_non_positive_temperature_is_rejected(bad):
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        softmax([1.0, 2.0], bad)
    with pytest.raises(ValueError, match="temperature"):
        token_temperature(WORKED, bad)
    with pytest.raises(ValueError, match="temperature"):
        power_distribution(WORKED, bad)
    with pytest.raises(ValueError, match="temperature"):
        temperature_curve(WORKED, WORKED_REWARDS, [1.0, bad])


def test_token_temperature_tempers_each_row_and_keeps_zeros():
    toy = ToyLM(("a", "b", "c"), [[0.5, 0.5, 0.0], [[0.2, 0.8, 0.0], [0.0, 0.0, 1.0], [0.1, 0.3, 0.6]]])
    hot = token_temperature(toy, 0.5)
    np.testing.assert_allclose(hot.tables[0], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(hot.tables[1][0], [0.04 / 0.68, 0.64 / 0.68, 0.0], rtol=1e-14)
    np.testing.assert_array_equal(hot.tables[1][1], [0.0, 0.0, 1.0])
    assert hot.response_probs()[toy.response_index("ac")] == 0.0


def test_exercise_11_7_token_temperature_differs_from_power_distribution():
    # pi_ref(a) = pi_ref(b) = 0.5; uniform after a; all mass on one token after b; T = 0.5
    toy = ToyLM(("a", "b"), [[0.5, 0.5], [[0.5, 0.5], [1.0, 0.0]]])
    np.testing.assert_allclose(token_temperature(toy, 0.5).response_probs(), [0.25, 0.25, 0.5, 0.0])
    # p_T ∝ (0.25^2, 0.25^2, 0.5^2) = (1, 1, 4) / 6
    np.testing.assert_allclose(power_distribution(toy, 0.5), [1 / 6, 1 / 6, 4 / 6, 0.0], rtol=1e-14)


def test_power_distribution_on_vector_and_zeros():
    probs = power_distribution([0.42, 0.28, 0.15, 0.15, 0.0], 2.0)
    roots = np.sqrt([0.42, 0.28, 0.15, 0.15])
    np.testing.assert_allclose(probs[:4], roots / roots.sum(), rtol=1e-14)
    assert probs[4] == 0.0


def _tempered_worked(t: float) -> np.ndarray:
    """Token-level temperature on the worked example, by hand (independent of the library)."""
    def tempered(p):
        w = [x ** (1 / t) for x in p]
        return [x / sum(w) for x in w]
    first, after_a, after_b = tempered([0.7, 0.3]), tempered([0.6, 0.4]), tempered([0.5, 0.5])
    return np.array([first[0] * after_a[0], first[0] * after_a[1], first[1] * after_b[0], first[1] * after_b[1]])


def _kl_by_hand(p, q) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q) if a > 0)


def test_temperature_curve_matches_hand_computation():
    ts = [0.3, 0.486, 1.0, 3.16]
    curve = temperature_curve(WORKED, WORKED_REWARDS, ts)
    for i, t in enumerate(ts):
        probs = _tempered_worked(t)
        np.testing.assert_allclose(curve.probs[i], probs, rtol=1e-12)
        assert curve.expected_reward[i] == pytest.approx(probs @ [0, 1, 0, 2], rel=1e-12)
        assert curve.kl[i] == pytest.approx(_kl_by_hand(probs, [0.42, 0.28, 0.15, 0.15]), rel=1e-10, abs=1e-15)
    assert curve.kl[2] == pytest.approx(0.0, abs=1e-15)
    assert curve.expected_reward[2] == pytest.approx(0.58)


def test_temperature_numbers_of_the_chapter_worked_example():
    curve = temperature_curve(WORKED, WORKED_REWARDS, [0.486, 3.16])
    # T = 0.486 matches pi*'s KL at beta = 2 (0.0794) and earns 0.407
    assert round(float(curve.kl[0]), 4) == 0.0794
    assert round(float(curve.expected_reward[0]), 3) == 0.407
    # the far end of the slider, T = 3.16: KL 0.045, E[r] 0.699
    assert round(float(curve.kl[1]), 3) == 0.045
    assert round(float(curve.expected_reward[1]), 3) == 0.699


def test_the_temperature_matching_kl_0_0794_is_0_486():
    # bisection on the hand computation: KL(T) increases as T falls below 1
    lo, hi = 0.3, 0.9
    for _ in range(60):
        mid = (lo + hi) / 2
        if _kl_by_hand(_tempered_worked(mid), [0.42, 0.28, 0.15, 0.15]) > 0.0794210057:
            lo = mid
        else:
            hi = mid
    assert round(lo, 3) == 0.486


def test_sequence_level_curve_is_the_power_distribution():
    curve = temperature_curve(WORKED, WORKED_REWARDS, [0.5, 2.0], level="sequence")
    ref = np.array([0.42, 0.28, 0.15, 0.15])
    for i, t in enumerate((0.5, 2.0)):
        w = ref ** (1 / t)
        np.testing.assert_allclose(curve.probs[i], w / w.sum(), rtol=1e-13)
    with pytest.raises(ValueError, match="'token' or 'sequence'"):
        temperature_curve(WORKED, WORKED_REWARDS, [1.0], level="response")


def test_exercise_11_2b_temperature_for_top_probability_0_95():
    # 1 / (1 + u + u^2) = 0.95 with u = exp(-1/T)
    u = (-1 + math.sqrt(1 + 4 * (1 / 0.95 - 1))) / 2
    t = -1 / math.log(u)
    assert round(t, 3) == 0.334
    assert softmax([2.0, 1.0, 0.0], t)[0] == pytest.approx(0.95, rel=1e-12)


@pytest.mark.parametrize("t", [0.2, 0.5, 0.9])
def test_exercise_11_7a_power_distribution_is_a_tilted_optimum(t):
    from lmpolicy.exact.tilting import tilted_optimum
    toy = ToyLM.random(("a", "b", "c"), depth=3, seed=4)
    # reward = the reference's own log-likelihood, beta = T / (1 - T)
    tilted = tilted_optimum(toy, toy.response_log_probs(), t / (1 - t))
    np.testing.assert_allclose(power_distribution(toy, t), tilted.probs, rtol=1e-10)
