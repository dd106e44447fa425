"""KL, the chain rule, and the k1 / k2 / k3 estimators (exact moments and batch-mean probabilities).

Expected values: the chapter's printed numbers, hand formulas with math.log, and brute-force
enumeration of every sampled batch.
"""
import itertools
import math

import numpy as np
import pytest

from lmpolicy.exact.kl import (MAX_COMPOSITIONS, chain_rule_kl, estimator_moments, kl, kl_estimates, mean_distribution,
                         probability_mean_below, sequence_kl)
from lmpolicy.exact.toy import ToyLM

P_THETA, P_REF = (0.6, 0.3, 0.1), (0.4, 0.4, 0.2)


def test_kl_hand_formula_and_conventions():
    assert round(kl(P_THETA, P_REF), 4) == 0.0877
    assert kl(P_THETA, P_REF) == pytest.approx(0.6 * math.log(1.5) + 0.3 * math.log(0.75) + 0.1 * math.log(0.5))
    assert kl([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]) == pytest.approx(math.log(2))  # 0 log 0 = 0
    with np.errstate(all="raise"):
        assert kl([0.5, 0.5], [1.0, 0.0]) == np.inf  # p > 0 = q
    assert kl(P_REF, P_REF) == 0.0
    batch = kl([[0.6, 0.3, 0.1], [0.4, 0.4, 0.2]], P_REF)
    np.testing.assert_allclose(batch, [kl(P_THETA, P_REF), 0.0])


@pytest.mark.parametrize("p, q, fragment", [
    ([0.5, 0.6], [0.5, 0.5], "p must sum to 1"),
    ([0.5, 0.5], [1.5, -0.5], "q must hold probabilities"),
    (0.5, [1.0], "array of probabilities"),
])
def test_kl_rejects_non_distributions(p, q, fragment):
    with pytest.raises(ValueError, match=fragment):
        kl(p, q)


def _tilted_worked_policy() -> ToyLM:
    """pi* of the worked example at beta = 1, built by hand from the chapter's formulas."""
    v_a, v_b = math.log(0.6 + 0.4 * math.e), math.log(0.5 + 0.5 * math.e ** 2)
    first = np.array([0.7 * math.exp(v_a), 0.3 * math.exp(v_b)])
    after_a = np.array([0.6, 0.4 * math.e]) / math.exp(v_a)
    after_b = np.array([0.5, 0.5 * math.e ** 2]) / math.exp(v_b)
    return ToyLM(("a", "b"), [first / first.sum(), [after_a, after_b]])


def test_chain_rule_worked_example():
    reference = ToyLM(("a", "b"), [[0.7, 0.3], [[0.6, 0.4], [0.5, 0.5]]])
    split = chain_rule_kl(_tilted_worked_policy(), reference)
    assert round(float(split.per_prefix[0]), 3) == 0.101
    assert [round(float(x), 3) for x in split.per_prefix[1]] == [0.121, 0.328]
    assert [round(float(x), 3) for x in split.weighted[1]] == [0.059, 0.169]
    assert round(split.total, 3) == 0.329
    assert split.total == pytest.approx(sequence_kl(_tilted_worked_policy(), reference), rel=1e-12)


def test_chain_rule_equals_sequence_kl_at_depth_5():
    policy = ToyLM.random(("a", "b", "c"), depth=5, seed=1)
    reference = ToyLM.random(("a", "b", "c"), depth=5, seed=2)
    split = chain_rule_kl(policy, reference)
    assert split.per_depth.shape == (5,)
    direct = sum(p * math.log(p / q) for p, q in zip(policy.response_probs(), reference.response_probs()))
    assert split.total == pytest.approx(direct, rel=1e-11)
    assert sequence_kl(policy, reference) == pytest.approx(direct, rel=1e-11)


def test_chain_rule_ignores_unreachable_prefixes():
    policy = ToyLM(("a", "b"), [[1.0, 0.0], [[0.5, 0.5], [1.0, 0.0]]])
    reference = ToyLM(("a", "b"), [[0.5, 0.5], [[0.5, 0.5], [0.0, 1.0]]])
    split = chain_rule_kl(policy, reference)
    assert split.per_prefix[1][1] == np.inf  # after b the two disagree completely ...
    assert split.weighted[1][1] == 0.0       # ... but the policy never writes b first
    assert split.total == pytest.approx(math.log(2))


def test_chain_rule_needs_matching_models():
    with pytest.raises(ValueError, match="share tokens and depth"):
        chain_rule_kl(ToyLM.random(("a", "b"), 2), ToyLM.random(("a", "b"), 3))


def test_per_token_estimates_match_the_chapter_table():
    estimates = kl_estimates(np.log(P_THETA), np.log(P_REF))
    assert [round(float(x), 3) for x in estimates.k1] == [0.405, -0.288, -0.693]
    assert [round(float(x), 3) for x in estimates.k2] == [0.082, 0.041, 0.240]
    assert [round(float(x), 3) for x in estimates.k3] == [0.072, 0.046, 0.307]
    np.testing.assert_array_equal(estimates["k3"], estimates.k3)
    # k3 = r - 1 - log r with r = pi_ref / pi_theta
    for i in range(3):
        ratio = P_REF[i] / P_THETA[i]
        assert estimates.k3[i] == pytest.approx(ratio - 1 - math.log(ratio), rel=1e-13)
    tiny = kl_estimates([-1e-9], [0.0])
    assert tiny.k3[0] == pytest.approx(0.5e-18, rel=1e-6)  # no cancellation for small log-ratios
    with pytest.raises(ValueError, match="same shape"):
        kl_estimates([0.0, 1.0], [0.0])


