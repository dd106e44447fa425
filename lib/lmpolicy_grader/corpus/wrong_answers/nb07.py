"""Typical wrong answers for 07_logprob_plumbing: the shift, the prompt mask and the padding mask of Task 1."""
from . import Kind, WrongAnswer

NOTEBOOK = "07_logprob_plumbing"
TASK1A = (NOTEBOOK, "task1a__response_logprobs")
TASK1B = (NOTEBOOK, "task1b__sequence_logprob")

WRONG_ANSWERS = [
    # --- Task 1a: response_logprobs ------------------------------------------------------------
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)[:, prompt_len:]
''',
        "no shift: reads each token's log-prob from its own column instead of the column before",
        kind=Kind.PITFALL, names="column t predicts the token in column t + 1",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, prompt_len:], dim=-1)
    return logp.gather(-1, ids[:, prompt_len:].unsqueeze(-1)).squeeze(-1)
''',
        "slices logits[:, L:] with the response tokens: each response column's own logits, no shift",
        kind=Kind.PITFALL, names="not shifted",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, ids[:, :-1].unsqueeze(-1)).squeeze(-1)[:, prompt_len - 1:]
''',
        "shifts the logits but not the ids: pairs logits column t with the token of the same column",
        kind=Kind.PITFALL, names="shifted on one side only",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)[:, prompt_len:]
''',
        "shifts, then slices at prompt_len instead of prompt_len - 1: loses the first response token",
        kind=Kind.PITFALL, names="one column too few",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
''',
        "prompt not masked: returns the log-probs of the prompt tokens too",
        kind=Kind.PITFALL, names="the prompt is not masked",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return tok[:, PROMPT_LEN - 1:]
''',
        "uses the constant PROMPT_LEN instead of the prompt_len argument",
        kind=Kind.PITFALL, names="use the prompt_len argument",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return tok[:, prompt_len - 1:].detach()
''',
        "detaches the result, so the RL loss gets no gradient",
        kind=Kind.PITFALL, names="carries no gradient",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log(torch.softmax(logits[:, :-1], dim=-1))
    tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return tok[:, prompt_len - 1:]
''',
        "log(softmax(...)) instead of log_softmax: a very unlikely token's probability underflows to 0, log gives -inf",
        kind=Kind.PITFALL, names="log(0) = -inf",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    probs = torch.softmax(logits[:, :-1], dim=-1)
    return probs.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)[:, prompt_len - 1:]
''',
        "returns the probabilities of the tokens, not their log-probs",
        kind=Kind.PITFALL, names="probabilities, not log-probs",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=1)
    tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return tok[:, prompt_len - 1:]
''',
        "log_softmax along dim=1 normalises over positions instead of over the vocabulary",
        kind=Kind.PITFALL, names="not a log-softmax over the vocabulary",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    tok = logp.gather(1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return tok[:, prompt_len - 1:]
''',
        "gathers along dim=1 (positions) instead of the vocabulary axis",
        kind=Kind.PITFALL, names="along the vocabulary axis",
    ),
    WrongAnswer(
        *TASK1A,
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    tok = logp[0, torch.arange(ids.shape[1] - 1), ids[0, 1:]]
    return tok[None, prompt_len - 1:].expand(ids.shape[0], -1)
''',
        "indexes row 0 only and repeats it for the whole batch",
        kind=Kind.BREADTH,
    ),
    WrongAnswer(
        *TASK1A,
        '''from lmpolicy.tinylm.logprobs import response_logprobs
''',
        "imports the library's response_logprobs instead of writing it",
        kind=Kind.PITFALL, names="implement this yourself",
    ),
    # --- Task 1b: sequence_logprob -------------------------------------------------------------
    WrongAnswer(
        *TASK1B,
        '''def sequence_logprob(token_logprobs, mask):
    return (token_logprobs * mask).sum(dim=-1)
''',
        "masks the padding by multiplying: 0 x -inf = NaN at padded positions",
        kind=Kind.PITFALL, names="masked by multiplying",
    ),
    WrongAnswer(
        *TASK1B,
        '''def sequence_logprob(token_logprobs, mask):
    return token_logprobs.sum(dim=-1)
''',
        "padding not masked at all",
        kind=Kind.PITFALL, names="padding was not left out",
    ),
    WrongAnswer(
        *TASK1B,
        '''def sequence_logprob(token_logprobs, mask):
    return torch.where(mask, token_logprobs, torch.zeros_like(token_logprobs)).sum(dim=-1)
''',
        "uses the mask as the condition of torch.where as it comes: a float mask is not a condition",
        kind=Kind.PITFALL, names="mask.bool()",
    ),
    WrongAnswer(
        *TASK1B,
        '''def sequence_logprob(token_logprobs, mask):
    kept = torch.where(mask.bool(), token_logprobs, torch.zeros_like(token_logprobs))
    return kept.sum(dim=-1) / mask.sum(dim=-1)
''',
        "averages over the written tokens instead of summing",
        kind=Kind.PITFALL, names="is their sum",
    ),
    WrongAnswer(
        *TASK1B,
        '''def sequence_logprob(token_logprobs, mask):
    return torch.where(mask.bool(), token_logprobs, torch.zeros_like(token_logprobs)).sum(dim=0)
''',
        "sums over the batch (dim=0) instead of over each row's tokens",
        kind=Kind.PITFALL, names="summed over the batch",
    ),
    WrongAnswer(
        *TASK1B,
        '''def sequence_logprob(token_logprobs, mask):
    return torch.where(mask.bool(), token_logprobs, torch.zeros_like(token_logprobs)).sum(dim=-1).detach()
''',
        "detaches the result: the loss built on it gets no gradient",
        kind=Kind.PITFALL, names="carries no gradient",
    ),
]
