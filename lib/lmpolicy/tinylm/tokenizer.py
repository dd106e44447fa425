"""TinyLM's 15-token vocabulary, and how addition problems become token ids.

Token ids: the digits 0-9 are their own ids, then ``+``, ``=``, ``<bos>``, ``<eos>``, ``<pad>``.

A prompt such as ``"37+48="`` becomes ``<bos> 3 7 + 4 8 =`` and is padded on the *left* with
``<pad>`` to ``PROMPT_LEN = 7`` columns, so that every prompt in a batch ends in the same column
and the answers all start in column 7::

    "3+4="   ->  <pad> <pad> <pad> <bos> 3 + 4 =
    "37+48=" ->  <bos> 3 7 + 4 8 =

A response has a budget of ``RESPONSE_LEN = 4`` tokens: the digits of the sum, ``<eos>``, then
``<pad>`` up to the budget (``85`` -> ``8 5 <eos> <pad>``). Operands are whole numbers 0..99
written without leading zeros, so the largest sum, 198, still fits with its ``<eos>``.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import torch

VOCAB: tuple[str, ...] = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "+", "=", "<bos>", "<eos>", "<pad>")
TOKEN_ID: dict[str, int] = {token: i for i, token in enumerate(VOCAB)}
PLUS, EQUALS, BOS, EOS, PAD = (TOKEN_ID[t] for t in ("+", "=", "<bos>", "<eos>", "<pad>"))
VOCAB_SIZE = len(VOCAB)

PROMPT_LEN = 7  # <bos> + two 2-digit operands + '+' + '='
RESPONSE_LEN = 4  # up to three digits of the sum, then <eos>
MAX_OPERAND = 99

_PROMPT_PATTERN = re.compile(r"(0|[1-9][0-9]?)\+(0|[1-9][0-9]?)=")


def parse_prompt(text: str) -> tuple[int, int]:
    """``"37+48="`` -> ``(37, 48)``. Raises ValueError naming the input if it is not such a prompt."""
    if not isinstance(text, str):
        raise ValueError(f"a prompt must be a string like '37+48=', got {text!r} ({type(text).__name__})")
    match = _PROMPT_PATTERN.fullmatch(text)
    if match is None:
        raise ValueError(
            f"bad prompt {text!r}: expected two whole numbers 0..{MAX_OPERAND} without leading zeros, "
            "joined by '+' and ending in '=', like '37+48=' or '3+4='"
        )
    return int(match.group(1)), int(match.group(2))


def _check_operands(a: int, b: int) -> None:
    for x in (a, b):
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_OPERAND:
            raise ValueError(f"bad problem ({a!r}, {b!r}): operands must be whole numbers 0..{MAX_OPERAND}")


def encode_prompt(text: str) -> torch.Tensor:
    """``"37+48="`` -> LongTensor (7,) ``<bos> 3 7 + 4 8 =``, left-padded with ``<pad>``."""
    a, b = parse_prompt(text)
    return encode_prompts([(a, b)])[0]


def encode_prompts(problems: Iterable[tuple[int, int]]) -> torch.Tensor:
    """A list of problems ``[(37, 48), (3, 4), ...]`` -> LongTensor (B, 7) of left-padded prompts."""
    rows = []
    for a, b in problems:
        _check_operands(a, b)
        ids = [BOS] + [TOKEN_ID[c] for c in f"{a}+{b}="]
        rows.append([PAD] * (PROMPT_LEN - len(ids)) + ids)
    if not rows:
        raise ValueError("encode_prompts got no problems: pass a non-empty list of (a, b) pairs")
    return torch.tensor(rows, dtype=torch.long)


def decode_prompt(ids: Sequence[int] | torch.Tensor) -> tuple[int, int]:
    """A prompt row (left-padded ``<bos> 3 7 + 4 8 =``) -> ``(37, 48)``; ValueError if it is not one."""
    text = decode(ids)
    if not text.startswith("<bos>"):
        raise ValueError(f"bad prompt ids {torch.as_tensor(ids).tolist()}: {text!r} does not start with <bos>")
    return parse_prompt(text[len("<bos>") :])


def encode_response(answer: int) -> torch.Tensor:
    """``85`` -> LongTensor (4,) ``8 5 <eos> <pad>``: the digits, ``<eos>``, right-padded with ``<pad>``."""
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer <= 2 * MAX_OPERAND:
        raise ValueError(f"bad answer {answer!r}: must be a whole number 0..{2 * MAX_OPERAND}")
    ids = [TOKEN_ID[c] for c in str(answer)] + [EOS]
    return torch.tensor(ids + [PAD] * (RESPONSE_LEN - len(ids)), dtype=torch.long)


def encode_responses(answers: Iterable[int]) -> torch.Tensor:
    """A list of sums -> LongTensor (B, 4), one :func:`encode_response` row each."""
    return torch.stack([encode_response(int(x)) for x in answers])


def decode(ids: Sequence[int] | torch.Tensor, skip_pad: bool = True) -> str:
    """Token ids -> text, e.g. ``"<bos>37+48=85<eos>"`` (``<pad>`` left out unless ``skip_pad=False``)."""
    ids = torch.as_tensor(ids).tolist()
    bad = [i for i in ids if not 0 <= i < VOCAB_SIZE]
    if bad:
        raise ValueError(f"token ids {bad} are outside the vocabulary 0..{VOCAB_SIZE - 1}")
    return "".join(VOCAB[i] for i in ids if not (skip_pad and i == PAD))


def decode_response(ids: Sequence[int] | torch.Tensor) -> str:
    """A response row -> the text the model wrote before its first ``<eos>``.

    ``8 5 <eos> <pad>`` -> ``"85"``. If there is no ``<eos>``, everything is decoded (padding left out).
    The result need not be a number (``"8+"``): see :func:`parse_answer`.
    """
    ids = torch.as_tensor(ids).tolist()
    if EOS in ids:
        ids = ids[: ids.index(EOS)]
    return decode(ids)


def parse_answer(ids: Sequence[int] | torch.Tensor) -> str | None:
    """The digits a response states, as a string, or None if the response is malformed.

    Well-formed means: one to three digits, then ``<eos>``, all within the 4-token budget (what comes
    after ``<eos>`` is ignored). ``8 5 <eos> <pad>`` -> ``"85"``; ``0 8 5 <eos>`` -> ``"085"`` (well
    formed, but not how 85 is written); ``8 5 <pad> <pad>``, ``<eos> ...``, ``8 + <eos> ...`` and
    ``1 2 3 4`` -> None. The digits are returned as text so that a leading zero is not lost.
    """
    ids = torch.as_tensor(ids).tolist()
    if EOS not in ids:
        return None
    digits = ids[: ids.index(EOS)]
    if not digits or any(i > 9 for i in digits):
        return None
    return "".join(VOCAB[i] for i in digits)
