"""Typical wrong answers for 07_logprob_plumbing: the three plumbing bugs of Task 1, one each."""
from . import WrongAnswer

NOTEBOOK = "07_logprob_plumbing"

WRONG_ANSWERS = [
    WrongAnswer(
        NOTEBOOK, "task1a__response_logprobs", "task1a",
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)[:, prompt_len:]
''',
        "no shift: reads each token's log-prob from its own column instead of the column before",
    ),
    WrongAnswer(
        NOTEBOOK, "task1a__response_logprobs", "task1a",
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
''',
        "prompt not masked: returns the log-probs of the prompt tokens too",
    ),
    WrongAnswer(
        NOTEBOOK, "task1a__response_logprobs", "task1a",
        '''def response_logprobs(logits, ids, prompt_len):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return tok[:, prompt_len - 1:].detach()
''',
        "detaches the result, so the RL loss gets no gradient",
    ),
    WrongAnswer(
        NOTEBOOK, "task1b__sequence_logprob", "task1b",
        '''def sequence_logprob(token_logprobs, mask):
    return (token_logprobs * mask).sum(dim=-1)
''',
        "masks the padding by multiplying: 0 x -inf = NaN at padded positions",
    ),
    WrongAnswer(
        NOTEBOOK, "task1b__sequence_logprob", "task1b",
        '''def sequence_logprob(token_logprobs, mask):
    return token_logprobs.sum(dim=-1)
''',
        "padding not masked at all",
    ),
]
