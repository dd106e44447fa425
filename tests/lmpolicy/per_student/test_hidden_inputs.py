"""The hidden tests' seeds (lmpolicy.per_student.hidden_inputs): the test's own seed, or one mixed with the student's value."""
import numpy as np
import pytest

from lmpolicy.per_student.hidden_inputs import HIDDEN_INPUTS_VARIABLE, hidden_seed


def test_outside_grading_a_hidden_test_keeps_its_own_seed(monkeypatch):
    monkeypatch.delenv(HIDDEN_INPUTS_VARIABLE, raising=False)
    assert hidden_seed(1101) == 1101 and hidden_seed(0) == 0


def test_a_students_value_gives_seeds_of_its_own_per_test_that_every_generator_takes(monkeypatch):
    monkeypatch.setenv(HIDDEN_INPUTS_VARIABLE, "a" * 32)
    alice = [hidden_seed(base) for base in (1, 2, 1101)]
    assert len(set(alice)) == 3 and alice[0] == hidden_seed(1)
    monkeypatch.setenv(HIDDEN_INPUTS_VARIABLE, "b" * 32)
    assert all(hidden_seed(base) != seed for base, seed in zip((1, 2, 1101), alice))
    import torch
    torch.Generator().manual_seed(max(alice))
    np.random.default_rng(max(alice))


@pytest.mark.parametrize("bad", [-1, 1.5, "7", True])
def test_a_seed_that_is_not_a_non_negative_int_is_refused(bad):
    with pytest.raises(ValueError, match="non-negative int"):
        hidden_seed(bad)
