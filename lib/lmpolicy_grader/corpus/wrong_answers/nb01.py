"""Typical wrong answers for 01_policy_softmax."""
from . import Kind, WrongAnswer

NOTEBOOK = "01_policy_softmax"
SOFTMAX = "nb01_softmax__answer"
LOGPROB = "ex11_1a__sequence_logprob"
NUMBERS = "ex11_1a__numbers"

WRONG_ANSWERS = [
    # softmax
    WrongAnswer(
        NOTEBOOK, SOFTMAX,
        '''def softmax(logits, dim=-1):
    weights = torch.exp(logits)
    return weights / weights.sum(dim=dim, keepdim=True)
''',
        "the formula as written, without subtracting the maximum: exp overflows for logits near 1000 (NaN)",
        kind=Kind.PITFALL, names="subtract the maximum",
    ),
    WrongAnswer(
        NOTEBOOK, SOFTMAX,
        '''def softmax(logits, dim=-1):
    weights = torch.exp(logits - logits.max())
    return weights / weights.sum()
''',
        "normalises over the whole tensor instead of along `dim`: right for one vector, wrong for a batch",
        kind=Kind.PITFALL, names="normalise along `dim`",
    ),
    WrongAnswer(
        NOTEBOOK, SOFTMAX,
        '''def softmax(logits, dim=-1):
    weights = torch.exp(logits - logits.max(dim=-1, keepdim=True).values)
    return weights / weights.sum(dim=-1, keepdim=True)
''',
        "ignores the `dim` argument and always normalises the last dimension",
        kind=Kind.PITFALL, names="normalise along `dim`",
    ),
    WrongAnswer(
        NOTEBOOK, SOFTMAX,
        '''def softmax(logits, dim=-1):
    weights = torch.exp(logits - logits.max(dim=dim).values)
    return weights / weights.sum(dim=dim)
''',
        "reduces without keepdim=True: fine for one vector, a broadcasting error (or a wrong answer) for a batch",
        kind=Kind.PITFALL, names="keepdim=True",
    ),
    WrongAnswer(
        NOTEBOOK, SOFTMAX,
        '''def softmax(logits, dim=-1):
    weights = torch.exp(logits - logits.mean(dim=dim, keepdim=True))
    return weights / weights.sum(dim=dim, keepdim=True)
''',
        "shifts by the mean instead of the maximum: with a logit of -inf the mean is -inf and the result NaN",
        kind=Kind.PITFALL, names="-inf",
    ),
    WrongAnswer(
        NOTEBOOK, SOFTMAX,
        '''def softmax(logits, dim=-1):
    return logits.softmax(dim=dim)
''',
        "calls torch's own softmax (as a tensor method) instead of writing it",
        kind=Kind.PITFALL, names="library softmax",
    ),
    WrongAnswer(
        NOTEBOOK, SOFTMAX,
        '''def softmax(logits, dim=-1):
    return torch.softmax(logits, dim=dim)
''',
        "calls torch.softmax instead of writing it",
        kind=Kind.PITFALL, names="library softmax",
    ),
    WrongAnswer(
        NOTEBOOK, SOFTMAX,
        '''from torch.nn.functional import softmax as torch_softmax


def softmax(logits, dim=-1):
    return torch_softmax(logits, dim=dim)
''',
        "calls torch.nn.functional.softmax under another name instead of writing it",
        kind=Kind.PITFALL, names="gets no credit",
    ),
    WrongAnswer(
        NOTEBOOK, SOFTMAX,
        '''def softmax(logits, dim=-1):
    return torch.exp(torch.log_softmax(logits, dim=dim))
''',
        "takes exp of torch.log_softmax: the library's softmax again",
        kind=Kind.PITFALL, names="library softmax",
    ),
    # 11.1(a): sequence_logprob
    WrongAnswer(
        NOTEBOOK, LOGPROB,
        '''def sequence_logprob(token_probs):
    return torch.log(torch.prod(token_probs, dim=-1))
''',
        "multiplies the probabilities first: the product of 1000 tokens underflows to 0 in float32, log gives -inf",
        kind=Kind.PITFALL, names="underflows",
    ),
    WrongAnswer(
        NOTEBOOK, LOGPROB,
        '''def sequence_logprob(token_probs):
    return torch.log(token_probs + 1e-10).sum(dim=-1)
''',
        "adds an epsilon inside the log: a token of probability 0 gives a finite log-prob instead of -inf",
        kind=Kind.PITFALL, names="-inf",
    ),
    WrongAnswer(
        NOTEBOOK, LOGPROB,
        '''def sequence_logprob(token_probs):
    return torch.log(token_probs).sum()
''',
        "sums over every dimension: a batch of responses gets one number instead of one log-prob each",
        kind=Kind.PITFALL, names="last dimension",
    ),
    # 11.1(a): the numbers
    WrongAnswer(
        NOTEBOOK, NUMBERS,
        '''prob_86 = math.prod(token_probs_86)
logprob_86 = math.log10(prob_86)
main_contributor = "6"
''',
        "uses the base-10 logarithm; log-probs are natural logs",
        kind=Kind.PITFALL, names="natural log",
    ),
    WrongAnswer(
        NOTEBOOK, NUMBERS,
        '''prob_86 = math.prod(token_probs_86)
logprob_86 = math.log(prob_86)
main_contributor = "<eos>"
''',
        "picks the last token as the main contributor; the least likely token (6) dominates the log-prob",
        kind=Kind.BREADTH,  # a visible check on it would give the answer away among three choices
    ),
]
