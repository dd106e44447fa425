"""KL divergences, the chain rule over tokens, and the k1 / k2 / k3 estimators.

Conventions (natural logs, so KL is in nats):

- ``kl(p, q) = sum_i p_i log(p_i / q_i)`` with ``0 log 0 = 0`` and ``+inf`` where ``p_i > 0 = q_i``.
- For a token sampled from pi_theta, its log-ratio is ``l = log pi_theta - log pi_ref`` and the
  three per-token estimators of KL(pi_theta || pi_ref) (Schulman, "Approximating KL divergence") are
  ``k1 = l``, ``k2 = l**2 / 2`` and ``k3 = exp(-l) - 1 + l``.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from lmpolicy.exact.numeric import check_distribution, log_of
from lmpolicy.exact.toy import ToyLM

ESTIMATORS = ("k1", "k2", "k3")
MAX_COMPOSITIONS = 2_000_000


def kl(p, q, axis: int = -1):
    """KL(p || q) = sum p log(p / q) along ``axis``, in nats.

    ``p`` and ``q`` are probability arrays of the same shape (or broadcastable, e.g. ``(K, N)``
    against ``(N,)`` gives ``K`` divergences); entries must be >= 0 and sum to 1 along ``axis``
    (within 1e-6). Terms with ``p = 0`` count 0; a term with ``p > 0 = q`` makes the KL ``inf``.
    A ToyLM stands for its ``response_probs()``. Returns a float for 1-D inputs, else an array.
    """
    p, q = (check_distribution(x, name, one_dimensional=False) for x, name in ((p, "p"), (q, "q")))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (log_of(p) - log_of(q)), 0.0)
    result = np.maximum(np.sum(terms, axis=axis), 0.0)  # KL >= 0; drop rounding noise below 0
    return float(result) if np.ndim(result) == 0 else result


def sequence_kl(policy: ToyLM, reference: ToyLM) -> float:
    """KL(policy || reference) over whole responses (the sum over all ``V ** depth`` responses)."""
    _check_same_shape(policy, reference)
    return kl(policy.response_probs(), reference.response_probs())


@dataclass(frozen=True)
class ChainRuleKL:
    """The sequence KL split token by token: KL = sum over depths of E_{prefix ~ policy}[per-token KL].

    per_prefix : tuple of arrays; ``per_prefix[d]`` has shape ``(V,) * d`` and holds
        KL(policy(.|s) || reference(.|s)) for every prefix s of d tokens (unweighted)
    weighted : tuple of arrays of the same shapes: ``policy(s) * per_prefix[d][s]`` (0 where the
        policy never reaches s), the contribution of each prefix to the sequence KL
    per_depth : (depth,) array, ``weighted[d].sum()``: the contribution of token d + 1
    total : float, ``per_depth.sum()``, equal to ``sequence_kl(policy, reference)``
    """

    per_prefix: tuple
    weighted: tuple
    per_depth: np.ndarray
    total: float


def chain_rule_kl(policy: ToyLM, reference: ToyLM) -> ChainRuleKL:
    """Per-token decomposition of KL(policy || reference) for two ToyLMs with the same tokens and depth.

    In the worked example at beta = 1 (policy = token-level pi*): ``per_prefix`` is
    ``(0.101, [0.121, 0.328])``, ``weighted`` is ``(0.101, [0.059, 0.169])`` and ``total`` 0.329.
    """
    _check_same_shape(policy, reference)
    per_prefix, weighted = [], []
    for depth, (table, ref_table) in enumerate(zip(policy.tables, reference.tables)):
        local = np.asarray(kl(table, ref_table))
        reach = policy.prefix_probs(depth)
        per_prefix.append(local)
        with np.errstate(invalid="ignore"):  # 0 * inf at prefixes the policy never reaches
            weighted.append(np.where(reach > 0, reach * local, 0.0))
    per_depth = np.array([float(np.sum(w)) for w in weighted])
    return ChainRuleKL(per_prefix=tuple(per_prefix), weighted=tuple(weighted), per_depth=per_depth,
                       total=float(per_depth.sum()))


@dataclass(frozen=True)
class KLEstimates:
    """Per-token estimates of KL(pi_theta || pi_ref), arrays of the shape of the inputs."""

    log_ratio: np.ndarray
    k1: np.ndarray
    k2: np.ndarray
    k3: np.ndarray

    def __getitem__(self, name: str) -> np.ndarray:
        """``estimates["k3"]`` is ``estimates.k3``."""
        if name not in ESTIMATORS:
            raise KeyError(f"unknown estimator {name!r}; choose one of {ESTIMATORS}")
        return getattr(self, name)


def kl_estimates(logp, ref_logp) -> KLEstimates:
    """k1, k2, k3 from the log-probs of sampled tokens under pi_theta (``logp``) and pi_ref (``ref_logp``).

    With ``l = logp - ref_logp``: ``k1 = l``, ``k2 = l**2 / 2``, ``k3 = exp(-l) - 1 + l`` (computed
    as ``expm1(-l) + l``, accurate for small ``l``). Inputs are arrays of the same shape (numpy
    arrays or anything ``np.asarray`` accepts); ``k2`` and ``k3`` are never negative.
    """
    logp, ref_logp = np.asarray(logp, dtype=float), np.asarray(ref_logp, dtype=float)
    if logp.shape != ref_logp.shape:
        raise ValueError(f"logp and ref_logp must have the same shape (one entry per sampled token), "
                         f"got {logp.shape} and {ref_logp.shape}")
    log_ratio = logp - ref_logp
    with np.errstate(over="ignore"):
        k3 = np.expm1(-log_ratio) + log_ratio
    return KLEstimates(log_ratio=log_ratio, k1=log_ratio, k2=0.5 * log_ratio ** 2, k3=k3)


@dataclass(frozen=True)
class EstimatorMoments:
    """Exact behaviour of k1, k2, k3 for one token sampled from pi_theta (no sampling involved).

    kl : float, the exact KL(pi_theta || pi_ref)
    p_theta, p_ref : (V,) the two distributions
    values : KLEstimates of shape (V,): the value each estimator takes when token i is drawn
        (``nan`` for tokens with p_theta = 0, which are never drawn)
    mean, std, bias, negative_share : dicts keyed "k1", "k2", "k3" (floats): expectation, standard
        deviation, ``mean - kl``, and the probability that a single value is < 0
    """

    kl: float
    p_theta: np.ndarray
    p_ref: np.ndarray
    values: KLEstimates
    mean: dict
    std: dict
    bias: dict
    negative_share: dict


def estimator_moments(p_theta, p_ref) -> EstimatorMoments:
    """Exact mean, standard deviation, bias and negative share of k1, k2, k3 under pi_theta.

    ``p_theta`` and ``p_ref`` are categorical distributions over the same tokens; ``p_ref`` must be
    > 0 wherever ``p_theta`` is (else the KL is infinite). k3 is unbiased only if ``p_theta`` also
    covers ``p_ref``: its mean is KL minus the p_ref mass on tokens p_theta never draws. For ``(0.6, 0.3, 0.1)`` against
    ``(0.4, 0.4, 0.2)``: KL 0.0877, means 0.0877 / 0.0858 / 0.0877, std 0.405 / 0.055 / 0.074.
    """
    p_theta, p_ref = _estimator_inputs(p_theta, p_ref)
    drawn = p_theta > 0
    values = kl_estimates(np.where(drawn, log_of(p_theta), np.nan), np.where(drawn, log_of(p_ref), np.nan))
    mean, std, negative_share = {}, {}, {}
    for name in ESTIMATORS:
        v = values[name][drawn]
        w = p_theta[drawn]
        mean[name] = float(w @ v)
        std[name] = float(np.sqrt(w @ (v - mean[name]) ** 2))
        negative_share[name] = float(w[v < 0].sum())
    exact = kl(p_theta, p_ref)
    return EstimatorMoments(kl=exact, p_theta=p_theta, p_ref=p_ref, values=values, mean=mean, std=std,
                            bias={name: mean[name] - exact for name in ESTIMATORS},
                            negative_share=negative_share)


@dataclass(frozen=True)
class MeanDistribution:
    """The exact distribution of the mean of ``n_tokens`` i.i.d. per-token estimates.

    means : (M,) every value the batch mean can take, sorted ascending (one per multinomial
        composition of the batch, so values may repeat)
    probs : (M,) their probabilities (sum to 1)
    """

    estimator: str
    n_tokens: int
    means: np.ndarray
    probs: np.ndarray

    def probability_below(self, threshold: float) -> float:
        """P(mean < threshold), strictly below."""
        return float(self.probs[self.means < threshold].sum())


def mean_distribution(p_theta, p_ref, n_tokens: int, estimator: str = "k1") -> MeanDistribution:
    """Exact distribution of the mean of ``n_tokens`` i.i.d. ``estimator`` values, tokens ~ p_theta.

    Enumerates every multinomial composition of the batch over the tokens that p_theta can draw
    (C(N + V - 1, V - 1) of them: 245,157 for 8 tokens and N = 16). Raises ValueError beyond
    ``MAX_COMPOSITIONS`` (2,000,000); sample instead for larger batches.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    if isinstance(n_tokens, bool) or int(n_tokens) != n_tokens or n_tokens < 1:
        raise ValueError(f"n_tokens must be a whole number >= 1, got {n_tokens!r}")
    n_tokens = int(n_tokens)
    moments = estimator_moments(p_theta, p_ref)
    drawn = moments.p_theta > 0
    values, probs = moments.values[estimator][drawn], moments.p_theta[drawn]
    count = math.comb(n_tokens + len(probs) - 1, len(probs) - 1)
    if count > MAX_COMPOSITIONS:
        raise ValueError(f"{n_tokens} tokens over {len(probs)} possible values give {count:,} batch "
                         f"compositions, more than the {MAX_COMPOSITIONS:,} this exact computation "
                         f"enumerates; use fewer tokens per estimate or estimate by sampling")
    counts = _compositions(n_tokens, len(probs))
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n_tokens + 1)))])
    log_weights = log_factorial[n_tokens] - log_factorial[counts].sum(axis=1) + counts @ np.log(probs)
    means = counts @ values / n_tokens
    order = np.argsort(means, kind="stable")
    return MeanDistribution(estimator=estimator, n_tokens=n_tokens, means=means[order],
                            probs=np.exp(log_weights[order]))


