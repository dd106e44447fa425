"""Notebook 08's checks (lmpolicy.exercises.nb08) never fail a right answer, whatever rewards the hidden tests draw."""
import itertools

import pytest
import torch

from lmpolicy.exercises.nb08 import check_baseline
from lmpolicy.notebook import checks
from lmpolicy.tinylm.reinforce import leave_one_out_baseline


def test_the_right_baseline_passes_for_every_binary_reward_of_five_prompts_with_two_answers():
    """The hidden test draws 0/1 rewards of shape (P, K) from the submission's seed. With two answers, the right
    baseline of all-equal columns is also a multiple of the other prompts' sums (all ones: 1 = (5 - 1) / 4), and the
    check said "averages over the other prompts" to the reference (a CI run drew such a matrix)."""
    failed = []
    for bits in itertools.product((0.0, 1.0), repeat=10):
        rewards = torch.tensor(bits).reshape(5, 2)
        try:
            check_baseline(leave_one_out_baseline, rewards)
        except checks.CheckFailed as error:
            failed.append((bits, str(error)[:120]))
    assert failed == []


def test_a_baseline_averaged_over_the_other_prompts_is_still_named():
    rewards = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])

    def over_prompts(r):
        return (r.sum(dim=0, keepdim=True) - r) / (r.shape[0] - 1)

    with pytest.raises(checks.CheckFailed, match="averages over the other prompts"):
        check_baseline(over_prompts, rewards)
