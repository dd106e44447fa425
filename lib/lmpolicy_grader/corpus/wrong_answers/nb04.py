"""Typical wrong answers for 04_two_mdp_views."""
from . import Kind, WrongAnswer

NOTEBOOK = "04_two_mdp_views"
BANDIT = "ex11_3a__answer"
TOKEN = "ex11_3b__answer"
CHAIN = "ex11_3c__answer"



def _bandit(first="torch.softmax(theta, dim=-1)", component=1):
    """The notebook's bandit_objective and grad_b_bandit, the first-token probabilities or the component changed."""
    return f'''def bandit_objective(theta, second_probs, rewards):
    first = {first}
    return (first[:, None] * second_probs * rewards).sum()


_theta = theta_ref.clone().requires_grad_(True)
(_grad,) = torch.autograd.grad(bandit_objective(_theta, second_probs, reward_table), _theta)
grad_b_bandit = _grad[{component}].item()
'''

# token_level_gradient as the notebook builds it, with the score (grad log pi(y1)) and the weight left open.
_TOKEN_LEVEL = '''def token_level_gradient(theta, second_probs, rewards, baseline=0.0):
    first = torch.softmax(theta.detach(), dim=-1)
    scores = {scores}
    weight = {weight}
    return (weight.sum(dim=1)[:, None] * scores).sum(dim=0)


grad_b_token = token_level_gradient(theta_ref, second_probs, reward_table)[{index}].item()
grad_b_token_baseline = token_level_gradient(theta_ref, second_probs, reward_table, 0.58)[{index}].item()
'''
_SCORES = "torch.eye(len(first), dtype=first.dtype) - first"
_WEIGHT = "first[:, None] * second_probs * (rewards - baseline)"

_KL_ROWS = '''def kl_rows(p, q):
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0)
    return terms.sum(axis=-1)


'''

WRONG_ANSWERS = [
    # 11.3(a)
    WrongAnswer(
        NOTEBOOK, BANDIT,
        _bandit(first="torch.exp(theta)"),
        "uses exp(theta) without normalising: right at theta_ref (where exp gives 0.7, 0.3), wrong gradient",
        kind=Kind.PITFALL, names="softmax(theta), not exp(theta)",
    ),
    WrongAnswer(
        NOTEBOOK, BANDIT,
        '''def bandit_objective(theta, second_probs, rewards):
    first = np.exp(theta.numpy()) / np.exp(theta.numpy()).sum()
    return torch.tensor((first[:, None] * second_probs.numpy() * rewards.numpy()).sum())


grad_b_bandit = 0.6 * 0.7 * 0.3
''',
        "computes J in numpy (autograd cannot differentiate it) and types in the chapter's gradient",
        kind=Kind.PITFALL, names="differentiable",
    ),
    WrongAnswer(
        NOTEBOOK, BANDIT,
        '''def bandit_objective(theta, second_probs, rewards):
    first = torch.tensor(np.exp(theta.detach().numpy()) / np.exp(theta.detach().numpy()).sum())
    return (first[:, None] * second_probs * rewards).sum()


grad_b_bandit = 0.6 * 0.7 * 0.3
''',
        "detaches theta to compute the softmax in numpy: J has the right value but no gradient",
        kind=Kind.PITFALL, names="not differentiable",
    ),
    WrongAnswer(
        NOTEBOOK, BANDIT,
        _bandit(component=0),
        "reads the theta_a component of the gradient (index 0) instead of theta_b",
        kind=Kind.PITFALL, names="index 0",
    ),
    # 11.3(b)
    WrongAnswer(
        NOTEBOOK, TOKEN,
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
        kind=Kind.PITFALL, names="not pi_ref",
    ),
    WrongAnswer(
        NOTEBOOK, TOKEN,
        _TOKEN_LEVEL.format(scores="torch.eye(len(first), dtype=first.dtype)", weight=_WEIGHT, index=1),
        "takes grad log pi(y1) = e_y1, forgetting the softmax's normaliser (e_y1 - pi)",
        kind=Kind.PITFALL, names="e_y1 - softmax(theta)",
    ),
    WrongAnswer(
        NOTEBOOK, TOKEN,
        _TOKEN_LEVEL.format(scores=_SCORES, weight="second_probs * (rewards - baseline)", index=1),
        "weights each response by pi(y2 | y1) only, leaving out the first token's probability",
        kind=Kind.PITFALL, names="softmax(theta)[y1]",
    ),
    WrongAnswer(
        NOTEBOOK, TOKEN,
        _TOKEN_LEVEL.format(scores=_SCORES, weight=_WEIGHT, index=0),
        "reads the theta_a component (index 0) instead of theta_b",
        kind=Kind.PITFALL, names="index 0",
    ),
    # 11.3(c)
    WrongAnswer(
        NOTEBOOK, CHAIN,
        '''def kl_chain_rule(p_first, p_second, q_first, q_second):
    first = np.sum(p_first * np.log(p_first / q_first))
    second = np.sum(p_second * np.log(p_second / q_second), axis=-1)
    return float(first + q_first @ second)


kl_pi_star = kl_chain_rule(pi_star.tables[0], pi_star.tables[1], toy.tables[0], toy.tables[1])
''',
        "weights the second-token KLs by the reference's first-token probabilities instead of the policy's",
        kind=Kind.PITFALL, names="p's own first-token probabilities",
    ),
    WrongAnswer(
        NOTEBOOK, CHAIN,
        '''def kl_chain_rule(p_first, p_second, q_first, q_second):
    first = np.sum(p_first * np.log(p_first / q_first))
    second = np.sum(p_second * np.log(p_second / q_second), axis=-1)
    return float(first + p_first @ second)


kl_pi_star = kl_chain_rule(pi_star.tables[0], pi_star.tables[1], toy.tables[0], toy.tables[1])
''',
        "does not treat 0 log 0 as 0: a token the policy never writes makes the KL NaN",
        kind=Kind.PITFALL, names="0 log 0",
    ),
    WrongAnswer(
        NOTEBOOK, CHAIN,
        _KL_ROWS + '''def kl_chain_rule(p_first, p_second, q_first, q_second):
    return float(np.asarray(p_first) @ kl_rows(p_second, q_second))


kl_pi_star = kl_chain_rule(pi_star.tables[0], pi_star.tables[1], toy.tables[0], toy.tables[1])
''',
        "leaves out the first-token KL: only the expected second-token part",
        kind=Kind.PITFALL, names="first-token KL",
    ),
    WrongAnswer(
        NOTEBOOK, CHAIN,
        _KL_ROWS + '''def kl_chain_rule(p_first, p_second, q_first, q_second):
    return float(kl_rows(p_first, q_first) + np.asarray(p_first) @ kl_rows(p_second, q_second))


kl_pi_star = kl_chain_rule(toy.tables[0], toy.tables[1], pi_star.tables[0], pi_star.tables[1])
''',
        "computes kl_pi_star the other way round, KL(pi_ref || pi*)",
        kind=Kind.PITFALL, names="in that order",
    ),
]
