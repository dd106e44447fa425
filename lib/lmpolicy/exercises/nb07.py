"""Notebook 07, log-prob plumbing: Lab Task 1a (response_logprobs) and Lab Task 1b (sequence_logprob), and their
visible checks."""
from __future__ import annotations

import math

import torch

from lmpolicy.exercises.exercise import Exercise
from lmpolicy.exercises.older_names import module_getattr
from lmpolicy.notebook import checks
from lmpolicy.notebook.forbidden import LOGPROBS, Shortcuts
from lmpolicy.tinylm.tokenizer import PROMPT_LEN, VOCAB_SIZE, encode_prompt, encode_response

# --- Lab Task 1a: response_logprobs ----------------------------------------------------------------------------

def expected_response_logprobs(logits, ids, prompt_len):
    """The definition, one entry at a time (slow but obviously right)."""
    logp = torch.log_softmax(logits.detach().double(), dim=-1)
    out = torch.empty(ids.shape[0], ids.shape[1] - prompt_len, dtype=torch.float64)
    for b in range(ids.shape[0]):
        for j in range(ids.shape[1] - prompt_len):
            out[b, j] = logp[b, prompt_len + j - 1, ids[b, prompt_len + j]]
    return out


def misaligned_read(logp, ids, prompt_len, column_offset, token_offset):
    """What an answer reads if entry j takes logits column prompt_len + j - 1 + column_offset and the token of
    column prompt_len + j + token_offset (None when that runs off the row)."""
    columns = torch.arange(prompt_len, ids.shape[1]) - 1 + column_offset
    tokens = torch.arange(prompt_len, ids.shape[1]) + token_offset
    if min(columns.min(), tokens.min()) < 0 or max(columns.max(), tokens.max()) >= ids.shape[1]:
        return None
    return logp[:, columns].gather(-1, ids[:, tokens, None]).squeeze(-1)


MISALIGNED = {  # (logits column offset, token column offset): what the mistake is, in words
    (1, 0): "log-probs are not shifted: each token is read from its own logits column, but column t predicts "
            "the token in column t + 1",
    (0, -1): "log-probs are shifted on one side only: logits[:, :-1] must be paired with ids[:, 1:], the tokens "
             "they predict, not with ids[:, :-1]",
    (-1, -1): "log-probs are one column early: entry j is the token in column prompt_len + j, predicted by logits "
              "column prompt_len + j - 1",
}
GATHER_HINT = "pick one entry per position along the vocabulary axis: logp.gather(-1, ids[:, 1:].unsqueeze(-1))"


