"""The verifier reward for TinyLM's answers.

Reward: 1.0 if the response is exactly the sum written the usual way (its digits, no leading
zero, then ``<eos>`` within the 4-token budget), else 0.0. A malformed response earns 0.0.
The metrics built on it (accuracy, the kinds of wrong answer) are in :mod:`lmpolicy.tinylm.evaluate`.
"""
from __future__ import annotations

import torch

from lmpolicy.tinylm.generate import response_mask
from lmpolicy.tinylm.model import unique_rows
from lmpolicy.tinylm.tokenizer import RESPONSE_LEN, decode_prompt, encode_responses


def verifier_reward(prompt_ids: torch.Tensor, response_ids: torch.Tensor) -> torch.Tensor:
    """prompt_ids (B, PROMPT_LEN), response_ids (B, RESPONSE_LEN) -> FloatTensor (B,) of 1.0 / 0.0.

    A response is right when its tokens up to and including the first ``<eos>`` are exactly the
    correct response; this is :func:`parse_answer` equal to the sum, done on whole tensors (each
    distinct prompt is decoded once), because REINFORCE scores tens of thousands of answers a second.
    """
    if prompt_ids.ndim != 2 or response_ids.ndim != 2 or prompt_ids.shape[0] != response_ids.shape[0]:
        raise ValueError(
            f"prompt_ids and response_ids must be (B, ...) with the same B; got {tuple(prompt_ids.shape)} "
            f"and {tuple(response_ids.shape)}"
        )
    if response_ids.shape[1] != RESPONSE_LEN:
        raise ValueError(f"response_ids must have {RESPONSE_LEN} columns (the response budget), "
                         f"got {response_ids.shape[1]}")
    distinct_prompts, which = unique_rows(prompt_ids)
    correct = encode_responses([sum(decode_prompt(p)) for p in distinct_prompts])[which]
    agrees = (response_ids == correct) | (response_mask(correct) == 0)
    return agrees.all(dim=1).float()