def _moments_by_hand(p, q):
    out = {}
    for name, f in (("k1", lambda l: l), ("k2", lambda l: l * l / 2), ("k3", lambda l: math.exp(-l) - 1 + l)):
        vals = [f(math.log(a / b)) for a, b in zip(p, q)]
        mean = sum(a * v for a, v in zip(p, vals))
        out[name] = (mean, math.sqrt(sum(a * (v - mean) ** 2 for a, v in zip(p, vals))))
    return out


def test_estimator_moments_worked_example():
    moments = estimator_moments(P_THETA, P_REF)
    assert round(moments.kl, 4) == 0.0877
    assert {k: round(v, 4) for k, v in moments.mean.items()} == {"k1": 0.0877, "k2": 0.0858, "k3": 0.0877}
    assert {k: round(v, 3) for k, v in moments.std.items()} == {"k1": 0.405, "k2": 0.055, "k3": 0.074}
    for name, (mean, std) in _moments_by_hand(P_THETA, P_REF).items():
        assert moments.mean[name] == pytest.approx(mean, rel=1e-12)
        assert moments.std[name] == pytest.approx(std, rel=1e-12)
    assert moments.bias["k1"] == pytest.approx(0.0, abs=1e-15)
    assert moments.negative_share == {"k1": pytest.approx(0.4), "k2": 0.0, "k3": 0.0}


def test_estimator_moments_rare_token():
    moments = estimator_moments([0.99, 0.01], [0.5, 0.5])
    assert round(moments.kl, 3) == 0.637
    assert round(float(moments.values.k3[1]), 2) == 45.09
    assert round(moments.std["k1"], 3) == 0.457
    assert round(moments.std["k3"], 2) == 4.47


def test_estimator_moments_inputs():
    moments = estimator_moments([0.5, 0.5, 0.0], [0.2, 0.3, 0.5])
    assert np.isnan(moments.values.k1[2])  # never drawn
    # E[pi_ref / pi_theta] = 0.5 < 1 when pi_theta misses a token pi_ref has: k3 is then biased low
    assert moments.mean["k3"] == pytest.approx(moments.kl - 0.5, rel=1e-12)
    with pytest.raises(ValueError, match="p_ref is 0 for token 1"):
        estimator_moments([0.5, 0.5], [1.0, 0.0])
    with pytest.raises(ValueError, match="same tokens"):
        estimator_moments([0.5, 0.5], [0.2, 0.3, 0.5])


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_batch_mean_probability_by_brute_force(estimator):
    p, q, n = (0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 5
    values = estimator_moments(p, q).values[estimator]
    truth = kl(p, q)
    brute = sum(math.prod(p[i] for i in batch) for batch in itertools.product(range(3), repeat=n)
                if sum(values[i] for i in batch) / n < truth)
    assert probability_mean_below(p, q, n, estimator=estimator) == pytest.approx(brute, rel=1e-12)
    distribution = mean_distribution(p, q, n, estimator)
    assert distribution.probs.sum() == pytest.approx(1.0, rel=1e-13)
    assert len(distribution.means) == math.comb(n + 2, 2)
    assert distribution.probs @ distribution.means == pytest.approx(estimator_moments(p, q).mean[estimator], rel=1e-12)


def test_single_token_batch_is_the_negative_share():
    assert probability_mean_below(P_THETA, P_REF, 1, threshold=0.0) == pytest.approx(0.4)


def test_batch_mean_limits():
    with pytest.raises(ValueError, match="more than the"):
        mean_distribution(np.full(8, 1 / 8), np.full(8, 1 / 8), 64)
    assert math.comb(16 + 7, 7) < MAX_COMPOSITIONS
    with pytest.raises(ValueError, match="n_tokens"):
        mean_distribution(P_THETA, P_REF, 0)
    with pytest.raises(ValueError, match="estimator must be one of"):
        mean_distribution(P_THETA, P_REF, 4, "k4")


def test_exercise_11_4d_batches_without_the_rare_token():
    p, q, n = (0.99, 0.01), (0.5, 0.5), 16
    moments = estimator_moments(p, q)
    common_k3, rare_k3 = (float(v) for v in moments.values.k3)
    assert round(0.99 ** n, 3) == 0.851
    assert round(common_k3, 3) == 0.188
    assert round((rare_k3 + 15 * common_k3) / 16, 1) == 3.0
    assert round(float(moments.values.k1[0]) / moments.kl - 1, 2) == 0.07  # k1 is 7% high then
    # the batch mean of k3 is below the truth exactly when no rare token was drawn
    assert probability_mean_below(p, q, n, estimator="k3") == pytest.approx(0.99 ** n, rel=1e-12)
