"""Log-prob plumbing: the log-probability of each response token, and of a whole response.

The chapter's three rules, for a batch of rows ``prompt (prompt_len columns) + response``:

1. Shift by one: the logits in column t are the prediction for the token in column t + 1.
2. Mask the prompt: only the response tokens are the policy's actions.
3. Mask the padding after ``<eos>`` with ``torch.where``, never by multiplying by the mask:
   a padded position can hold ``-inf`` and ``0 * -inf`` is NaN.

This is the library's reference implementation; the REINFORCE trainer and the metrics use it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def response_logprobs(logits: torch.Tensor, ids: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """Log-prob of every response token under the model.

    logits (B, L, V) from ``model(ids)``, ids (B, L) -> (B, L - prompt_len); entry [b, j] is
    ``log p(ids[b, prompt_len + j] | ids[b, :prompt_len + j])``, read from logits column
    ``prompt_len + j - 1``. That is ``log_softmax(logits[:, prompt_len - 1:-1]).gather(ids[:, prompt_len:])``.

    The result has the logits' precision (float64 stays float64); half-precision logits (bfloat16,
    float16) are upcast to float32 first, since their rounding error in a log-softmax over a large
    vocabulary is larger than the log-ratios RL cares about.
    """
    if logits.ndim != 3 or ids.ndim != 2 or logits.shape[:2] != ids.shape:
        raise ValueError(f"logits must be (B, L, V) and ids (B, L); got {tuple(logits.shape)} and {tuple(ids.shape)}")
    if not 1 <= prompt_len < ids.shape[1]:
        raise ValueError(f"prompt_len must be between 1 and L - 1 = {ids.shape[1] - 1}, got {prompt_len}")
    # Slice before the log-softmax: only the columns that predict response tokens enter the graph. The
    # prompt's columns then cost nothing in backward (the log-softmax keeps its (B, R, V) output, not
    # (B, L, V)), and a prompt column whose logits are all -inf (left padding) cannot send NaN into the
    # gradient: its log-softmax, never computed, cannot be NaN.
    # log_softmax then gather, rather than chosen logit minus logsumexp (TRL's float32 route): it rounds
    # exactly as the full-width log-softmax did, so seeded runs are unchanged bit for bit, and in
    # bench/bench_logprobs.py its peak memory in backward is the lower of the two (logsumexp's backward
    # rebuilds a (B, R, V) softmax anyway).
    predicting = logits[:, prompt_len - 1 : -1]  # column t predicts token t + 1
    if predicting.dtype in (torch.float16, torch.bfloat16):
        predicting = predicting.float()
    logp = F.log_softmax(predicting, dim=-1)
    return logp.gather(-1, ids[:, prompt_len:].unsqueeze(-1)).squeeze(-1)


def sequence_logprob(token_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log pi(y | x) per row: the sum of the token log-probs where ``mask`` is nonzero -> (B,)."""
    if token_logprobs.shape != mask.shape:
        raise ValueError(f"token_logprobs {tuple(token_logprobs.shape)} and mask {tuple(mask.shape)} differ in shape")
    return torch.where(mask.bool(), token_logprobs, torch.zeros_like(token_logprobs)).sum(dim=-1)
