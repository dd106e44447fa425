"""The toy models of the chapter's two demos, as data.

Tilting demo: three two-token toy language models with rewards, in ``SCENARIOS`` (ordered as in
the demo's menu) and ``get_scenario(name)``:

- ``"worked"``: the worked example from the text (tokens a, b);
- ``"likely"``: the likeliest answers are also the best ones, so lowering the temperature helps;
- ``"blind_spot"``: the reward model scores the rare response "cc" 1.6 where its true reward is 0.

KL-estimator demo: an eight-token reference ``KL_DEMO_REF_PROBS`` and the policy
``kl_demo_policy(x)`` ∝ pi_ref ** (1 - x) for a slider position x in [-1, 1] (x > 0 flatter than
pi_ref, x < 0 sharper).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lmpolicy.exact.temperature import power_distribution
from lmpolicy.exact.toy import ToyLM


@dataclass(frozen=True)
class Scenario:
    """One toy model of the tilting demo.

    name : short key, e.g. ``"worked"``
    title : what the demo's menu shows, with the vocabulary (every response is two tokens long)
    model : the reference ToyLM pi_ref
    rewards : (N,) the reward being optimised (the reward model), in ``model.responses`` order
    true_rewards : (N,) what we actually want; the same array as ``rewards`` except in
        ``"blind_spot"``
    """

    name: str
    title: str
    model: ToyLM
    rewards: np.ndarray
    true_rewards: np.ndarray

    @property
    def has_blind_spot(self) -> bool:
        """True when the optimised reward differs from the true reward somewhere."""
        return not np.array_equal(self.rewards, self.true_rewards)


def _scenario(name: str, title: str, tokens: str, first, after: dict, rewards: dict,
              true_rewards: dict | None = None) -> Scenario:
    model = ToyLM(tuple(tokens), [first, [after[token] for token in tokens]])
    reward_array = model.response_values(rewards, "rewards")
    true_array = reward_array if true_rewards is None else model.response_values(true_rewards, "true rewards")
    for array in (reward_array, true_array):
        array.setflags(write=False)
    return Scenario(name=name, title=title, model=model, rewards=reward_array, true_rewards=true_array)


_BLIND_SPOT_REWARDS = {"aa": 0.2, "ab": 0.2, "ac": 0.2, "ba": 0.4, "bb": 1.0, "bc": 0.4,
                       "ca": 0.7, "cb": 0.7, "cc": 1.6}

SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        _scenario("worked", "Worked example from the text (vocabulary a, b)", "ab",
                  first=(0.7, 0.3), after={"a": (0.6, 0.4), "b": (0.5, 0.5)},
                  rewards={"aa": 0.0, "ab": 1.0, "ba": 0.0, "bb": 2.0}),
        _scenario("likely", "Likely answers are good answers (vocabulary a, b, c)", "abc",
                  first=(0.6, 0.3, 0.1),
                  after={"a": (0.6, 0.3, 0.1), "b": (0.7, 0.2, 0.1), "c": (0.5, 0.3, 0.2)},
                  rewards={"aa": 0.8, "ab": 0.3, "ac": 0.0, "ba": 1.0, "bb": 0.3, "bc": 0.0,
                           "ca": 0.5, "cb": 0.2, "cc": 0.0}),
        _scenario("blind_spot", "Reward model with a blind spot (vocabulary a, b, c)", "abc",
                  first=(0.5, 0.4, 0.1),
                  after={"a": (0.5, 0.3, 0.2), "b": (0.2, 0.6, 0.2), "c": (0.4, 0.4, 0.2)},
                  rewards=_BLIND_SPOT_REWARDS, true_rewards={**_BLIND_SPOT_REWARDS, "cc": 0.0}),
    )
}


def get_scenario(name: str) -> Scenario:
    """The scenario called ``name`` ("worked", "likely" or "blind_spot"); ValueError lists the valid names."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; choose one of {', '.join(map(repr, SCENARIOS))}")
    return SCENARIOS[name]


KL_DEMO_TOKENS = 8
KL_DEMO_REF_PROBS = np.array([0.62, 0.18, 0.09, 0.05, 0.02, 0.02, 0.01, 0.01])
KL_DEMO_REF_PROBS.setflags(write=False)
KL_DEMO_X_RANGE = (-1.0, 1.0)
KL_DEMO_DEFAULT_X = 0.2


def kl_demo_policy(x: float) -> np.ndarray:
    """pi_theta ∝ pi_ref ** alpha with alpha = 1 - x, for the KL demo's slider position x in [-1, 1].

    x = 0 gives pi_ref itself, x = 1 the uniform distribution (alpha = 0), x = -1 the square of
    pi_ref renormalised (alpha = 2, much sharper). Raises ValueError outside [-1, 1].
    """
    low, high = KL_DEMO_X_RANGE
    if not np.isfinite(x) or not low <= x <= high:
        raise ValueError(f"x must be between {low} and {high} (the slider's range), got {x!r}")
    if x == 1.0:
        return np.full(KL_DEMO_TOKENS, 1.0 / KL_DEMO_TOKENS)
    return kl_demo_policy_for(KL_DEMO_REF_PROBS, x)


def kl_demo_policy_for(ref_probs, x: float) -> np.ndarray:
    """pi_theta ∝ pi_ref ** (1 - x) for any reference (the KL demo's slider, x in [-1, 1))."""
    return power_distribution(np.asarray(ref_probs, dtype=float), 1.0 / (1.0 - x))
