import math

import pytest
import torch
import torch.nn as nn

from tinylm_helpers import sharpened_tinylm

from lmpolicy.rewards import classify_answer, correct_answer_probability, evaluate_model, verifier_reward
from lmpolicy.tokenizer import EOS, PAD, PLUS, PROMPT_LEN, RESPONSE_LEN, VOCAB_SIZE, decode_prompt, encode_prompts

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
