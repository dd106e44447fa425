"""Typical wrong answers for 06_kl_estimators."""
from . import WrongAnswer

NOTEBOOK = "06_kl_estimators"


def _gradients_answer(weights: str, verdicts: tuple[str, str, str]) -> str:
    """An 11.6(c) answer cell whose sampling weights are ``weights`` and whose three verdicts are ``verdicts``."""
    return f'''def expected_estimator_gradients(theta, ref_probs):
    gradients = []
    for which in range(3):
        t = theta.detach().clone().requires_grad_(True)
        logp = torch.log_softmax(t, dim=-1)
        log_ratio = logp - ref_probs.log()
        per_token = (log_ratio, 0.5 * log_ratio ** 2, torch.exp(-log_ratio) - 1 + log_ratio)[which]
        gradients.append(torch.autograd.grad(({weights} * per_token).sum(), t)[0])
    return tuple(gradients)
{_GRADIENT_FUNCTIONS}
k1_loss_gives, k2_loss_gives, k3_loss_gives = {verdicts!r}
'''


_GRADIENT_FUNCTIONS = '''
def reverse_kl_gradient(theta, ref_probs):
    t = theta.detach().clone().requires_grad_(True)
    logp = torch.log_softmax(t, dim=-1)
    return torch.autograd.grad((logp.exp() * (logp - ref_probs.log())).sum(), t)[0]


def forward_kl_gradient(theta, ref_probs):
    t = theta.detach().clone().requires_grad_(True)
    logp = torch.log_softmax(t, dim=-1)
    return torch.autograd.grad((ref_probs * (ref_probs.log() - logp)).sum(), t)[0]
'''

WRONG_ANSWERS = [
    WrongAnswer(
        NOTEBOOK, "task3__kl_estimators", "task3",
        '''def kl_estimators(logp, ref_logp):
    log_ratio = logp - ref_logp
    return log_ratio, 0.5 * log_ratio ** 2, torch.exp(log_ratio) - 1 - log_ratio
''',
        "k3 with the ratio upside down: u = pi_theta / pi_ref instead of pi_ref / pi_theta",
    ),
    WrongAnswer(
        NOTEBOOK, "task3__kl_estimators", "task3",
        '''def kl_estimators(logp, ref_logp):
    log_ratio = (logp - ref_logp).detach()
    return log_ratio, 0.5 * log_ratio ** 2, torch.exp(-log_ratio) - 1 + log_ratio
''',
        "right values, but detached: no gradient can flow through the estimators",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_4c__answer", "ex11_4c",
        '''kl_exact = 0.99 * np.log(0.99 / 0.5) + 0.01 * np.log(0.01 / 0.5)
k1_common, k1_rare = np.log(0.99 / 0.5), np.log(0.01 / 0.5)
k3_common, k3_rare = 0.5 / 0.99 - 1 - k1_common, 0.5 / 0.01 - 1 - k1_rare
std_k1 = float(np.sqrt(0.99 * 0.01) * (k1_common - k1_rare))
std_k3 = float(np.sqrt(0.99 * 0.01) * (k3_rare - k3_common))
''',
        "k3 = u - 1 - l instead of u - 1 + l (the sign of the log term)",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_4c__answer", "ex11_4c",
        '''p_sharp, log_ratio = np.array([0.99, 0.01]), np.log(np.array([0.99, 0.01]) / 0.5)
k1_common, k1_rare = log_ratio
k3_common, k3_rare = np.exp(-log_ratio) - 1 + log_ratio
kl_exact = float(p_sharp @ log_ratio)
std_k1 = float(np.sqrt(p_sharp @ log_ratio ** 2))
std_k3 = float(np.sqrt(p_sharp @ np.array([k3_common, k3_rare]) ** 2))
''',
        "root mean square instead of standard deviation (the mean is not subtracted); the values pass the visible checks",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_4d__answer", "ex11_4d",
        '''p_no_rare = 1 - 0.99 ** 16
u_common, u_rare = 0.5 / 0.99, 0.5 / 0.01
k1_estimate_none = -np.log(u_common)
k3_estimate_none = u_common - 1 - np.log(u_common)
k3_estimate_one = (15 * k3_estimate_none + (u_rare - 1 - np.log(u_rare))) / 16
''',
        "the probability of at least one rare token instead of none",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_6c__answer", "ex11_6c",
        _gradients_answer("logp.exp()", ("reverse KL", "reverse KL", "reverse KL")),
        "differentiates through the sampling weights too: that is the gradient of E[k], not E[grad k]",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_6c__answer", "ex11_6c",
        _gradients_answer("logp.exp().detach()", ("zero", "reverse KL", "reverse KL")),
        "right gradients, but believes k3 in the loss differentiates the reverse KL (GRPO's pitfall)",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9d__answer", "ex11_9d",
        '''fraction_k3_below_kl = 0.5
smallest_std = "k3"
smaller_std_of_k1_k3 = "k3"
''',
        "assumes an unbiased estimator is below the truth half of the time, and that k3 always has the least spread",
    ),
]
