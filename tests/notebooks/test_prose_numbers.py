"""The numbers the notebooks' prose states agree with what the library computes.

Each row of ``PROSE_NUMBERS`` is one sentence fragment of a source notebook's markdown, written with ``{}`` where
a computed number goes, and a function that computes those numbers, formatted as the prose prints them. The test
fills the numbers in and looks for the result in the notebook's markdown (whitespace-insensitive, so a line
break inside the phrase does not matter). A row for another notebook is one more entry in the table.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import pytest
import torch

from lmpolicy.demos.tilting import TiltingDemo
from lmpolicy.exact.kl import chain_rule_kl, estimator_moments
from lmpolicy.exact.scenarios import KL_DEMO_REF_PROBS, get_scenario, kl_demo_policy
from lmpolicy.exact.tilting import kl_objective, soft_values, tilted_optimum, token_level_optimum
from lmpolicy.exact.temperature import softmax
from lmpolicy.tinylm import problems
from lmpolicy.tinylm.model import load_pretrained
from lmpolicy.tinylm.tokenizer import RESPONSE_LEN, TOKEN_ID, VOCAB_SIZE, encode_prompts

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
    ProseNumber(NB05, "its tree shows soft values to three decimals, $V(b) = {}$",
                lambda: (fixed(TiltingDemo(beta=0.5).token_view()["b"]["soft_value"], 3),)),
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

# -- notebooks 01-04: TinyLM's facts, the worked softmax and the chapter's slips, the toy model's ratios ---------

def worked_softmax(temperature: float = 1.0) -> np.ndarray:
    """The worked example's first-digit policy: logits (2, 1, 0) for "8", "7", "9"."""
    return softmax([2.0, 1.0, 0.0], temperature)


def chapter_logprob_terms() -> list[float]:
    """The chapter's log pi("85<eos>") term by term, from its rounded pi(8) = 0.665."""
    return [math.log(p) for p in (0.665, 0.9, 0.98)]


def top_probability_095_temperature() -> float:
    """The T at which softmax((2, 1, 0) / T) gives the top token 0.95, by bisection on the exact softmax."""
    low, high = 0.05, 1.0
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if worked_softmax(mid)[0] > 0.95 else (low, mid)
    return (low + high) / 2


def kept_mass_top_p_09() -> float:
    """Top-p at 0.9 on the worked example keeps "8" and "7" (the two likeliest); their mass."""
    probs = np.sort(worked_softmax())[::-1]
    kept = (np.cumsum(probs) - probs) < 0.9
    return float(probs[kept].sum())


@lru_cache(maxsize=1)
def shipped_tinylm():
    return load_pretrained()


def tinylm_next_token_prob(problem: tuple[int, int], answer_so_far: str, token: str) -> float:
    """The shipped TinyLM's probability of `token` after the prompt of `problem` and `answer_so_far`."""
    written = torch.tensor([[TOKEN_ID[t] for t in answer_so_far]], dtype=torch.long).reshape(1, -1)
    with torch.no_grad():
        logits = shipped_tinylm()(torch.cat([encode_prompts([problem]), written], dim=1))
    return float(torch.softmax(logits[0, -1].double(), dim=-1)[TOKEN_ID[token]])


def worked_ratio(response: str, position: int | None = None) -> float:
    """pi / pi_ref for the worked example, with pi the token-level optimum at beta = 5 (notebook 04's stand-in
    for an updated policy): of one token of `response`, or of the whole response if `position` is None."""
    updated = token_level_optimum(WORKED.model, WORKED.rewards, 5.0)
    if position is None:
        index = WORKED.model.response_index(response)
        return float(updated.response_probs()[index] / WORKED.model.response_probs()[index])
    prefix, token = response[:position], WORKED.model.tokens.index(response[position])
    return float(updated.next_token_probs(prefix)[token] / WORKED.model.next_token_probs(prefix)[token])


def expected_reward_after_first_token() -> np.ndarray:
    """E_ref[r | y1] for y1 = a, b in the worked example: (0.4, 1.0)."""
    return (WORKED.model.tables[1] * np.asarray(WORKED.rewards).reshape(2, 2)).sum(axis=1)


