"""Typical wrong answers for 02_temperature."""
from . import Kind, WrongAnswer

NOTEBOOK = "02_temperature"
SAMPLER = "task2__sample_with_temperature"
TOP_K = "nb02_top_k__answer"
TOP_P = "nb02_top_p__answer"

_ENTROPY = '''def entropy(logits, kappa):
    log_probs = torch.log_softmax(kappa * logits.double(), dim=-1)
    return -(log_probs.exp() * log_probs).sum()
'''

# The nucleus as the notebook builds it, with the line deciding which sorted tokens to drop left open.
_TOP_P = '''def top_p_filter(logits, p):
    probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
    {drop}
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))
'''


def _sampler(greedy="logits.argmax(dim=-1)", probs="torch.softmax(logits / temperature, dim=-1)",
             draw="torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)"):
    """The notebook's sampler with one of its three lines (greedy branch, probabilities, draw) changed."""
    branch = f"    if temperature == 0:\n        return {greedy}\n" if greedy else ""
    return f"def sample_with_temperature(logits, temperature, generator=None):\n{branch}    probs = {probs}\n    return {draw}\n"


WRONG_ANSWERS = [
    # Lab Task 2: sample_with_temperature
    WrongAnswer(
        NOTEBOOK, SAMPLER,
        _sampler(probs="torch.softmax(logits * temperature, dim=-1)"),
        "multiplies the logits by the temperature instead of dividing: right at T = 1 only",
        kind=Kind.PITFALL, names="divide the logits by the temperature",
    ),
    WrongAnswer(
        NOTEBOOK, SAMPLER,
        _sampler(draw="torch.multinomial(probs, num_samples=1).squeeze(-1)"),
        "ignores the generator: the samples are not reproducible from a seed",
        kind=Kind.PITFALL, names="ignores its `generator`",
    ),
    WrongAnswer(
        NOTEBOOK, SAMPLER,
        _sampler(draw="torch.multinomial(probs, num_samples=1, generator=torch.Generator().manual_seed(0)).squeeze(-1)"),
        "seeds a generator of its own instead of drawing from the one it is given",
        kind=Kind.PITFALL, names="does not draw from the `generator`",
    ),
    WrongAnswer(
        NOTEBOOK, SAMPLER,
        _sampler(greedy=None),
        "no special case for T = 0: logits / 0 gives inf and NaN, and torch.multinomial raises",
        kind=Kind.PITFALL, names="greedy",
    ),
    WrongAnswer(
        NOTEBOOK, SAMPLER,
        _sampler(greedy="logits.argmax()"),
        "greedy with argmax() over the whole batch: one index into the flattened tensor instead of one per row",
        kind=Kind.PITFALL, names="one token id per row",
    ),
    WrongAnswer(
        NOTEBOOK, SAMPLER,
        _sampler(draw="torch.multinomial(probs, num_samples=1, generator=generator)"),
        "forgets to squeeze: torch.multinomial returns shape (B, 1), not (B,)",
        kind=Kind.PITFALL, names="one token id per row",
    ),
    WrongAnswer(
        NOTEBOOK, SAMPLER,
        _sampler(probs="torch.exp(logits / temperature) / torch.exp(logits / temperature).sum(-1, keepdim=True)"),
        "an unstable softmax: exp(logits / T) overflows for small temperatures",
        kind=Kind.PITFALL, names="exp overflows",
    ),
    # top-k
    WrongAnswer(
        NOTEBOOK, TOP_K,
        '''def top_k_filter(logits, k):
    kth_largest = logits.topk(k, dim=-1).values[-1]
    return logits.masked_fill(logits < kth_largest, float("-inf"))
''',
        "takes the k-th largest of the last row ([-1]) instead of each row's ([..., -1:]): right for one vector only",
        kind=Kind.PITFALL, names="its own k-th largest",
    ),
    WrongAnswer(
        NOTEBOOK, TOP_K,
        '''def top_k_filter(logits, k):
    keep = logits.topk(min(k, logits.shape[-1]), dim=-1).indices
    filtered = torch.full_like(logits, float("-inf"))
    return filtered.scatter(-1, keep, logits.gather(-1, keep))
''',
        "keeps exactly k indices: of two logits tied with the k-th largest, one is cut",
        kind=Kind.PITFALL, names="ties",
    ),
    WrongAnswer(
        NOTEBOOK, TOP_K,
        '''def top_k_filter(logits, k):
    if k >= logits.shape[-1]:
        return logits.clone()
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth_largest, 0.0)
''',
        "sets the cut logits to 0 instead of -inf: they keep a positive probability after the softmax",
        kind=Kind.PITFALL, names="-inf",
    ),
    WrongAnswer(
        NOTEBOOK, TOP_K,
        '''def top_k_filter(logits, k):
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth_largest, float("-inf"))
''',
        "forgets the case k >= V: logits.topk(k) raises when k exceeds the vocabulary",
        kind=Kind.PITFALL, names="nothing is cut",
    ),
    WrongAnswer(
        NOTEBOOK, TOP_K,
        '''def top_k_filter(logits, k):
    if k >= logits.shape[-1]:
        return logits
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]
    logits[logits < kth_largest] = float("-inf")
    return logits
''',
        "cuts the logits in place: the caller's tensor is changed",
        kind=Kind.PITFALL, names="modified its input",
    ),
    # top-p
    WrongAnswer(
        NOTEBOOK, TOP_P,
        '''def top_p_filter(logits, p):
    probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
    drop = (probs.cumsum(dim=-1) - probs) >= p
    sorted_logits = logits.gather(-1, order)
    return sorted_logits.masked_fill(drop, float("-inf"))
''',
        "returns the logits in sorted order: forgets to put the tokens back in their positions",
        kind=Kind.PITFALL, names="original positions",
    ),
    WrongAnswer(
        NOTEBOOK, TOP_P,
        _TOP_P.format(drop="drop_sorted = probs.cumsum(dim=-1) > p"),
        "drops the token that crosses p, so the nucleus holds less than p (and nothing at all when p is small)",
        kind=Kind.PITFALL, names="always kept",
    ),
    WrongAnswer(
        NOTEBOOK, TOP_P,
        _TOP_P.format(drop="drop_sorted = probs.cumsum(dim=-1) > p\n    drop_sorted[..., 0] = False"),
        "keeps the most likely token but drops the one that crosses p: the nucleus holds less than p",
        kind=Kind.PITFALL, names="crosses p",
    ),
    WrongAnswer(
        NOTEBOOK, TOP_P,
        '''def top_p_filter(logits, p):
    probs, order = logits.exp().sort(dim=-1, descending=True)
    drop_sorted = probs.cumsum(dim=-1) - probs >= p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))
''',
        "takes exp(logits) as the probabilities without normalising: right only for logits that are log-probs",
        kind=Kind.PITFALL, names="softmax",
    ),
    WrongAnswer(
        NOTEBOOK, TOP_P,
        _TOP_P.replace('float("-inf")', "-1e9").format(drop="drop_sorted = probs.cumsum(dim=-1) - probs >= p"),
        "sets the cut logits to -1e9 instead of -inf",
        kind=Kind.PITFALL, names="-inf",
    ),
    # 11.2(b)
    WrongAnswer(
        NOTEBOOK, "ex11_2b__answer",
        "temperature_at_target = 0.334\n",
        "copies the chapter's rounded 0.334 instead of computing the temperature",
        kind=Kind.PITFALL, names="rounded",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_2b__answer",
        '''u = (-1 + math.sqrt(1 + 4 * (1 / my_target - 1))) / 2
temperature_at_target = -math.log(u) / (my_logits[0] - my_logits[1])
''',
        "solves for u = exp(-kappa) and reports kappa = 1/T instead of the temperature",
        kind=Kind.PITFALL, names="kappa",
    ),
    # 11.2(c)
    WrongAnswer(
        NOTEBOOK, "ex11_2c__entropy_slope",
        _ENTROPY + '''

def entropy_slope(logits, kappa):
    T = torch.tensor(1 / kappa, dtype=torch.float64, requires_grad=True)
    (slope,) = torch.autograd.grad(entropy(logits, 1 / T), T)
    return slope.item()
''',
        "differentiates with respect to T instead of kappa = 1/T (dH/dT has the opposite sign)",
        kind=Kind.PITFALL, names="not T",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_2c__entropy_slope",
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
        kind=Kind.PITFALL, names="log_softmax",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_2c__entropy_slope",
        _ENTROPY + '''

def entropy_slope(logits, kappa):
    probs = torch.softmax(kappa * logits, dim=-1)
    mean = (probs * logits).sum()
    return (-kappa * (probs * (logits - mean) ** 2).sum()).item()
''',
        "evaluates the derived formula -kappa Var(z) instead of differentiating entropy() by autograd",
        kind=Kind.PITFALL, names="autograd",
    ),
]
