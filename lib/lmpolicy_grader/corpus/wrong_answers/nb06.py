"""Typical wrong answers for 06_kl_estimators."""
from . import DEMO_MESSAGE, Kind, WrongAnswer

NOTEBOOK = "06_kl_estimators"


def _estimators_answer(k1: str, k2: str, k3: str) -> str:
    """A Task 3 answer cell returning the three expressions, written with log_ratio = logp - ref_logp."""
    return f'''def kl_estimators(logp, ref_logp):
    log_ratio = logp - ref_logp
    return {k1}, {k2}, {k3}
'''


def _sharp_answer(log_ratio: str, k3: str, std: str) -> str:
    """An 11.4(c) answer cell with the log-ratio, the k3 values and the standard deviations written as given."""
    return f'''p_sharp = p_theta_4
log_ratio = {log_ratio}
k1_common, k1_rare = log_ratio
k3_common, k3_rare = {k3}
kl_exact = float(p_sharp @ log_ratio)
k3_values = np.array([k3_common, k3_rare])
std_k1 = float({std.format(values="log_ratio")})
std_k3 = float({std.format(values="k3_values")})
'''


_STD = "np.sqrt(p_sharp @ ({values} - p_sharp @ {values}) ** 2)"


def _batch_answer(p_no_rare: str = "p_theta_4[0] ** 16", k1_none: str = "-np.log(u_common)",
                  k3_one: str = "(15 * k3_estimate_none + (u_rare - 1 - np.log(u_rare))) / 16") -> str:
    """An 11.4(d) answer cell with the three given expressions (the k3 estimate without rare tokens is right)."""
    return f'''p_no_rare = {p_no_rare}
u_common, u_rare = p_ref_4 / p_theta_4
k1_estimate_none = {k1_none}
k3_estimate_none = u_common - 1 - np.log(u_common)
k3_estimate_one = {k3_one}
'''


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
    # --- Lab Task 3 ----------------------------------------------------------------------------------
    WrongAnswer(
        NOTEBOOK, "task3__kl_estimators",
        _estimators_answer("log_ratio", "0.5 * log_ratio ** 2", "torch.exp(log_ratio) - 1 - log_ratio"),
        "k3 with the ratio upside down: u = pi_theta / pi_ref instead of pi_ref / pi_theta",
        kind=Kind.PITFALL, names="ratio upside down",
    ),
    WrongAnswer(
        NOTEBOOK, "task3__kl_estimators",
        '''def kl_estimators(logp, ref_logp):
    log_ratio = (logp - ref_logp).detach()
    return log_ratio, 0.5 * log_ratio ** 2, torch.exp(-log_ratio) - 1 + log_ratio
''',
        "right values, but detached: no gradient can flow through the estimators",
        kind=Kind.PITFALL, names="carries no gradient",
    ),
    WrongAnswer(
        NOTEBOOK, "task3__kl_estimators",
        _estimators_answer("log_ratio", "log_ratio ** 2", "torch.exp(-log_ratio) - 1 + log_ratio"),
        "k2 without its factor 1/2",
        kind=Kind.PITFALL, names="factor 1/2",
    ),
    WrongAnswer(
        NOTEBOOK, "task3__kl_estimators",
        _estimators_answer("ref_logp - logp", "0.5 * log_ratio ** 2", "torch.exp(-log_ratio) - 1 + log_ratio"),
        "k1 with the log-ratio the wrong way round, log pi_ref - log pi_theta",
        kind=Kind.PITFALL, names="wrong sign: l = log pi_theta - log pi_ref",
    ),
    WrongAnswer(
        NOTEBOOK, "task3__kl_estimators",
        _estimators_answer("log_ratio", "0.5 * log_ratio ** 2", "torch.exp(-log_ratio) - 1 - log_ratio"),
        "k3 = u - 1 + log u: the log term with the wrong sign (k3 can then be negative)",
        kind=Kind.PITFALL, names="wrong sign on the log term",
    ),
    # --- Exercise 11.4(c), (d) -----------------------------------------------------------------------
    WrongAnswer(
        NOTEBOOK, "ex11_4c__answer",
        '''kl_exact = float(p_theta_4 @ np.log(p_theta_4 / p_ref_4))
k1_common, k1_rare = np.log(p_theta_4 / p_ref_4)
k3_common, k3_rare = p_ref_4 / p_theta_4 - 1 - np.log(p_theta_4 / p_ref_4)
std_k1 = float(np.sqrt(p_theta_4.prod()) * (k1_common - k1_rare))
std_k3 = float(np.sqrt(p_theta_4.prod()) * (k3_rare - k3_common))
''',
        "k3 = u - 1 - l instead of u - 1 + l (the sign of the log term)",
        kind=Kind.PITFALL, names="wrong sign on the log term",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_4c__answer",
        _sharp_answer("np.log(p_sharp / p_ref_4)", "np.exp(-log_ratio) - 1 + log_ratio", "np.sqrt(p_sharp @ {values} ** 2)"),
        "root mean square instead of standard deviation (the mean is not subtracted)",
        kind=Kind.PITFALL, names="subtract the mean",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_4c__answer",
        _sharp_answer("np.log(p_ref_4 / p_sharp)", "np.exp(-log_ratio) - 1 + log_ratio", _STD),
        "the log-ratio upside down, log(pi_ref / pi_theta): the 'KL' comes out negative",
        kind=Kind.PITFALL, names="a KL is never negative",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_4c__answer",
        _sharp_answer("np.log10(p_sharp / p_ref_4)", "p_ref_4 / p_sharp - 1 + log_ratio", _STD),
        "base-10 logs, with u = pi_ref / pi_theta computed directly",
        kind=Kind.PITFALL, names="natural log",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_4d__answer",
        _batch_answer(p_no_rare="1 - p_theta_4[0] ** 16"),
        "the probability of at least one rare token instead of none",
        kind=Kind.PITFALL, names="at least one",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_4d__answer",
        _batch_answer(k3_one="15 * k3_estimate_none + (u_rare - 1 - np.log(u_rare))"),
        "the batch's sum instead of its mean when one rare token appears",
        kind=Kind.PITFALL, names="mean of its 16",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_4d__answer",
        _batch_answer(k1_none="p_theta_4 @ -np.log(p_ref_4 / p_theta_4)"),
        "the k1 estimate of a batch without rare tokens taken as the exact KL",
        kind=Kind.BREADTH,
    ),
    # --- Exercise 11.6(c) ----------------------------------------------------------------------------
    WrongAnswer(
        NOTEBOOK, "ex11_6c__answer",
        _gradients_answer("logp.exp()", ("reverse KL", "reverse KL", "reverse KL")),
        "differentiates through the sampling weights too: that is the gradient of E[k], not E[grad k]",
        kind=Kind.PITFALL, names="weights pi_theta(y) held fixed",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_6c__answer",
        _gradients_answer("logp.exp().detach()", ("zero", "reverse KL", "reverse KL")),
        "right gradients, but believes k3 in the loss differentiates the reverse KL (GRPO's pitfall)",
        kind=Kind.PITFALL, names="what your own gradients show",
    ),
    # --- Exercise 11.9(d) ----------------------------------------------------------------------------
    # what a student reads off the demo and types in (the chapter's reference at the far left: no student id)
    WrongAnswer(
        NOTEBOOK, "ex11_9d__answer",
        '''true_kl = 0.2166
fraction_k3_below_kl = 0.5
smallest_std = "k3"
smaller_std_of_k1_k3 = "k3"
''',
        "assumes an unbiased estimator is below the truth half of the time, and that k3 always has the least spread",
        kind=Kind.PITFALL, names="median",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9d__answer",
        '''true_kl = 0.2166
fraction_k3_below_kl = 0.70
smallest_std = "k3"
smaller_std_of_k1_k3 = "k3"
''',
        "reads the fraction right, but carries over the ordering of the spreads from the flatter side",
        kind=Kind.BREADTH,
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9d__answer",
        '''yours_9d = variants.for_exercise("ex11_9d")
sharp_demo = KLEstimatorDemo(x=yours_9d.x, tokens_per_estimate=16, reference="chapter" if yours_9d.chapter else "yours")
sharp_demo.draw(4000)
shown = sharp_demo.readouts()
true_kl, fraction_k3_below_kl = shown["exact_kl"], shown["k3_below_kl_share"]
smallest_std = min(("k1", "k2", "k3"), key=lambda k: shown[f"{k}_std"])
smaller_std_of_k1_k3 = min(("k1", "k3"), key=lambda k: shown[f"{k}_std"])
''',
        "the right numbers, taken from a demo built in the answer cell: the demo is not there while grading",
        kind=Kind.FROM_DEMO, names=DEMO_MESSAGE,
    ),
]
