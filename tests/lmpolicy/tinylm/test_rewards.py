import math

import pytest
import torch
import torch.nn as nn

from tinylm_helpers import sharpened_tinylm

from lmpolicy.tinylm.evaluate import classify_answer, correct_answer_probability, evaluate_model
from lmpolicy.tinylm.rewards import verifier_reward
from lmpolicy.tinylm.tokenizer import (EOS, PAD, PLUS, PROMPT_LEN, RESPONSE_LEN, VOCAB_SIZE, decode_prompt, encode_prompts,
                               parse_answer)

E, P = EOS, PAD


def row(*tokens):
    return torch.tensor(list(tokens) + [P] * (RESPONSE_LEN - len(tokens)))


@pytest.mark.parametrize(
    "response, correct, expected",
    [
        (row(8, 5, E), 85, "correct"),
        (row(8, 6, E), 85, "one_digit_off"),
        (row(9, 5, E), 85, "one_digit_off"),
        (row(7, 6, E), 85, "other_wrong"),  # two digits differ
        (row(8, E), 85, "other_wrong"),  # a digit short
        (row(8, 5, 0, E), 85, "other_wrong"),  # a digit too many
        (row(0, 8, 5, E), 85, "other_wrong"),  # a leading zero is not how 85 is written
        (row(1, 0, 1, E), 100, "one_digit_off"),
        (row(2, 0, 0, E), 100, "one_digit_off"),
        (row(9, 9, E), 100, "other_wrong"),
        (row(6, E), 7, "one_digit_off"),
        (row(7, E), 7, "correct"),
        (row(8, 5), 85, "malformed"),  # never wrote <eos>
        (row(1, 8, 5, 0), 185, "malformed"),  # ran out of budget
        (row(E), 85, "malformed"),  # empty answer
        (row(8, PLUS, E), 85, "malformed"),
        (row(8, P, 5, E), 85, "malformed"),
    ],
)
def test_classify_answer(response, correct, expected):
    assert classify_answer(response, correct) == expected


def test_verifier_reward_reads_the_sum_from_the_prompt():
    prompts = encode_prompts([(37, 48), (37, 48), (3, 4), (3, 4), (99, 99), (0, 0), (50, 50)])
    responses = torch.stack([row(8, 5, E), row(8, 6, E), row(7, E), row(0, 7, E), row(1, 9, 8, E), row(0, E),
                             row(1, 0, 0)])
    rewards = verifier_reward(prompts, responses)
    assert rewards.dtype == torch.float32
    assert rewards.tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]


def test_verifier_reward_rejects_mismatched_batches():
    with pytest.raises(ValueError, match="same B"):
        verifier_reward(encode_prompts([(1, 2)]), torch.stack([row(3, E), row(3, E)]))


class PlannedLM(nn.Module):
    """A stand-in policy: for each problem a planned 4-token response; at every response step it gives
    the planned token probability ``p_plan`` and spreads the rest evenly. Works with and without a cache."""

    def __init__(self, plans: dict, p_plan: float = 0.9):
        super().__init__()
        self.plans, self.p_plan = plans, p_plan
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, ids, cache=None):
        if cache is not None:
            full = ids if cache.length == 0 else torch.cat([cache.history, ids], dim=1)
            cache.history, cache.key_is_real = full, full != PAD
        else:
            full = ids
        first = full.shape[1] - ids.shape[1]
        p_other = (1 - self.p_plan) / (VOCAB_SIZE - 1)
        logits = torch.full((*ids.shape, VOCAB_SIZE), math.log(p_other))
        for b in range(ids.shape[0]):
            plan = self.plans[decode_prompt(full[b, :PROMPT_LEN])]
            for t in range(ids.shape[1]):
                j = first + t - (PROMPT_LEN - 1)  # this column predicts response token j
                if 0 <= j < RESPONSE_LEN:
                    logits[b, t, plan[j]] = math.log(self.p_plan)
        return logits


def test_evaluate_model_on_a_policy_with_known_answers():
    problems = [(37, 48), (3, 4), (50, 50), (12, 13), (9, 9), (60, 1)]
    plans = {
        (37, 48): [8, 5, E, P],  # correct
        (3, 4): [7, E, P, P],  # correct
        (50, 50): [1, 0, 1, E],  # one digit off
        (12, 13): [2, 6, E, P],  # one digit off
        (9, 9): [1, 9, P, P],  # malformed: no <eos>
        (60, 1): [1, 6, E, P],  # other wrong
    }
    model = PlannedLM(plans)
    result = evaluate_model(model, problems, samples_per_problem=500, seed=0)
    assert result.n_problems == 6
    assert result.greedy_accuracy == pytest.approx(2 / 6)
    assert result.n_greedy_wrong == 4
    assert result.n_one_digit_off == 2 and result.n_malformed == 1
    assert result.one_digit_off_share == pytest.approx(2 / 4)

    # exact: product over the correct response's tokens (eos included) of 0.9 or 0.1/14
    p_other = 0.1 / 14
    expected = []
    for a, b in problems:
        correct = [int(c) for c in str(a + b)] + [E]
        expected.append(math.prod(0.9 if plans[a, b][j] == tok else p_other for j, tok in enumerate(correct)))
    torch.testing.assert_close(correct_answer_probability(model, problems), torch.tensor(expected))
    assert result.expected_sampled_accuracy == pytest.approx(sum(expected) / 6, abs=1e-6)
    # empirical, 3,000 samples: within 4 standard errors of the exact rate
    se = math.sqrt(result.expected_sampled_accuracy * (1 - result.expected_sampled_accuracy) / 3000)
    assert abs(result.sampled_accuracy - result.expected_sampled_accuracy) < 4 * se


