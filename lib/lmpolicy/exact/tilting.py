"""The KL-regularised objective and its optimum, the tilted reference.

For one prompt, J(pi) = E_pi[r] - beta * KL(pi || pi_ref) is maximised by

    pi*(y) = pi_ref(y) * exp(r(y) / beta) / Z,      Z = sum_y pi_ref(y) * exp(r(y) / beta),

and J(pi*) = beta * log Z. Token by token, pi* tilts each next-token distribution by the soft value
of where the token leads: with V(y) = r(y) at a full response and

    V(s) = beta * log sum_a pi_ref(a | s) * exp(V(s a) / beta)

at a prefix s, the token-level optimum is pi*(a | s) = pi_ref(a | s) * exp((V(s a) - V(s)) / beta),
and V at the empty prefix is beta * log Z. Everything is computed in log space (stable for beta
down to 1e-3 and below); a response with pi_ref(y) = 0 keeps pi*(y) = 0 exactly.

Inputs: a ``reference`` is a ``ToyLM`` or a 1-D probability vector over responses; ``rewards`` is a
mapping from response name to reward (ToyLM only) or an array in the same response order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lmpolicy.exact.kl import kl
from lmpolicy.exact.numeric import (check_distribution, check_positive, check_positive_grid,
                                    distribution_and_values, log_of, logsumexp)
from lmpolicy.exact.toy import Reference, ToyLM

_BETA_MEANING = ("it is the KL coefficient: large beta stays near pi_ref, small beta chases reward; "
                 "beta = 0 has no tilted optimum")


def check_beta(beta) -> float:
    """``beta`` as a float, or ValueError unless it is a finite number > 0."""
    return check_positive(beta, "beta", _BETA_MEANING)


@dataclass(frozen=True)
class TiltedOptimum:
    """The optimum pi* of E[r] - beta KL(pi || pi_ref) at one beta, over all responses.

    beta : float
    probs : (N,) pi*(y), in the reference's response order (exactly 0 where pi_ref(y) = 0)
    log_probs : (N,) log pi*(y) (``-inf`` where pi_ref(y) = 0)
    log_partition : float, log Z
    expected_reward : float, E_{pi*}[r]
    kl : float, KL(pi* || pi_ref) in nats
    """

    beta: float
    probs: np.ndarray
    log_probs: np.ndarray
    log_partition: float
    expected_reward: float
    kl: float

    @property
    def partition(self) -> float:
        """Z itself (``inf`` when it overflows, e.g. for tiny beta; use ``log_partition``)."""
        with np.errstate(over="ignore"):
            return float(np.exp(self.log_partition))

    @property
    def beta_log_partition(self) -> float:
        """beta * log Z: the soft value of the empty prefix and the best objective J(pi*)."""
        return self.beta * self.log_partition

    @property
    def objective(self) -> float:
        """J(pi*) = E[r] - beta * KL, computed from its two parts (equals ``beta_log_partition``)."""
        return self.expected_reward - self.beta * self.kl


@dataclass(frozen=True)
class Frontier:
    """pi* at a grid of betas: the reward-KL frontier. Arrays have one row/entry per beta.

    betas : (B,)
    probs : (B, N) pi* at each beta
    log_probs : (B, N) log pi* (``-inf`` where pi_ref(y) = 0)
    expected_reward : (B,) E_{pi*}[r]
    kl : (B,) KL(pi* || pi_ref)
    beta_log_partition : (B,) beta * log Z = J(pi*)
    """

    betas: np.ndarray
    probs: np.ndarray
    log_probs: np.ndarray
    expected_reward: np.ndarray
    kl: np.ndarray
    beta_log_partition: np.ndarray

    @property
    def objective(self) -> np.ndarray:
        """J(pi*) = E[r] - beta * KL at each beta."""
        return self.expected_reward - self.betas * self.kl


def frontier(reference: Reference, rewards, betas) -> Frontier:
    """The tilted optimum at every beta of ``betas`` (any 1-D list of finite numbers > 0), vectorised.

    ``frontier.probs @ other_rewards`` gives the expected value of any other per-response score
    (e.g. a true reward) along the frontier.
    """
    ref_probs, rewards = distribution_and_values(reference, rewards)
    betas = check_positive_grid(betas, "beta", _BETA_MEANING)
    log_weights = log_of(ref_probs)[None, :] + rewards[None, :] / betas[:, None]
    log_partition = logsumexp(log_weights)
    log_probs = log_weights - log_partition[:, None]
    probs = np.exp(log_probs)
    return Frontier(betas=betas, probs=probs, log_probs=log_probs, expected_reward=probs @ rewards,
                    kl=np.atleast_1d(kl(probs, ref_probs)), beta_log_partition=betas * log_partition)


def tilted_optimum(reference: Reference, rewards, beta: float) -> TiltedOptimum:
    """pi* = pi_ref exp(r / beta) / Z over all responses, with its reward, KL and log Z.

    Worked example at beta = 1: Z = 2.439, pi* = (0.172, 0.312, 0.0615, 0.454) for aa, ab, ba, bb,
    E[r] = 1.221, KL = 0.329, J = beta log Z = 0.892. Raises ValueError unless beta is finite and > 0.
    """
    beta = check_beta(beta)
    one = frontier(reference, rewards, [beta])
    return TiltedOptimum(beta=beta, probs=one.probs[0], log_probs=one.log_probs[0],
                         log_partition=float(one.beta_log_partition[0] / beta),
                         expected_reward=float(one.expected_reward[0]), kl=float(one.kl[0]))


def expected_reward(policy: Reference, rewards) -> float:
    """E_pi[r] for a ToyLM (``rewards`` may be a mapping by response name) or a probability vector."""
    probs, rewards = distribution_and_values(policy, rewards)
    return float(probs @ rewards)


def kl_objective(policy: Reference, reference: Reference, rewards, beta: float) -> float:
    """J(pi) = E_pi[r] - beta * KL(pi || pi_ref) for any policy over the same responses.

    ``policy`` and ``reference`` are ToyLMs or probability vectors in the same response order.
    Returns ``-inf`` if the policy puts mass where pi_ref has none. For the worked example at
    beta = 1: J(pi_ref) = 0.58, J(always "bb") = 2 - 1.897 = 0.103, J(pi*) = 0.892.
    """
    beta = check_beta(beta)
    ref_probs, rewards = distribution_and_values(reference, rewards)
    probs = check_distribution(policy, "the policy")
    if probs.shape != ref_probs.shape:
        raise ValueError(f"the policy and the reference must be over the same responses, got "
                         f"{probs.size} and {ref_probs.size} probabilities")
    divergence = kl(probs, ref_probs)
    if np.isinf(divergence):
        return -np.inf
    return float(probs @ rewards) - beta * divergence


def soft_values(toy: ToyLM, rewards, beta: float) -> tuple[np.ndarray, ...]:
    """Soft values V(s) of every prefix, by backward recursion from V(y) = r(y).

    Returns ``values`` with ``values[d]`` of shape ``(V,) * d`` for ``d = 0 .. depth``:
    ``values[0]`` (shape ``()``) is beta * log Z, ``values[depth]`` the rewards, and
    ``values[len(s)][toy.prefix_index(s)]`` the value of prefix ``s``. Worked example, beta = 1:
    V(a) = 0.523, V(b) = 1.434.
    """
    beta = check_beta(beta)
    rewards = toy.response_values(rewards)
    values = [rewards.reshape((toy.vocab_size,) * toy.depth)]
    for table in reversed(toy.tables):
        values.append(beta * logsumexp(log_of(table) + values[-1] / beta))
    return tuple(reversed(values))


def token_level_optimum(toy: ToyLM, rewards, beta: float) -> ToyLM:
    """The next-token tables of pi*, as a ToyLM: pi*(a | s) = pi_ref(a | s) exp((V(s a) - V(s)) / beta).

    The product of its tables along a response equals the sequence-level ``tilted_optimum`` (to
    rounding error). Worked example, beta = 1: pi*(a) = 0.484, pi*(b | a) = 0.644, pi*(b | b) = 0.881.
    """
    values = soft_values(toy, rewards, beta)
    beta = check_beta(beta)
    return toy.with_tables([np.exp(log_of(table) + (values[d + 1] - values[d][..., None]) / beta)
                            for d, table in enumerate(toy.tables)])
