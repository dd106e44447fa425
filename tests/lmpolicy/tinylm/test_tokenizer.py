import pytest
import torch

from lmpolicy.tinylm import tokenizer as tk


def test_vocabulary_has_15_distinct_tokens_and_named_ids():
    assert len(tk.VOCAB) == 15 == tk.VOCAB_SIZE
    assert len(set(tk.VOCAB)) == 15
    assert [tk.VOCAB[i] for i in (tk.PLUS, tk.EQUALS, tk.BOS, tk.EOS, tk.PAD)] == ["+", "=", "<bos>", "<eos>", "<pad>"]
    assert [tk.VOCAB[i] for i in range(10)] == list("0123456789")


def test_full_width_prompt_is_the_chapter_row():
    # the chapter's row: <bos> 3 7 + 4 8 =
    expected = [tk.BOS, 3, 7, tk.PLUS, 4, 8, tk.EQUALS]
    assert tk.encode_prompt("37+48=").tolist() == expected
    assert tk.PROMPT_LEN == 7 and tk.RESPONSE_LEN == 4


def test_short_prompts_are_left_padded_to_end_in_the_same_column():
    ids = tk.encode_prompts([(3, 4), (37, 48), (0, 99)])
    assert ids.shape == (3, 7) and ids.dtype == torch.long
    assert ids[0].tolist() == [tk.PAD, tk.PAD, tk.BOS, 3, tk.PLUS, 4, tk.EQUALS]
    assert ids[2].tolist() == [tk.PAD, tk.BOS, 0, tk.PLUS, 9, 9, tk.EQUALS]
    assert (ids[:, -1] == tk.EQUALS).all()


def test_response_has_digits_eos_then_padding():
    assert tk.encode_response(85).tolist() == [8, 5, tk.EOS, tk.PAD]
    assert tk.encode_response(7).tolist() == [7, tk.EOS, tk.PAD, tk.PAD]
    assert tk.encode_response(198).tolist() == [1, 9, 8, tk.EOS]
    assert tk.encode_responses([85, 7]).shape == (2, 4)


@pytest.mark.parametrize("a", [0, 5, 10, 37, 99])
@pytest.mark.parametrize("b", [0, 9, 48, 99])
def test_round_trips(a, b):
    text = f"{a}+{b}="
    prompt = tk.encode_prompt(text)
    assert tk.decode(prompt) == "<bos>" + text
    assert tk.decode_prompt(prompt) == (a, b)
    response = tk.encode_response(a + b)
    assert tk.decode_response(response) == str(a + b)
    assert tk.parse_answer(response) == str(a + b)
    assert tk.decode(torch.cat([prompt, response])) == f"<bos>{text}{a + b}<eos>"


@pytest.mark.parametrize("bad", ["3+", "12+345=", "a+b=", "37+48", "+4=", "05+3=", "3+4=5", " 3+4=", ""])
def test_bad_prompts_raise_a_value_error_naming_the_input(bad):
    with pytest.raises(ValueError) as info:
        tk.encode_prompt(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("problem", [(100, 1), (-1, 3), (3, 2.5), (True, 1)])
def test_bad_operands_raise(problem):
    with pytest.raises(ValueError, match="0..99"):
        tk.encode_prompts([problem])


def test_parse_answer_accepts_only_digits_then_eos_within_the_budget():
    P, E = tk.PAD, tk.EOS
    assert tk.parse_answer([8, 5, E, P]) == "85"
    assert tk.parse_answer([8, 5, E, 3]) == "85"  # what follows <eos> is ignored
    assert tk.parse_answer([0, 8, 5, E]) == "085"  # well formed, leading zero kept
    assert tk.parse_answer([8, 5, P, P]) is None  # no <eos>
    assert tk.parse_answer([1, 2, 3, 4]) is None  # out of budget
    assert tk.parse_answer([E, P, P, P]) is None  # no digits
    assert tk.parse_answer([8, tk.PLUS, E, P]) is None
    assert tk.decode_response([8, 5, P, P]) == "85"