def bandit_gradient_factors() -> tuple[float, float, float]:
    """dJ/dtheta_b = (E[r | b] - E[r | a]) pi(a) pi(b) at pi_ref: the three factors."""
    after = expected_reward_after_first_token()
    return float(after[1] - after[0]), *(float(p) for p in WORKED.model.tables[0])


def mantissa_and_exponent(value: float) -> tuple[str, str]:
    """1.748e-46 -> ("1.7", "-46"), as the prose writes 1.7 x 10^-46."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return mantissa, str(int(exponent))


NB01, NB02, NB03, NB04 = "01_policy_softmax", "02_temperature", "03_three_stages", "04_two_mdp_views"

PROSE_NUMBERS += [
    # 01, section 1: TinyLM's size and training data; section 2: its vocabulary
    ProseNumber(NB01, "is a transformer with {} parameters",
                lambda: (f"{sum(p.numel() for p in load_pretrained().parameters()):,}",)),
    ProseNumber(NB01, "It was shown {} worked examples like `37+48=85`, drawn at random (with repetition) from {} "
                "training problems",
                lambda: (f"{len(problems.training_examples()):,}", f"{len(problems.training_problems()):,}")),
    ProseNumber(NB01, "TinyLM gets by with the {} printed above", lambda: (str(VOCAB_SIZE),)),
    # 01, sections 2-3: the worked example, and where the chapter's log-prob slips
    ProseNumber(NB01, "The chapter rounds these to ${}$, ${}$ and ${}$",
                lambda: tuple(fixed(p, 3) for p in worked_softmax())),
    ProseNumber(NB01, "To four decimals the log-prob is ${}$; that uses the unrounded $\\pi(8) = {}$",
                lambda: (fixed(math.log(worked_softmax()[0] * 0.9 * 0.98), 4), fixed(worked_softmax()[0], 5))),
    ProseNumber(NB01, "$\\ln(0.665 \\times 0.9 \\times 0.98) = {}$, and the chapter's total, ${}$, is that number "
                "correctly rounded",
                lambda: (fixed(sum(chapter_logprob_terms()), 4), fixed(sum(chapter_logprob_terms()), 3))),
    ProseNumber(NB01, "the three terms it prints, ${} - {} - {}$, add up to ${}$",
                lambda: (fixed(chapter_logprob_terms()[0], 3), fixed(-chapter_logprob_terms()[1], 3),
                         fixed(-chapter_logprob_terms()[2], 3),
                         fixed(sum(round(t, 3) for t in chapter_logprob_terms()), 3))),
    # 01, section 4: the 1,000-token response in float32; after 11.1(a): the share of the surprising token
    ProseNumber(NB01, "$0.9^{{1000}} \\approx {} \\times 10^{{{}}}$",
                lambda: mantissa_and_exponent(0.9 ** 1000)),
    ProseNumber(NB01, "The smallest positive 32-bit float is about ${} \\times 10^{{{}}}$",
                lambda: mantissa_and_exponent(float(np.nextafter(np.float32(0), np.float32(1))))),
    ProseNumber(NB01, "the unlikely second digit supplies about {}% of the total",
                lambda: (f"{100 * math.log(0.08) / math.log(0.665 * 0.08 * 0.97):.0f}",)),
    # 02, section 2: the chapter's temperature table
    ProseNumber(NB02, "({}, {}, {} at $T = 0.5$, and {}, {}, {} at $T = 2$)",
                lambda: tuple(fixed(p, 3) for T in (0.5, 2.0) for p in worked_softmax(T))),
    # 02, section 4: the policy a top-p sampler follows
    ProseNumber(NB02, "the tokens `8` and `7` hold ${}$ of the mass", lambda: (fixed(kept_mass_top_p_09(), 3),)),
    ProseNumber(NB02, "The plain softmax gives `8` probability ${}$; the sampler drew it with probability ${}$",
                lambda: (fixed(worked_softmax()[0], 3), fixed(worked_softmax()[0] / kept_mass_top_p_09(), 3))),
    ProseNumber(NB02, "the same factor here, $1/{} = {}$",
                lambda: (fixed(kept_mass_top_p_09(), 3), fixed(1 / kept_mass_top_p_09(), 3))),
    ProseNumber(NB02, "from a nucleus holding {}% of the mass, the plain log-prob of the response would be too low "
                "by $100 \\times {} = {}$ nats",
                lambda: (f"{100 * kept_mass_top_p_09():.0f}", fixed(-math.log(kept_mass_top_p_09()), 3),
                         fixed(-100 * math.log(kept_mass_top_p_09()), 1))),
    # 02, after 11.2(b): the exact temperature, and the slip in the chapter's check
    ProseNumber(NB02, "for its logits $(2, 1, 0)$ and 0.95 the exact value is $T = {}$. (At exactly $T = 0.334$ "
                "the top probability is about {}, not 0.95.)",
                lambda: (fixed(top_probability_095_temperature(), 5), fixed(worked_softmax(0.334)[0], 5))),
    ProseNumber(NB02, "It is ${}$ (${}$ to four places). The conclusion survives: $1/{} = {}$",
                lambda: (fixed(1 + math.exp(-3) + math.exp(-6), 5), fixed(1 + math.exp(-3) + math.exp(-6), 4),
                         fixed(1 + math.exp(-3) + math.exp(-6), 5), fixed(1 / (1 + math.exp(-3) + math.exp(-6)), 5))),
    # 03, section 4: exposure bias on TinyLM's 2+18=20
    ProseNumber(NB03, "The model itself gets there with probability {}. With probability {} it starts with `1`",
                lambda: (fixed(tinylm_next_token_prob((2, 18), "", "2"), 3),
                         fixed(tinylm_next_token_prob((2, 18), "", "1"), 3))),
    ProseNumber(NB03, "it writes `9` (probability {}) and stops", lambda: (fixed(tinylm_next_token_prob((2, 18), "1", "9"), 3),)),
    # 04, section 1: the number of arms
    ProseNumber(NB04, "there are $(10^5)^{{1000}} = 10^{{{}}}$", lambda: (f"{1000 * math.log10(1e5):.0f}",)),
    ProseNumber(NB04, "{} tokens and a budget of {} give at most ${}^{} = {}$ token strings",
                lambda: (str(VOCAB_SIZE), str(RESPONSE_LEN), str(VOCAB_SIZE), str(RESPONSE_LEN),
                         f"{VOCAB_SIZE ** RESPONSE_LEN:,}".replace(",", "{,}"))),
    # 04, after 11.3(b): the chapter's hand calculation; after 11.3(c): the chain rule's terms
    ProseNumber(NB04, "$\\partial J/\\partial\\theta_b = ({} - {})\\,\\pi(a)\\,\\pi(b) = {} \\times {} \\times {} = {}$",
                lambda: (*(f"{v:.1f}" for v in expected_reward_after_first_token()[::-1]),
                         *(f"{v:.1f}" for v in bandit_gradient_factors()),
                         fixed(np.prod(bandit_gradient_factors()), 3))),
    ProseNumber(NB04, "(first-token KL {}; second-token KLs {} after $a$ and {} after $b$; total {})",
                lambda: (fixed(worked_chain_rule().per_prefix[0], 3), fixed(worked_chain_rule().per_prefix[1][0], 3),
                         fixed(worked_chain_rule().per_prefix[1][1], 3), fixed(worked_chain_rule().total, 3))),
    # 04, section 5: per-token against per-response ratios
    ProseNumber(NB04, "For `bb` both token ratios, {} and {}, lie inside PPO's usual clip range",
                lambda: (fixed(worked_ratio("bb", 0), 3), fixed(worked_ratio("bb", 1), 3))),
    ProseNumber(NB04, "the response's ratio is their product, {}, well outside", lambda: (fixed(worked_ratio("bb"), 3),)),
    ProseNumber(NB04, "the geometric mean of the token ratios ({} for `bb`)",
                lambda: (fixed(worked_ratio("bb") ** 0.5, 3),)),
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
