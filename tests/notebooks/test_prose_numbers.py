"""The numbers the notebooks' prose states agree with what the library computes.

Each row of ``PROSE_NUMBERS`` is one sentence fragment of a source notebook's markdown, written with ``{}`` where
a computed number goes, and a function that computes those numbers, formatted as the prose prints them. The test
fills the numbers in and looks for the result in the notebook's markdown (whitespace-insensitive, so a line
break inside the phrase does not matter). A row for another notebook is one more entry in the table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from lmpolicy.demos.tilting import TiltingDemo
from lmpolicy.exact.kl import chain_rule_kl, estimator_moments
from lmpolicy.exact.scenarios import KL_DEMO_REF_PROBS, get_scenario, kl_demo_policy
from lmpolicy.exact.tilting import kl_objective, soft_values, tilted_optimum, token_level_optimum

from .notebook_tools import SOURCE_DIR, read


@dataclass(frozen=True)
class ProseNumber:
    notebook: str
    phrase: str  # as in the markdown, with {} for each computed number
    compute: Callable[[], tuple[str, ...]]  # the numbers, formatted as the phrase prints them

    @property
    def label(self) -> str:
        return f"{self.notebook}: {self.phrase[:60]}"


def fixed(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


# -- the scenarios the prose talks about --------------------------------------------------------------------------

WORKED, BLIND_SPOT = get_scenario("worked"), get_scenario("blind_spot")


def worked_optimum(beta: float):
    return tilted_optimum(WORKED.model, WORKED.rewards, beta)


def response_prob(beta: float, response: str) -> float:
    return float(worked_optimum(beta).probs[WORKED.model.response_index(response)])


def reference_prob(response: str) -> float:
    return float(WORKED.model.response_probs()[WORKED.model.response_index(response)])


def worked_objective(policy_probs) -> float:
    return kl_objective(policy_probs, WORKED.model, WORKED.rewards, 1.0)


def worked_soft_value(beta: float, first_token: str) -> float:
    return float(soft_values(WORKED.model, WORKED.rewards, beta)[1][WORKED.model.prefix_index(first_token)])


def blind_spot_true_reward_peak() -> float:
    """The beta of the demo's slider grid where the dashed curve (true reward of pi*) is highest."""
    demo = TiltingDemo(scenario="blind_spot")
    return float(demo.frontier.betas[np.argmax(demo.frontier_true_reward)])


def blind_spot_reward(response: str, *, true: bool) -> float:
    rewards = BLIND_SPOT.true_rewards if true else BLIND_SPOT.rewards
    return float(rewards[BLIND_SPOT.model.response_index(response)])


def worked_chain_rule():
    return chain_rule_kl(token_level_optimum(WORKED.model, WORKED.rewards, 1.0), WORKED.model)


def collapsed_response(beta: float) -> str:
    """The response pi* puts all its mass on (to three decimals), or its largest probability if none is 1.000."""
    probs = worked_optimum(beta).probs
    best = int(np.argmax(probs))
    return WORKED.model.responses[best] if fixed(probs[best], 3) == "1.000" else fixed(probs[best], 3)


def k2_relative_bias() -> float:
    moments = estimator_moments([0.6, 0.3, 0.1], [0.4, 0.4, 0.2])  # the chapter's three-token example
    return 1 - moments.mean["k2"] / moments.kl


def forward_kl_terms_of_the_sharpest_demo_policy() -> np.ndarray:
    sharpest = kl_demo_policy(-1.0)
    return KL_DEMO_REF_PROBS * np.log(KL_DEMO_REF_PROBS / sharpest)


NB05, NB06 = "05_tilted_optimum", "06_kl_estimators"

