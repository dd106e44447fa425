"""Softmax, sampling temperature and the sequence-level power distribution.

Temperature divides logits by T before the softmax, which is the same as raising every
probability to the power 1/T and renormalising: ``softmax(z / T) = p ** (1 / T) / sum(p ** (1 / T))``
with ``p = softmax(z)``. Applied to each next-token distribution of a toy model separately it gives
``token_temperature``; applied to whole responses it gives the power distribution
``p_T(y) ∝ pi_ref(y) ** (1 / T)``. The two differ (Exercise 11.7): the power distribution looks ahead.

Everything here works in log space, so tiny temperatures do not overflow and a token (or response)
with probability 0 keeps probability exactly 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lmpolicy.exact.kl import kl
from lmpolicy.exact.numeric import check_distribution, check_positive, check_positive_grid, log_of, logsumexp
from lmpolicy.exact.toy import Reference, ToyLM

_TEMPERATURE_MEANING = "T -> 0 is greedy, T = 1 leaves the distribution unchanged"


def log_softmax(logits, temperature: float = 1.0, axis: int = -1) -> np.ndarray:
    """log softmax(logits / temperature) along ``axis``; ``-inf`` logits give ``-inf``.

    Raises ValueError if ``temperature`` is not a finite number > 0.
    """
    temperature = check_positive(temperature, "temperature", _TEMPERATURE_MEANING)
    scaled = np.asarray(logits, dtype=float) / temperature
    return scaled - np.expand_dims(logsumexp(scaled, axis=axis), axis)


def softmax(logits, temperature: float = 1.0, axis: int = -1) -> np.ndarray:
    """softmax(logits / temperature) along ``axis``: probabilities that sum to 1.

    Stable for large logits and small temperatures (it subtracts the maximum first); a logit of
    ``-inf`` gives probability exactly 0. ``softmax([2, 1, 0])`` is about ``(0.665, 0.245, 0.090)``.
    Raises ValueError if ``temperature`` is not a finite number > 0 (greedy decoding, T = 0, is
    an argmax, not a softmax).
    """
    return np.exp(log_softmax(logits, temperature, axis))


def token_temperature(toy: ToyLM, temperature: float) -> ToyLM:
    """The toy model sampled at temperature T, as a new ToyLM.

    Every next-token distribution is raised to the power 1/T and renormalised separately (what a
    sampler does token by token). Zero-probability tokens stay at exactly 0.
    """
    temperature = check_positive(temperature, "temperature", _TEMPERATURE_MEANING)
    return toy.with_tables([np.exp(log_softmax(log_of(table), temperature)) for table in toy.tables])


def power_distribution(reference: Reference, temperature: float) -> np.ndarray:
    """The sequence-level power distribution p_T(y) ∝ pi_ref(y) ** (1/T), a 1-D array.

    ``reference`` is a ToyLM (then the result is over its ``responses``) or a 1-D probability
    vector. Responses with pi_ref(y) = 0 keep probability 0. p_T equals the tilted optimum with
    reward ``log pi_ref`` and beta = T / (1 - T) for T < 1 (Exercise 11.7).
    """
    probs = check_distribution(reference, "the reference distribution")
    return np.exp(log_softmax(log_of(probs), temperature))


@dataclass(frozen=True)
class TemperatureCurve:
    """The reference model at a grid of temperatures, as points on the reward-KL plane.

    All arrays have one row/entry per temperature, in the order given.

    temperatures : (K,) the temperatures T
    probs : (K, N) the response distribution at each T (responses in ``toy.responses`` order)
    expected_reward : (K,) E[r] under that distribution
    kl : (K,) KL(p_T || pi_ref) in nats
    level : "token" (each next-token distribution tempered) or "sequence" (power distribution)
    """

    temperatures: np.ndarray
    probs: np.ndarray
    expected_reward: np.ndarray
    kl: np.ndarray
    level: str


def temperature_curve(toy: ToyLM, rewards, temperatures, *, level: str = "token") -> TemperatureCurve:
    """Expected reward and KL from pi_ref of the toy model sampled at each temperature.

    ``rewards``: a mapping from response name to reward, or an array in ``toy.responses`` order.
    ``level="token"`` tempers each next-token distribution (``token_temperature``, what a sampler
    does); ``level="sequence"`` uses the power distribution p_T ∝ pi_ref ** (1/T). Every T must be
    finite and > 0.
    """
    if level not in ("token", "sequence"):
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    rewards = toy.response_values(rewards)
    temperatures = check_positive_grid(temperatures, "temperature", _TEMPERATURE_MEANING)
    if level == "token":
        probs = np.stack([token_temperature(toy, t).response_probs() for t in temperatures])
    else:
        probs = np.exp(log_softmax(toy.response_log_probs()[None, :] / temperatures[:, None]))
    return TemperatureCurve(temperatures=temperatures, probs=probs, expected_reward=probs @ rewards,
                            kl=np.atleast_1d(kl(probs, toy.response_probs())), level=level)
