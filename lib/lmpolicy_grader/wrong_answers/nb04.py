"""Typical wrong answers for 04_two_mdp_views."""
from . import WrongAnswer

NOTEBOOK = "04_two_mdp_views"

WRONG_ANSWERS = [
    WrongAnswer(
        NOTEBOOK, "ex11_3a__answer", "ex11_3a",
        '''def bandit_objective(theta, second_probs, rewards):
    first = torch.exp(theta)
    return (first[:, None] * second_probs * rewards).sum()


_theta = theta_ref.clone().requires_grad_(True)
(_grad,) = torch.autograd.grad(bandit_objective(_theta, second_probs, reward_table), _theta)
grad_b_bandit = _grad[1].item()
''',
        "uses exp(theta) without normalising: right at theta_ref (where exp gives 0.7, 0.3), wrong gradient",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_3a__answer", "ex11_3a",
        '''def bandit_objective(theta, second_probs, rewards):
    first = np.exp(theta.numpy()) / np.exp(theta.numpy()).sum()
    return torch.tensor((first[:, None] * second_probs.numpy() * rewards.numpy()).sum())


grad_b_bandit = 0.6 * 0.7 * 0.3
''',
        "computes J in numpy (autograd cannot differentiate it) and types in the chapter's gradient",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_3b__answer", "ex11_3b",
        '''def token_level_gradient(theta, second_probs, rewards, baseline=0.0):
    first = torch.softmax(theta.detach(), dim=-1)
    reference = torch.tensor([0.7, 0.3], dtype=first.dtype) if len(first) == 2 else torch.full_like(first, 1 / len(first))
    scores = torch.eye(len(first), dtype=first.dtype) - first
    weight = reference[:, None] * second_probs * (rewards - baseline)
    return (weight.sum(dim=1)[:, None] * scores).sum(dim=0)


grad_b_token = token_level_gradient(theta_ref, second_probs, reward_table)[1].item()
grad_b_token_baseline = token_level_gradient(theta_ref, second_probs, reward_table, 0.58)[1].item()
''',
        "weights the responses by the reference's probabilities instead of pi_theta's: right only at theta_ref",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_3c__answer", "ex11_3c",
        '''def kl_chain_rule(p_first, p_second, q_first, q_second):
    first = np.sum(p_first * np.log(p_first / q_first))
    second = np.sum(p_second * np.log(p_second / q_second), axis=-1)
    return float(first + q_first @ second)


kl_pi_star = kl_chain_rule(pi_star.tables[0], pi_star.tables[1], toy.tables[0], toy.tables[1])
''',
        "weights the second-token KLs by the reference's first-token probabilities instead of the policy's",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_3c__answer", "ex11_3c",
        '''def kl_chain_rule(p_first, p_second, q_first, q_second):
    first = np.sum(p_first * np.log(p_first / q_first))
    second = np.sum(p_second * np.log(p_second / q_second), axis=-1)
    return float(first + p_first @ second)


kl_pi_star = kl_chain_rule(pi_star.tables[0], pi_star.tables[1], toy.tables[0], toy.tables[1])
''',
        "does not treat 0 log 0 as 0: a token the policy never writes makes the KL NaN",
    ),
]