PROSE_NUMBERS = [
    # 05, section 2: the worked example at beta = 1 and the chapter's rounding slip on pi*(ba)
    ProseNumber(NB05, "The chapter prints $\\pi^*(ba) = 0.062$; the exact value is ${}$ ({})",
                lambda: (fixed(response_prob(1.0, "ba"), 4), fixed(response_prob(1.0, "ba"), 5))),
    ProseNumber(NB05, "$Z = {}$, $J(\\pi^*) = {} = \\ln Z$",
                lambda: (fixed(worked_optimum(1.0).partition, 3), fixed(worked_optimum(1.0).objective, 3))),
    ProseNumber(NB05, "copying the reference ({}) or always answering \"bb\" ({})",
                lambda: (fixed(worked_objective(WORKED.model.response_probs()), 2),
                         fixed(worked_objective([0, 0, 0, 1.0]), 3))),
    ProseNumber(NB05, "$\\ln(1/0.15) = {}$ nats", lambda: (fixed(-np.log(reference_prob("bb")), 3),)),
    # 05, section 4: the first-token marginal of pi*
    ProseNumber(NB05, "$\\pi^*(a) = {} + {} = {}$, down from the reference's {}",
                lambda: (fixed(response_prob(1.0, "aa"), 3), fixed(response_prob(1.0, "ab"), 3),
                         fixed(response_prob(1.0, "aa") + response_prob(1.0, "ab"), 3),
                         f"{WORKED.model.tables[0][0]:g}")),
    # 05, after 11.5(b): the chapter's slip on V(b) at beta = 0.5, and what the demo's tree shows
    ProseNumber(NB05, "$0.5 \\ln(0.5 + 0.5 e^4) = {}$, which rounds to {}",
                lambda: (fixed(worked_soft_value(0.5, "b"), 5), fixed(worked_soft_value(0.5, "b"), 3))),
    ProseNumber(NB05, "its tree shows soft values to two decimals, $V(b) = {}$",
                lambda: (fixed(TiltingDemo(beta=0.5).token_view()["b"]["soft_value"], 2),)),
    # 05, section 8: the posterior view
    ProseNumber(NB05, "The odds stay at the reference's ${} / {} = {}$",
                lambda: (fixed(reference_prob("aa"), 2), fixed(reference_prob("ba"), 2),
                         fixed(response_prob(0.05, "aa") / response_prob(0.05, "ba"), 1))),
    ProseNumber(NB05, "at $\\beta = 0.05$ the posterior is, to three decimals, the single response \"{}\"",
                lambda: (collapsed_response(0.05),)),
    # 05, section 9: the demo's "What to try" step (4)
    ProseNumber(NB05, "the rare \"cc\", which it scores {} where the true reward is {}",
                lambda: (f"{blind_spot_reward('cc', true=False):g}", f"{blind_spot_reward('cc', true=True):g}")),
    ProseNumber(NB05, "It starts near the reference's {} and rises",
                lambda: (fixed(BLIND_SPOT.model.response_probs() @ BLIND_SPOT.true_rewards, 2),)),
    ProseNumber(NB05, "it peaks near $\\beta \\approx {}$", lambda: (fixed(blind_spot_true_reward_peak(), 1),)),
    # 06, section 1: the chain rule on the worked example
    ProseNumber(NB06, "The chapter's ${} + {} + {} = {}$",
                lambda: (fixed(worked_chain_rule().per_depth[0], 3), fixed(worked_chain_rule().weighted[1][0], 3),
                         fixed(worked_chain_rule().weighted[1][1], 3), fixed(worked_chain_rule().total, 3))),
    # 06, section 2: k2's bias on the chapter's three-token example
    ProseNumber(NB06, "$k_2$ is about {}% low", lambda: (f"{100 * k2_relative_bias():.0f}",)),
    # 06, section 5: forward against reverse KL far from the reference; the sequential pitfall
    ProseNumber(NB06, "bills them {} nats, more than its whole value of {}",
                lambda: (fixed(forward_kl_terms_of_the_sharpest_demo_policy()[1:].sum(), 2),
                         fixed(forward_kl_terms_of_the_sharpest_demo_policy().sum(), 2))),
    ProseNumber(NB06, "({} nats after $b$, {} after $a$, section 1)",
                lambda: (fixed(worked_chain_rule().per_prefix[1][1], 3), fixed(worked_chain_rule().per_prefix[1][0], 3))),
]


def markdown_text(notebook: str) -> str:
    cells = read(SOURCE_DIR / f"{notebook}.ipynb").cells
    return " ".join(" ".join(cell.source.split()) for cell in cells if cell.cell_type == "markdown")


@pytest.mark.parametrize("row", PROSE_NUMBERS, ids=[row.label for row in PROSE_NUMBERS])
def test_the_prose_states_what_the_library_computes(row):
    text = markdown_text(row.notebook)
    numbers = row.compute()
    expected = " ".join(row.phrase.format(*numbers).split())
    if expected in text:
        return
    # Say whether the phrase is there with other numbers (the prose is wrong) or gone (update the table).
    found = re.search(r"\S*?".join(re.escape(part) for part in " ".join(row.phrase.split()).split("{}")), text)
    if found:
        pytest.fail(f"{row.notebook}: the prose says {found.group(0)!r}, the library computes {expected!r}")
    pytest.fail(f"{row.notebook}: no markdown cell says {row.phrase!r} any more: update PROSE_NUMBERS")


def test_resetting_the_reference_k_times_is_one_tilt_at_beta_over_k():
    """Notebook 05, section 8: K exact stages at beta, each against the last one's optimum, give pi* at beta / K."""
    policy = WORKED.model.response_probs()
    for _ in range(3):
        policy = tilted_optimum(policy, WORKED.rewards, 1.5).probs
    np.testing.assert_allclose(policy, tilted_optimum(WORKED.model, WORKED.rewards, 0.5).probs, atol=1e-12)
