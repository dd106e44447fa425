"""Typical wrong answers for 01_policy_softmax."""
from . import WrongAnswer

NOTEBOOK = "01_policy_softmax"

WRONG_ANSWERS = [
    WrongAnswer(
        NOTEBOOK, "nb01_softmax__answer", "nb01_softmax",
        '''def softmax(logits, dim=-1):
    weights = torch.exp(logits)
    return weights / weights.sum(dim=dim, keepdim=True)
''',
        "the formula as written, without subtracting the maximum: exp overflows for logits near 1000 (NaN)",
    ),
    WrongAnswer(
        NOTEBOOK, "nb01_softmax__answer", "nb01_softmax",
        '''def softmax(logits, dim=-1):
    weights = torch.exp(logits - logits.max())
    return weights / weights.sum()
''',
        "normalises over the whole tensor instead of along `dim`: right for one vector, wrong for a batch",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_1a__sequence_logprob", "ex11_1a",
        '''def sequence_logprob(token_probs):
    return torch.log(torch.prod(token_probs, dim=-1))
''',
        "multiplies the probabilities first: the product of 1000 tokens underflows to 0 in float32, log gives -inf",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_1a__numbers", "ex11_1a",
        '''prob_86 = 0.665 * 0.08 * 0.97
logprob_86 = math.log10(prob_86)
main_contributor = "6"
''',
        "uses the base-10 logarithm; log-probs are natural logs",
    ),
]

WRONG_ANSWERS.append(WrongAnswer(
    NOTEBOOK, "ex11_1a__numbers", "ex11_1a",
    '''prob_86 = 0.665 * 0.08 * 0.97
logprob_86 = math.log(prob_86)
main_contributor = "<eos>"
''',
    "picks the last token as the main contributor; the least likely token (6) dominates the log-prob",
))

WRONG_ANSWERS.append(WrongAnswer(
    NOTEBOOK, "nb01_softmax__answer", "nb01_softmax",
    '''def softmax(logits, dim=-1):
    return logits.softmax(dim=dim)
''',
    "calls torch's own softmax (as a tensor method) instead of writing it",
))