def check_response_logprobs(response_logprobs, logits, ids, prompt_len):
    """Call the student's response_logprobs and say which plumbing rule it breaks, if any."""
    what = f"response_logprobs(logits, ids, prompt_len={prompt_len})"
    if not logits.requires_grad:  # so that the check can see which logits columns the answer reads
        logits = logits.detach().clone().requires_grad_(True)
    try:
        got = checks.call_student(response_logprobs, logits, ids, prompt_len)
    except checks.StudentCodeRaised as error:  # an indexing error gets the gather hint
        if error.hint is None and any(word in error.problem.lower() for word in ("gather", "index")):
            raise checks.StudentCodeRaised(error.problem, GATHER_HINT) from error.__cause__
        raise
    checks.check_type(got, torch.Tensor, what)
    batch, length = ids.shape
    n_response = length - prompt_len
    checks.check(got.ndim == 2 and got.shape[0] == batch,
                 f"{what} has shape {tuple(got.shape)}; expected (B, L - prompt_len) = {(batch, n_response)}",
                 hint=GATHER_HINT)
    width = got.shape[1]
    checks.check(width not in (length - 1, length) or n_response in (length - 1, length),
                 f"{what} has {width} columns, one per token of the whole row: the prompt is not masked. "
                 f"Prompt tokens were given, not chosen by the policy; keep only the {n_response} response columns.")
    checks.check(prompt_len == PROMPT_LEN or width != length - PROMPT_LEN,
                 f"{what} has {width} columns, as if the prompt were PROMPT_LEN = {PROMPT_LEN} columns long: "
                 "use the prompt_len argument, not the constant")
    checks.check(width != n_response - 1,
                 f"{what} has one column too few: the first response token, in column prompt_len, is predicted by "
                 "logits column prompt_len - 1; keep it")
    checks.check(width != n_response + 1,
                 f"{what} has one column too many: the last prompt token is not an action; start at the first "
                 "response token")
    checks.check_shape(got, (batch, n_response), what)
    checks.check(got.requires_grad, f"{what} carries no gradient: don't detach it, call .item() or convert to "
                 "numpy; the RL loss backpropagates through it")
    expected = expected_response_logprobs(logits, ids, prompt_len)
    values = got.detach().double()
    checks.check(not (torch.isneginf(values) & torch.isfinite(expected)).any(),
                 f"{what} contains -inf where the log-prob is finite: log(softmax(...)) rounds a tiny probability "
                 "to 0 and log(0) = -inf", hint="torch.log_softmax(logits, dim=-1) never takes the log of 0")

    def reads(candidate):  # the answer computed this wrong thing (and the wrong thing differs from the right one)
        close = dict(atol=1e-4, rtol=1e-4)
        return (candidate is not None and torch.allclose(values, candidate, **close)
                and not torch.allclose(candidate, expected, **close))

    checks.check(not reads(expected.exp()), f"{what} returned probabilities, not log-probs",
                 hint="torch.log_softmax(logits, dim=-1), then gather")
    logp = torch.log_softmax(logits.detach().double(), dim=-1)
    for (column_offset, token_offset), mistake in MISALIGNED.items():
        checks.check(not reads(misaligned_read(logp, ids, prompt_len, column_offset, token_offset)), mistake,
                     hint="use logits[:, :-1] (predictions) with ids[:, 1:] (the tokens they predict)")
    # which logits entries the answer depends on: one column per response token, each normalised over the vocabulary
    (grad,) = torch.autograd.grad(got.sum(), logits, retain_graph=True, allow_unused=True)
    checks.check(grad is not None, f"{what} does not depend on the logits it was given")
    checks.check(not torch.isnan(grad).any(), f"the gradient of {what} is NaN: log(softmax(...)) divides by a "
                 "probability of 0", hint="use torch.log_softmax")
    checks.check(bool(torch.allclose(grad.sum(dim=-1), torch.zeros(()), atol=1e-4)),
                 f"{what} is not a log-softmax over the vocabulary: normalise along the last axis of the logits",
                 hint="torch.log_softmax(logits, dim=-1); dim=1 would normalise over positions, not tokens")
    column_grad = grad.abs().sum(dim=(0, 2))
    checks.check(bool((column_grad[:prompt_len - 1] == 0).all()),
                 f"{what} depends on logits columns that predict prompt tokens: the prompt is not masked")
    checks.check(bool(column_grad[-1] == 0),
                 f"{what} depends on the last logits column, which predicts nothing in the row: column t predicts "
                 "the token in column t + 1", hint="use logits[:, :-1] (predictions) with ids[:, 1:]")
    checks.check_close(got, expected, what, atol=1e-5, rtol=1e-5,
                       hint="entry [b, j] is log_softmax(logits[b, prompt_len + j - 1])[ids[b, prompt_len + j]]")
    return got


def _response_logprobs_checks(exercise: Exercise, response_logprobs) -> None:
    # Two rows of a TinyLM batch with made-up logits: the chapter's row "<bos> 3 7 + 4 8 = | 8 5 <eos> <pad>", where
    # logits column t favours the token in column t + 1, and "<pad> <pad> <bos> 3 + 4 = | 7 <eos> <pad> <pad>" from a
    # model so sure of another token at one step that the token it wrote has probability about e^-200 there.
    ids = torch.stack([torch.cat([encode_prompt("37+48="), encode_response(85)]),
                       torch.cat([encode_prompt("3+4="), encode_response(7)])])  # (2, 11)
    logits = torch.randn(2, 11, VOCAB_SIZE, generator=torch.Generator().manual_seed(0))
    # column t favours token t+1
    logits[:, torch.arange(10)] += 4.0 * torch.nn.functional.one_hot(ids[:, 1:], VOCAB_SIZE)
    logits[1, PROMPT_LEN, (ids[1, PROMPT_LEN + 1] + 1) % VOCAB_SIZE] += 200.0  # sure of another token than <eos>
    with exercise.blocked():
        check_response_logprobs(response_logprobs, logits, ids, PROMPT_LEN)
        # any prompt length: the same rows with a 5-column prompt
        check_response_logprobs(response_logprobs, logits, ids, 5)


RESPONSE_LOGPROBS = Exercise("task1a", _response_logprobs_checks,
                             Shortcuts(library=(f"{LOGPROBS}:response_logprobs",)))


# --- Lab Task 1b: sequence_logprob -----------------------------------------------------------------------------

WHERE_HINT = "torch.where(mask.bool(), token_logprobs, torch.zeros_like(token_logprobs)), then sum over dim=-1"


