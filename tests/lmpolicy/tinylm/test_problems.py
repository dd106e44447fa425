from collections import Counter

import pytest

from lmpolicy.tinylm import problems


def test_the_three_sets_are_disjoint_and_cover_every_problem():
    heldout = set(problems.heldout_problems())
    validation = set(problems.validation_problems())
    training = set(problems.training_problems())
    assert len(heldout) == len(problems.heldout_problems()) >= 1_000
    assert len(validation) == 500
    assert not heldout & training and not heldout & validation and not validation & training
    assert heldout | validation | training == {(a, b) for a in range(100) for b in range(100)}


def test_training_examples_never_include_a_heldout_or_validation_problem():
    examples = problems.training_examples()
    assert 20_000 <= len(examples) <= 24_000
    unseen = set(problems.heldout_problems()) | set(problems.validation_problems())
    assert not unseen & set(examples)


def test_the_split_is_fixed_and_the_examples_are_seeded():
    assert problems.heldout_problems() == problems.heldout_problems()
    assert problems.training_examples(seed=3) == problems.training_examples(seed=3)
    assert problems.training_examples(seed=3) != problems.training_examples(seed=4)


def test_heldout_set_is_a_fair_sample():
    """About 19% of all problems have a one-digit operand; the held-out set should be close to that."""
    heldout = problems.heldout_problems()
    share = sum(a < 10 or b < 10 for a, b in heldout) / len(heldout)
    assert abs(share - 0.19) < 0.04
    assert max(Counter(a for a, _ in heldout).values()) < 25


def test_bad_example_count_is_rejected():
    with pytest.raises(ValueError, match="n must be"):
        problems.training_examples(0)
