"""Typical wrong answers for 03_three_stages."""
from . import Kind, WrongAnswer

NOTEBOOK = "03_three_stages"
GRADIENTS = ("ex11_1c__gradients", "ex11_1c")

_RFT = '''def rft_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    kept = samples[rewards > 0]
    if kept.numel() == 0:
        return torch.zeros_like(theta.detach())
    objective = torch.log_softmax(theta, dim=-1)[kept].mean()
    (grad,) = torch.autograd.grad(objective, theta)
    return grad
'''

_REINFORCE = '''

def reinforce_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    objective = (rewards.to(theta.dtype) * torch.log_softmax(theta, dim=-1)[samples]).mean()
    (grad,) = torch.autograd.grad(objective, theta)
    return grad
'''

WRONG_ANSWERS = [
    WrongAnswer(
        NOTEBOOK, *GRADIENTS,
        '''def rft_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    objective = (rewards * torch.log_softmax(theta, dim=-1)[samples]).sum() / rewards.sum()
    (grad,) = torch.autograd.grad(objective, theta)
    return grad
''' + _REINFORCE,
        "divides by k = rewards.sum() without handling k = 0: 0/0 makes the gradient NaN instead of zero",
        kind=Kind.PITFALL, names="k = 0",
    ),
    WrongAnswer(
        NOTEBOOK, *GRADIENTS,
        '''def rft_gradient(logits, samples, rewards):
    logits.requires_grad_(True)
    kept = samples[rewards > 0]
    if kept.numel() == 0:
        return torch.zeros_like(logits)
    torch.log_softmax(logits, dim=-1)[kept].mean().backward()
    return logits.grad
''' + _REINFORCE,
        "calls backward() on the caller's tensor: changes `logits` and accumulates .grad across calls",
        kind=Kind.PITFALL, names="work on a copy",
    ),
    WrongAnswer(
        NOTEBOOK, *GRADIENTS,
        '''def rft_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    kept = samples[rewards > 0]
    if kept.numel() == 0:
        return torch.zeros_like(theta.detach())
    objective = torch.log_softmax(theta, dim=-1)[kept].sum() / len(samples)
    (grad,) = torch.autograd.grad(objective, theta)
    return grad
''' + _REINFORCE,
        "divides the kept samples' sum by N instead of k: this is REINFORCE again, the k/N factor disappears",
        kind=Kind.PITFALL, names="not by N",
    ),
    WrongAnswer(
        NOTEBOOK, *GRADIENTS,
        _RFT + '''

def reinforce_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    objective = (rewards.to(theta.dtype) * torch.log_softmax(theta, dim=-1)[samples]).sum()
    (grad,) = torch.autograd.grad(objective, theta)
    return grad
''',
        "sums r_i grad log pi over the batch without dividing by N",
        kind=Kind.PITFALL, names="divide by N",
    ),
    WrongAnswer(
        NOTEBOOK, *GRADIENTS,
        '''def rft_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    kept = samples[rewards > 0]
    if kept.numel() == 0:
        return torch.zeros_like(theta.detach())
    loss = -torch.log_softmax(theta, dim=-1)[kept].mean()
    (grad,) = torch.autograd.grad(loss, theta)
    return grad
''' + _REINFORCE,
        "returns the gradient of the loss (minus the objective): the opposite direction",
        kind=Kind.PITFALL, names="opposite way",
    ),
    WrongAnswer(
        NOTEBOOK, *GRADIENTS,
        _RFT + '''

def reinforce_gradient(logits, samples, rewards):
    theta = logits.detach().clone().requires_grad_(True)
    weights = rewards.to(theta.dtype) - rewards.mean()
    objective = (weights * torch.log_softmax(theta, dim=-1)[samples]).mean()
    (grad,) = torch.autograd.grad(objective, theta)
    return grad
''',
        "subtracts the batch mean as a baseline: a different estimator from the plain REINFORCE asked for",
        kind=Kind.BREADTH,
    ),
]
