"""The shared numeric checks: positivity, the one probability validator (1-D and N-D), finiteness."""
import numpy as np
import pytest

from lmpolicy.exact.numeric import (check_distribution, check_finite, check_positive, check_positive_grid,
                                    distribution_and_values)
from lmpolicy.exact.toy import ToyLM


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "x", None])
def test_check_positive_rejects(value):
    with pytest.raises(ValueError, match="beta"):
        check_positive(value, "beta", "why")


def test_check_distribution_messages():
    with pytest.raises(ValueError, match="negative"):
        check_distribution([1.2, -0.2])
    with pytest.raises(ValueError, match="sums to 0.9"):
        check_distribution([0.5, 0.4])
    with pytest.raises(ValueError, match="1-D"):
        check_distribution([[0.5, 0.5]])


def test_distribution_and_values_accepts_arrays():
    probs, values = distribution_and_values([0.25, 0.75], [1.0, 2.0])
    np.testing.assert_array_equal(probs, [0.25, 0.75])
    with pytest.raises(ValueError, match="one number per response"):
        distribution_and_values([0.25, 0.75], [1.0])


def test_check_positive_grid_rejects_empty_and_bad_entries():
    np.testing.assert_array_equal(check_positive_grid([0.5, 2], "beta", "why"), [0.5, 2.0])
    with pytest.raises(ValueError, match="non-empty 1-D list of beta"):
        check_positive_grid([], "beta", "why")
    with pytest.raises(ValueError, match="beta must be a finite number > 0"):
        check_positive_grid([1.0, 0.0], "beta", "why")


def test_batches_of_distributions_name_their_first_bad_row():
    good = check_distribution([[0.5, 0.5], [0.25, 0.75]], "p", one_dimensional=False)
    assert good.shape == (2, 2)
    with pytest.raises(ValueError, match=r"p\[1\] sums to 0.9, not 1"):
        check_distribution([[0.5, 0.5], [0.5, 0.4]], "p", one_dimensional=False)
    with pytest.raises(ValueError, match=r"q\[0, 1\] gives entry 0 the negative probability -0.5"):
        check_distribution([[[0.5, 0.5], [-0.5, 1.5]]], "q", one_dimensional=False)
    with pytest.raises(ValueError, match=r"p\[1\] \(row one\) holds a non-finite number"):
        check_distribution([[0.5, 0.5], [np.nan, 0.5]], "p", one_dimensional=False,
                           describe_row=lambda index: "row one")
    with pytest.raises(ValueError, match="gives token 'y' the negative"):
        check_distribution([1.5, -0.5], token_names=("x", "y"))
    with pytest.raises(ValueError, match="array of probabilities"):
        check_distribution("abc")


def test_a_toy_model_stands_for_its_response_distribution():
    toy = ToyLM(("a", "b"), [[0.7, 0.3], [[0.6, 0.4], [0.5, 0.5]]])
    np.testing.assert_allclose(check_distribution(toy), [0.42, 0.28, 0.15, 0.15])
    probs, values = distribution_and_values(toy, {"aa": 0, "ab": 1, "ba": 0, "bb": 2})
    np.testing.assert_allclose(probs, [0.42, 0.28, 0.15, 0.15])
    np.testing.assert_array_equal(values, [0, 1, 0, 2])


def test_check_finite_names_the_entry():
    with pytest.raises(ValueError, match="rewards must be finite numbers; the value for entry 2 is not"):
        check_finite(np.array([0.0, 1.0, np.inf]), "rewards")
    with pytest.raises(ValueError, match="the value for 'c' is not"):
        check_finite(np.array([0.0, 1.0, np.nan]), "rewards", ("a", "b", "c"))
    with pytest.raises(ValueError, match="entry 1 is not"):
        distribution_and_values([0.5, 0.5], [0.0, np.nan])