def test_correct_answer_probability_against_unpadded_step_by_step_products():
    model = sharpened_tinylm(seed=0, scale=5.0)
    problems = [(3, 4), (37, 48), (99, 99), (0, 5)]
    expected = []
    for a, b in problems:
        ids = encode_prompts([(a, b)])
        ids = ids[ids != PAD][None]  # no padding at all
        prob = 1.0
        for tok in [int(c) for c in str(a + b)] + [E]:
            prob *= model(ids)[0, -1].double().softmax(-1)[tok].item()
            ids = torch.cat([ids, torch.tensor([[tok]])], dim=1)
        expected.append(prob)
    torch.testing.assert_close(correct_answer_probability(model, problems).double(), torch.tensor(expected, dtype=torch.float64),
                               rtol=1e-4, atol=1e-12)


# --- the vectorised verifier against parse_answer, row by row -------------------------------------------

def random_response_rows(problems, gen):
    """Responses of every kind for the given problems: random tokens, right answers, right answers with junk
    after <eos>, leading zeros, a digit too many or too few, and right digits with no <eos>."""
    rows = []
    for i, (a, b) in enumerate(problems):
        digits = [int(c) for c in str(a + b)]
        junk = torch.randint(VOCAB_SIZE, (RESPONSE_LEN,), generator=gen).tolist()
        kind = i % 8
        if kind <= 1:
            tokens = junk  # anything at all
        elif kind == 2:
            tokens = digits + [E]
        elif kind == 3:
            tokens = (digits + [E] + junk)[:RESPONSE_LEN]  # whatever follows <eos> does not count
        elif kind == 4:
            tokens = ([0] + digits + [E] + junk)[:RESPONSE_LEN]  # 0 8 5 <eos>; a 3-digit sum loses its <eos>
        elif kind == 5:
            tokens = (digits + junk)[:RESPONSE_LEN]  # often no <eos> at all
        elif kind == 6:
            tokens = (digits[:-1] + [E] + junk)[:RESPONSE_LEN] if len(digits) > 1 else [E] + junk[:3]
        else:
            tokens = (digits + [torch.randint(10, (1,), generator=gen).item(), E] + junk)[:RESPONSE_LEN]
        rows.append(tokens + [P] * (RESPONSE_LEN - len(tokens)))
    return torch.tensor(rows)


def test_verifier_reward_agrees_with_parse_answer_on_thousands_of_random_rows():
    gen = torch.Generator().manual_seed(0)
    problems = [tuple(x) for x in torch.randint(100, (4000, 2), generator=gen).tolist()]
    problems[:20] = [(0, 0), (99, 99), (50, 50), (9, 1), (0, 7)] * 4
    responses = random_response_rows(problems, gen)
    got = verifier_reward(encode_prompts(problems), responses)
    expected = torch.tensor([float(parse_answer(r) == str(a + b)) for r, (a, b) in zip(responses, problems)])
    assert got.shape == (4000,) and got.dtype == torch.float32
    assert torch.equal(got, expected)
    assert 0.2 < expected.mean() < 0.6  # the test has both right and wrong rows, of several kinds


def test_verifier_reward_agrees_with_parse_answer_on_every_response_to_a_few_problems():
    problems = [(3, 4), (37, 48), (99, 99), (0, 0), (50, 50)]
    every = torch.cartesian_prod(*[torch.tensor([0, 1, 5, 7, 8, 9, PLUS, E, P])] * RESPONSE_LEN)
    for a, b in problems:
        prompts = encode_prompts([(a, b)]).expand(len(every), PROMPT_LEN)
        expected = torch.tensor([float(parse_answer(r) == str(a + b)) for r in every])
        assert torch.equal(verifier_reward(prompts, every), expected)


@pytest.mark.parametrize("columns", [3, 5])
def test_verifier_reward_rejects_responses_with_the_wrong_number_of_columns(columns):
    with pytest.raises(ValueError, match="columns"):
        verifier_reward(encode_prompts([(3, 4)]), torch.full((1, columns), P))