def check_sequence_logprob(sequence_logprob, token_logprobs, mask):
    """Call the student's sequence_logprob and say which masking rule it breaks, if any."""
    what = "sequence_logprob(token_logprobs, mask)"
    if not token_logprobs.requires_grad:  # so that the check can see which tokens the answer counts
        token_logprobs = token_logprobs.detach().clone().requires_grad_(True)
    try:
        got = checks.call_student(sequence_logprob, token_logprobs, mask)
    except checks.StudentCodeRaised as error:  # torch.where refusing a float mask gets a hint
        if error.hint is None and "boolean" in error.problem:
            raise checks.StudentCodeRaised(error.problem, "the mask may come as floats or integers: use "
                                           "mask.bool() as the condition") from error.__cause__
        raise
    checks.check_type(got, torch.Tensor, what)
    batch, width = token_logprobs.shape
    checks.check(got.shape != (width,) or batch == width,
                 f"{what} has shape {tuple(got.shape)}: it summed over the batch (dim=0); sum each row over its "
                 "tokens (dim=-1)")
    checks.check(got.ndim != 0 or batch == 0,
                 f"{what} is one number for the whole batch; return one log-prob per row, shape (B,)",
                 hint="sum over the last axis only: .sum(dim=-1)")
    checks.check_shape(got, (batch,), what)
    values = got.detach().double()
    has_neginf = bool(torch.isneginf(token_logprobs).any())
    checks.check(not (torch.isnan(values).any() and has_neginf),
                 f"{what} contains NaN: the padding was masked by multiplying, and 0 x -inf = NaN",
                 hint=f"a padded position can hold -inf; select instead of multiplying: {WHERE_HINT}")
    keep = mask.bool()
    expected = torch.tensor([sum(float(v) for v, k in zip(row, row_keep) if k)
                             for row, row_keep in zip(token_logprobs.detach(), keep)], dtype=torch.float64)
    checks.check(not (torch.isneginf(values) & torch.isfinite(expected)).any(),
                 f"{what} is -inf for a row whose written tokens are all finite: the padding was not left out",
                 hint=WHERE_HINT)
    safe = torch.where(keep, token_logprobs.detach().double(), torch.zeros((), dtype=torch.float64))
    mean = safe.sum(dim=-1) / keep.sum(dim=-1).clamp(min=1)
    checks.check(not (torch.allclose(values, mean, atol=1e-5) and not torch.allclose(mean, expected, atol=1e-5)),
                 f"{what} is the mean of each row's log-probs: log pi(y | x) is their sum")
    with_padding = torch.where(torch.isfinite(token_logprobs.detach()), token_logprobs.detach(), 0.0).double().sum(-1)
    checks.check(not (torch.allclose(values, with_padding, atol=1e-5)
                      and not torch.allclose(with_padding, expected, atol=1e-5)),
                 f"{what} adds in the padding too: the padded log-probs were not left out", hint=WHERE_HINT)
    checks.check_close(got, expected, what, atol=1e-5,
                       hint="sum the log-probs of the tokens the model wrote (mask 1) and nothing else")
    checks.check(got.requires_grad, f"{what} carries no gradient: don't detach it or call .item(); the RL loss "
                 "backpropagates through it")
    # each written token gets gradient 1, each padded one 0 (never NaN)
    (grad,) = torch.autograd.grad(got.sum(), token_logprobs, retain_graph=True, allow_unused=True)
    grad = torch.zeros_like(token_logprobs) if grad is None else grad
    checks.check(not torch.isnan(grad).any(), f"the gradient of {what} is NaN at a padded position: masking by "
                 "multiplying (0 x -inf) poisons the gradient even if the value is repaired afterwards",
                 hint=WHERE_HINT)
    checks.check_close(grad, keep.double(), f"the gradient of {what}",
                       hint="each written token should get gradient 1, padding 0")
    return got


def _sequence_logprob_checks(exercise: Exercise, sequence_logprob) -> None:
    # Made-up token log-probs of two responses, "8 5 <eos> <pad>" and "7 <eos> <pad> <pad>". The first row's padding
    # holds -inf (a sampler that never writes <pad> before <eos> gives it probability 0), the second row's padding
    # holds finite junk.
    token_logprobs = torch.tensor([[-0.05, -0.7, -0.01, -math.inf],  # 8, 5, <eos>, <pad>
                                   [-0.4, -0.02, -2.3, -9.0]])      # 7, <eos>, <pad>, <pad>
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    with exercise.blocked():
        check_sequence_logprob(sequence_logprob, token_logprobs, mask)  # a float mask,
        check_sequence_logprob(sequence_logprob, token_logprobs, mask.bool())  # a boolean one,
        check_sequence_logprob(sequence_logprob, token_logprobs[:1], mask[:1].long())  # an integer one, a batch of one


SEQUENCE_LOGPROB = Exercise("task1b", _sequence_logprob_checks, Shortcuts(library=(f"{LOGPROBS}:sequence_logprob",)))

EXERCISES = (RESPONSE_LOGPROBS, SEQUENCE_LOGPROB)

__getattr__ = module_getattr(__name__)  # older copies' names of its exercises, and what it holds
