"""ToyLM: enumeration of responses, probabilities, and validation messages."""
import itertools

import numpy as np
import pytest

from lmpolicy.exact.toy import ToyLM

WORKED_TABLES = [[0.7, 0.3], [[0.6, 0.4], [0.5, 0.5]]]


def worked() -> ToyLM:
    return ToyLM(("a", "b"), WORKED_TABLES)


def test_responses_are_lexicographic_with_chapter_probabilities():
    toy = worked()
    assert toy.responses == ("aa", "ab", "ba", "bb")
    assert toy.depth == 2 and toy.vocab_size == 2
    # the chapter's table: 0.7 * 0.6, 0.7 * 0.4, 0.3 * 0.5, 0.3 * 0.5
    np.testing.assert_allclose(toy.response_probs(), [0.42, 0.28, 0.15, 0.15], atol=1e-15)
    np.testing.assert_allclose(np.exp(toy.response_log_probs()), toy.response_probs(), rtol=1e-14)


def test_response_probs_match_brute_force_product_at_depth_4():
    toy = ToyLM.random(("x", "y", "z"), depth=4, seed=3)
    probs = toy.response_probs()
    assert len(toy.responses) == 81 and probs.shape == (81,)
    for name, p in zip(toy.responses, probs):
        expected = 1.0
        for t in range(len(name)):
            expected *= toy.next_token_probs(name[:t])[toy.tokens.index(name[t])]
        assert p == pytest.approx(expected, rel=1e-13)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert toy.responses == tuple("".join(c) for c in itertools.product("xyz", repeat=4))


def test_indices_and_prefix_probs():
    toy = worked()
    assert toy.prefix_index("ba") == (1, 0)
    assert toy.response_index("ba") == 2
    assert toy.prefixes(1) == ["a", "b"] and toy.prefixes(0) == [""]
    np.testing.assert_allclose(toy.next_token_probs("b"), [0.5, 0.5])
    np.testing.assert_allclose(toy.prefix_probs(1), [0.7, 0.3])
    assert toy.prefix_probs(0) == 1.0


def test_zero_probability_log_is_minus_inf_without_warning():
    toy = ToyLM(("a", "b"), [[1.0, 0.0], [[0.5, 0.5], [0.0, 1.0]]])
    with np.errstate(all="raise"):
        log_probs = toy.response_log_probs()
    assert log_probs[2] == -np.inf and log_probs[3] == -np.inf
    assert np.isfinite(log_probs[:2]).all()


def test_response_values_from_mapping_and_array():
    toy = worked()
    np.testing.assert_array_equal(toy.response_values({"bb": 2, "ab": 1, "aa": 0, "ba": 0}), [0, 1, 0, 2])
    np.testing.assert_array_equal(toy.response_values([[0, 1], [0, 2]]), [0, 1, 0, 2])


@pytest.mark.parametrize("values, fragment", [
    ({"aa": 0, "ab": 1, "ba": 0}, "missing ['bb']"),
    ({"aa": 0, "ab": 1, "ba": 0, "bb": 2, "cc": 3}, "unknown ['cc']"),
    ([0, 1, 2], "one number per response"),
    ([0, 1, np.nan, 2], "'ba'"),
])
def test_response_values_errors_name_the_problem(values, fragment):
    with pytest.raises(ValueError, match="rewards") as error:
        worked().response_values(values)
    assert fragment in str(error.value)


@pytest.mark.parametrize("tables, fragments", [
    ([[0.7, 0.3], [[0.6, 0.4], [0.5, 0.6]]], ["tables[1][1]", "after 'b'", "sums to 1.1", "not 1"]),
    ([[0.7, 0.3], [[1.2, -0.2], [0.5, 0.5]]], ["tables[1][0]", "after 'a'", "'b'", "negative", "-0.2"]),
    ([[0.7, 0.31], [[0.6, 0.4], [0.5, 0.5]]], ["tables[0]", "first-token", "1.01"]),
    ([[0.7, 0.3], [0.6, 0.4]], ["tables[1]", "shape (2, 2)", "(2,)"]),
    ([[0.7, 0.3, 0.0], [[0.6, 0.4], [0.5, 0.5]]], ["tables[0]", "shape (2,)", "(3,)"]),
    ([[0.7, 0.3], [[0.6, np.inf], [0.5, 0.5]]], ["tables[1][0]", "non-finite"]),
    ([], ["non-empty list"]),
])
def test_bad_tables_are_rejected_with_actionable_messages(tables, fragments):
    with pytest.raises(ValueError) as error:
        ToyLM(("a", "b"), tables)
    for fragment in fragments:
        assert fragment in str(error.value)


def test_deep_bad_row_names_its_prefix():
    good = ToyLM.random(("a", "b", "c"), depth=3, seed=0)
    tables = [np.array(t) for t in good.tables]
    tables[2][2, 1] = [0.5, 0.5, 0.5]
    with pytest.raises(ValueError, match=r"tables\[2\]\[2, 1\] \(the next-token distribution after 'cb'\) sums to 1.5"):
        ToyLM(("a", "b", "c"), tables)


def test_tolerance_is_one_in_a_million():
    ToyLM(("a", "b"), [[0.7 + 5e-7, 0.3], [[0.6, 0.4], [0.5, 0.5]]])
    with pytest.raises(ValueError, match="sums to"):
        ToyLM(("a", "b"), [[0.7 + 5e-6, 0.3], [[0.6, 0.4], [0.5, 0.5]]])


@pytest.mark.parametrize("tokens, fragment", [
    (("a",), "at least 2"), (("a", "a"), "distinct"), (("ab", "c"), "single character"), ("ab", "tuple"),
])
def test_bad_tokens(tokens, fragment):
    with pytest.raises(ValueError, match=fragment):
        ToyLM(tokens, [[0.5, 0.5]])


def test_tables_are_read_only_copies():
    source = np.array([0.7, 0.3])
    toy = ToyLM(("a", "b"), [source])
    source[0] = 0.0
    assert toy.tables[0][0] == 0.7
    with pytest.raises(ValueError):
        toy.tables[0][0] = 0.5


def test_random_is_seeded():
    a = ToyLM.random(("a", "b", "c"), depth=3, seed=7)
    b = ToyLM.random(("a", "b", "c"), depth=3, seed=7)
    c = ToyLM.random(("a", "b", "c"), depth=3, seed=8)
    np.testing.assert_array_equal(a.response_probs(), b.response_probs())
    assert not np.array_equal(a.response_probs(), c.response_probs())


def test_bad_prefixes_and_responses():
    toy = worked()
    with pytest.raises(ValueError, match="'c'"):
        toy.prefix_index("ac")
    with pytest.raises(ValueError, match="exactly 2 tokens"):
        toy.response_index("a")
    with pytest.raises(ValueError, match="no next token"):
        toy.next_token_probs("ab")