def probability_mean_below(p_theta, p_ref, n_tokens: int, threshold=None, estimator: str = "k1") -> float:
    """Exact P(mean of ``n_tokens`` i.i.d. ``estimator`` values < ``threshold``), tokens ~ p_theta.

    ``threshold=None`` means the exact KL(p_theta || p_ref): the chance that a batch estimate
    lands below the truth. See ``mean_distribution`` for the size limit.
    """
    distribution = mean_distribution(p_theta, p_ref, n_tokens, estimator)
    if threshold is None:
        threshold = kl(p_theta, p_ref)
    return distribution.probability_below(float(threshold))


# -- helpers -----------------------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def _compositions(total: int, parts: int) -> np.ndarray:
    """All ``parts``-tuples of non-negative ints summing to ``total``, shape (C(total+parts-1, parts-1), parts)."""
    rows = np.zeros((1, 0), dtype=np.int64)
    remaining = np.array([total], dtype=np.int64)
    for _ in range(parts - 1):
        choices = remaining + 1
        starts = np.repeat(np.cumsum(choices) - choices, choices)
        first = np.arange(choices.sum()) - starts
        rows = np.repeat(rows, choices, axis=0)
        remaining = np.repeat(remaining, choices) - first
        rows = np.column_stack([rows, first])
    result = np.column_stack([rows, remaining])
    result.setflags(write=False)
    return result


def _estimator_inputs(p_theta, p_ref) -> tuple[np.ndarray, np.ndarray]:
    p_theta = check_distribution(p_theta, "p_theta")
    p_ref = check_distribution(p_ref, "p_ref")
    if p_theta.shape != p_ref.shape:
        raise ValueError(f"p_theta and p_ref must be over the same tokens, got {p_theta.size} and "
                         f"{p_ref.size} probabilities")
    if np.any((p_theta > 0) & (p_ref == 0)):
        token = int(np.flatnonzero((p_theta > 0) & (p_ref == 0))[0])
        raise ValueError(f"p_ref is 0 for token {token}, which p_theta can draw: the KL is infinite "
                         f"and the estimators are undefined")
    return p_theta, p_ref


def _check_same_shape(policy: ToyLM, reference: ToyLM) -> None:
    if not (isinstance(policy, ToyLM) and isinstance(reference, ToyLM)):
        raise ValueError("policy and reference must both be ToyLM models")
    if policy.tokens != reference.tokens or policy.depth != reference.depth:
        raise ValueError(f"policy and reference must share tokens and depth, got {policy!r} and {reference!r}")
