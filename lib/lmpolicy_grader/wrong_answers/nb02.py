"""Typical wrong answers for 02_temperature."""
from . import WrongAnswer

NOTEBOOK = "02_temperature"

_ENTROPY = '''def entropy(logits, kappa):
    log_probs = torch.log_softmax(kappa * logits.double(), dim=-1)
    return -(log_probs.exp() * log_probs).sum()
'''

WRONG_ANSWERS = [
    WrongAnswer(
        NOTEBOOK, "task2__sample_with_temperature", "task2",
        '''def sample_with_temperature(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits * temperature, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)
''',
        "multiplies the logits by the temperature instead of dividing: right at T = 1 only",
    ),
    WrongAnswer(
        NOTEBOOK, "task2__sample_with_temperature", "task2",
        '''def sample_with_temperature(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, num_samples=1).squeeze(-1)
''',
        "ignores the generator: the samples are not reproducible from a seed",
    ),
    WrongAnswer(
        NOTEBOOK, "task2__sample_with_temperature", "task2",
        '''def sample_with_temperature(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    weights = torch.exp(logits / temperature)
    return torch.multinomial(weights / weights.sum(-1, keepdim=True), 1, generator=generator).squeeze(-1)
''',
        "an unstable softmax: exp(logits / T) overflows for small temperatures",
    ),
    WrongAnswer(
        NOTEBOOK, "nb02_top_k__answer", "nb02_top_k",
        '''def top_k_filter(logits, k):
    kth_largest = logits.topk(k, dim=-1).values[-1]
    return logits.masked_fill(logits < kth_largest, float("-inf"))
''',
        "takes the k-th largest of the last row ([-1]) instead of each row's ([..., -1:]): right for one vector only",
    ),
    WrongAnswer(
        NOTEBOOK, "nb02_top_p__answer", "nb02_top_p",
        '''def top_p_filter(logits, p):
    probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
    drop = (probs.cumsum(dim=-1) - probs) >= p
    sorted_logits = logits.gather(-1, order)
    return sorted_logits.masked_fill(drop, float("-inf"))
''',
        "returns the logits in sorted order: forgets to put the tokens back in their positions",
    ),
    WrongAnswer(
        NOTEBOOK, "nb02_top_p__answer", "nb02_top_p",
        '''def top_p_filter(logits, p):
    probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
    drop_sorted = probs.cumsum(dim=-1) > p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))
''',
        "drops the token that crosses p, so the nucleus holds less than p (and nothing at all when p is small)",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_2b__answer", "ex11_2b",
        "temperature_095 = 0.334\n",
        "copies the chapter's rounded 0.334 instead of computing the temperature",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_2c__entropy_slope", "ex11_2c",
        _ENTROPY + '''

def entropy_slope(logits, kappa):
    T = torch.tensor(1 / kappa, dtype=torch.float64, requires_grad=True)
    (slope,) = torch.autograd.grad(entropy(logits, 1 / T), T)
    return slope.item()
''',
        "differentiates with respect to T instead of kappa = 1/T (dH/dT has the opposite sign)",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_2c__entropy_slope", "ex11_2c",
        '''def entropy(logits, kappa):
    weights = torch.exp(kappa * logits)
    probs = weights / weights.sum()
    return -(probs * torch.log(probs)).sum()


def entropy_slope(logits, kappa):
    kappa = torch.tensor(float(kappa), dtype=torch.float64, requires_grad=True)
    (slope,) = torch.autograd.grad(entropy(logits, kappa), kappa)
    return slope.item()
''',
        "an unstable softmax inside the entropy: exp overflows for widely spread logits (NaN)",
    ),
]
