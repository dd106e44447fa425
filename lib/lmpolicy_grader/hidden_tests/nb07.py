"""Notebook 07's hidden tests: response_logprobs and sequence_logprob on inputs the student never saw, and on a real
TinyLM batch against one forward pass per prefix."""
from __future__ import annotations

import math

import torch

from lmpolicy.exercises.nb07 import (RESPONSE_LOGPROBS, SEQUENCE_LOGPROB, check_response_logprobs,
                                     check_sequence_logprob)
from lmpolicy.notebook.checks import check, check_close
from lmpolicy.per_student.hidden_inputs import hidden_seed
from lmpolicy.tinylm import logprobs as library_logprobs
from lmpolicy.tinylm.generate import response_mask
from lmpolicy.tinylm.model import TinyLM
from lmpolicy.tinylm.tokenizer import PROMPT_LEN, encode_prompts, encode_responses


def response_logprobs(student_response_logprobs) -> None:
    with RESPONSE_LOGPROBS.blocked():  # the same shortcuts on the hidden inputs
        # random shapes and prompt lengths, batch of one included; columns favour the *unshifted* token as
        # often as the shifted one, so that a missing shift cannot pass by accident
        for seed, (batch, length, vocab, prompt_len) in enumerate(
                [(1, 11, 15, 7), (3, 9, 5, 4), (5, 6, 7, 1), (2, 12, 30, 10), (4, 8, 3, 7)]):
            generator = torch.Generator().manual_seed(hidden_seed(100 + seed))
            ids = torch.randint(0, vocab, (batch, length), generator=generator)
            logits = 3 * torch.randn(batch, length, vocab, generator=generator)
            check_response_logprobs(student_response_logprobs, logits, ids, prompt_len)

        # the prompt gets no gradient, the response does: only logits columns prompt_len - 1 .. L - 2 matter
        generator = torch.Generator().manual_seed(hidden_seed(7))
        ids = torch.randint(0, 15, (3, 11), generator=generator)
        logits = torch.randn(3, 11, 15, generator=generator, requires_grad=True)
        got = check_response_logprobs(student_response_logprobs, logits, ids, 7)
        check(got.requires_grad, "the result of response_logprobs carries no gradient: "
              "don't detach it or convert it to numpy, the RL loss backpropagates through it")
        got.sum().backward()
        column_grad = logits.grad.abs().sum(dim=(0, 2))
        check(bool((column_grad[:6] == 0).all()),
              "the prompt is not masked: logits columns 0-5 (predicting prompt tokens) receive gradient")
        check(bool(column_grad[10] == 0),
              "log-probs are shifted by one column: column t must predict token t+1 (the last logits "
              "column predicts nothing in the row and must get no gradient)")

        # real TinyLM batches: the row's log-probs must match one forward pass per prefix (causality)
        torch.manual_seed(hidden_seed(0))
        model = TinyLM().eval()
        prompts = encode_prompts([(37, 48), (3, 4), (99, 99), (5, 50)])
        rows = torch.cat([prompts, encode_responses([85, 7, 198, 55])], dim=1)
        with torch.no_grad():
            full = model(rows)
            by_prefix = torch.stack([torch.log_softmax(model(rows[:, :c])[:, -1].double(), -1)
                                     .gather(-1, rows[:, c:c + 1]).squeeze(-1)
                                     for c in range(PROMPT_LEN, rows.shape[1])], dim=1)
        got = check_response_logprobs(student_response_logprobs, full, rows, PROMPT_LEN)
        check_close(got, by_prefix, "response_logprobs on a TinyLM batch", atol=1e-4)


def sequence_logprob(student_sequence_logprob) -> None:
    with SEQUENCE_LOGPROB.blocked():  # the same shortcuts on the hidden inputs
        # padding holds -inf (a sampler that forbade the padded token): multiplying by the mask gives NaN
        token_logprobs = torch.tensor([[-0.1, -0.2, -math.inf, -math.inf], [-1.0, -0.5, -0.25, -0.125]])
        mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
        check_sequence_logprob(student_sequence_logprob, token_logprobs, mask)
        # integer and boolean masks, an all-padding row (log-prob 0), a batch of one
        check_sequence_logprob(student_sequence_logprob, token_logprobs, mask.long())
        check_sequence_logprob(student_sequence_logprob, torch.tensor([[-math.inf, -math.inf, -math.inf]]),
                               torch.zeros(1, 3))
        # random shapes; padding filled with -inf or with large finite junk
        for seed, (batch, width) in enumerate([(1, 1), (6, 4), (3, 9), (8, 2)]):
            generator = torch.Generator().manual_seed(hidden_seed(200 + seed))
            lengths = torch.randint(0, width + 1, (batch,), generator=generator)
            mask = (torch.arange(width)[None, :] < lengths[:, None])
            token_logprobs = -torch.rand(batch, width, generator=generator) * 5
            junk = torch.full_like(token_logprobs, -math.inf) if seed % 2 else torch.full_like(token_logprobs, -1e6)
            token_logprobs = torch.where(mask, token_logprobs, junk)
            check_sequence_logprob(student_sequence_logprob, token_logprobs, mask.float())
        # gradients flow to the kept tokens only, and none of them is NaN
        token_logprobs = torch.tensor([[-0.3, -0.2, -math.inf]], requires_grad=True)
        got = check_sequence_logprob(student_sequence_logprob, token_logprobs, torch.tensor([[1.0, 1.0, 0.0]]))
        got.sum().backward()
        check(not torch.isnan(token_logprobs.grad).any(), "the gradient of sequence_logprob is NaN at a padded "
              "position: you masked by multiplying (0 x -inf); use torch.where")
        check_close(token_logprobs.grad, [[1.0, 1.0, 0.0]], "the gradient of sequence_logprob",
                    hint="each kept token should get gradient 1, padding 0")

    # a TinyLM batch: log pi(y | x) of answers of 1, 2 and 3 digits, against one forward pass per prefix
    torch.manual_seed(hidden_seed(1))
    model = TinyLM().eval()
    rows = torch.cat([encode_prompts([(3, 4), (37, 48), (99, 99)]), encode_responses([7, 85, 198])], dim=1)
    mask = response_mask(rows[:, PROMPT_LEN:])
    with torch.no_grad():
        token_logprobs = library_logprobs.response_logprobs(model(rows), rows, PROMPT_LEN)
        by_prefix = torch.zeros(3, dtype=torch.float64)
        for c in range(PROMPT_LEN, rows.shape[1]):
            logp = torch.log_softmax(model(rows[:, :c])[:, -1].double(), -1).gather(-1, rows[:, c:c + 1]).squeeze(-1)
            by_prefix += torch.where(mask[:, c - PROMPT_LEN].bool(), logp, torch.zeros_like(logp))
    with SEQUENCE_LOGPROB.blocked():  # the same shortcuts on the hidden inputs
        got = check_sequence_logprob(student_sequence_logprob, token_logprobs, mask)
    check_close(got, by_prefix, "sequence_logprob on a TinyLM batch", atol=1e-4)
