"""Typical wrong answers for 03_three_stages."""
from . import Kind, WrongAnswer

NOTEBOOK = "03_three_stages"
GRADIENTS = "ex11_1c__gradients"


def _rft(objective="torch.log_softmax(theta, dim=-1)[kept].mean()"):
    """The notebook's rft_gradient with its objective changed."""
    return f'''def rft_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    kept = samples[rewards > 0]
    if kept.numel() == 0:
        return torch.zeros_like(theta.detach())
    objective = {objective}
    (grad,) = torch.autograd.grad(objective, theta)
    return grad
'''


def _reinforce(weights="rewards.to(theta.dtype)", reduce="mean"):
    """The notebook's reinforce_gradient with its weights or its reduction changed."""
    return f'''

def reinforce_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    objective = ({weights} * torch.log_softmax(theta, dim=-1)[samples]).{reduce}()
    (grad,) = torch.autograd.grad(objective, theta)
    return grad
'''


WRONG_ANSWERS = [
    WrongAnswer(
        NOTEBOOK, GRADIENTS,
        '''def rft_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    objective = (rewards * torch.log_softmax(theta, dim=-1)[samples]).sum() / rewards.sum()
    (grad,) = torch.autograd.grad(objective, theta)
    return grad
''' + _reinforce(),
        "divides by k = rewards.sum() without handling k = 0: 0/0 makes the gradient NaN instead of zero",
        kind=Kind.PITFALL, names="k = 0",
    ),
    WrongAnswer(
        NOTEBOOK, GRADIENTS,
        '''def rft_gradient(logits, samples, rewards):
    logits.requires_grad_(True)
    kept = samples[rewards > 0]
    if kept.numel() == 0:
        return torch.zeros_like(logits)
    torch.log_softmax(logits, dim=-1)[kept].mean().backward()
    return logits.grad
''' + _reinforce(),
        "calls backward() on the caller's tensor: changes `logits` and accumulates .grad across calls",
        kind=Kind.PITFALL, names="work on a copy",
    ),
    WrongAnswer(
        NOTEBOOK, GRADIENTS,
        _rft("torch.log_softmax(theta, dim=-1)[kept].sum() / len(samples)") + _reinforce(),
        "divides the kept samples' sum by N instead of k: this is REINFORCE again, the k/N factor disappears",
        kind=Kind.PITFALL, names="not by N",
    ),
    WrongAnswer(
        NOTEBOOK, GRADIENTS,
        _rft() + _reinforce(reduce="sum"),
        "sums r_i grad log pi over the batch without dividing by N",
        kind=Kind.PITFALL, names="divide by N",
    ),
    WrongAnswer(
        NOTEBOOK, GRADIENTS,
        _rft("-torch.log_softmax(theta, dim=-1)[kept].mean()  # the loss") + _reinforce(),
        "returns the gradient of the loss (minus the objective): the opposite direction",
        kind=Kind.PITFALL, names="opposite way",
    ),
    WrongAnswer(
        NOTEBOOK, GRADIENTS,
        _rft() + _reinforce(weights="(rewards.to(theta.dtype) - rewards.mean())"),
        "subtracts the batch mean as a baseline: a different estimator from the plain REINFORCE asked for",
        kind=Kind.BREADTH,
    ),
]
