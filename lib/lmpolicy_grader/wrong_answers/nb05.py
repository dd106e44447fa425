"""Typical wrong answers for 05_tilted_optimum."""
from . import WrongAnswer

NOTEBOOK = "05_tilted_optimum"



def _kl_objective_answer(divergence: str) -> str:
    """A Task 4 kl_objective answer cell that computes the divergence as ``divergence``."""
    return f'''def kl_objective(policy_probs, ref_probs, rewards, beta):
    policy_probs, ref_probs = np.asarray(policy_probs, dtype=float), np.asarray(ref_probs, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        divergence = {divergence}
    return float(policy_probs @ np.asarray(rewards, dtype=float) - beta * divergence)
'''


WRONG_ANSWERS = [
    WrongAnswer(
        NOTEBOOK, "task4__tilted_optimum", "task4",
        '''def tilted_optimum(ref_probs, rewards, beta):
    weights = np.asarray(ref_probs) * np.exp(np.asarray(rewards) / beta)
    return weights / weights.sum(), float(np.log(weights.sum()))
''',
        "not in log space: exp(r / beta) overflows for small beta and pi* becomes NaN",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__tilted_optimum", "task4",
        '''def tilted_optimum(ref_probs, rewards, beta):
    ref_probs, rewards = np.asarray(ref_probs, dtype=float), np.asarray(rewards, dtype=float)
    with np.errstate(divide="ignore"):
        log_weights = np.log(ref_probs) + rewards / beta
    shift = log_weights.max()
    weights = np.exp(log_weights - shift)
    return weights / weights.sum(), float(beta * (shift + np.log(weights.sum())))
''',
        "returns beta * log Z where log Z is asked for",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__kl_objective", "task4",
        _kl_objective_answer("np.nansum(ref_probs * np.log(ref_probs / policy_probs))"),
        "the KL with its arguments swapped, KL(pi_ref || pi)",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__kl_objective", "task4",
        _kl_objective_answer("np.sum(policy_probs * np.log(policy_probs / ref_probs))"),
        "sums p log(p / q) over every response: a response the policy never writes gives 0 x -inf = NaN",
    ),
    WrongAnswer(
        NOTEBOOK, "task5__token_level_optimum", "task5",
        '''def token_level_optimum(first_probs, second_probs, rewards, beta):
    first_probs, second_probs = np.asarray(first_probs, float), np.asarray(second_probs, float)
    V = (second_probs * rewards).sum(axis=1)
    V0 = float(first_probs @ V)
    first_star = first_probs * np.exp((V - V0) / beta)
    first_star /= first_star.sum()
    second_star = second_probs * np.exp((rewards - V[:, None]) / beta)
    second_star /= second_star.sum(axis=1, keepdims=True)
    return first_star, second_star, V, V0
''',
        "plain expected rewards instead of soft values (no log-sum-exp), renormalised to hide it",
    ),
    WrongAnswer(
        NOTEBOOK, "task5__token_level_optimum", "task5",
        '''def token_level_optimum(first_probs, second_probs, rewards, beta):
    first_probs, second_probs = np.asarray(first_probs, float), np.asarray(second_probs, float)
    V = beta * np.log((second_probs * np.exp(rewards / beta)).sum(axis=1))
    V0 = float(beta * np.log(first_probs @ np.exp(V / beta)))
    first_star = first_probs * np.exp((V - V0) / beta)
    second_star = second_probs * np.exp((rewards - V[:, None]) / beta)
    return first_star, second_star, V, V0
''',
        "right formulas outside log space: overflow at beta = 1e-3",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_5b__answer", "ex11_5b",
        '''V_a = 0.6 * 0 + 0.4 * 1.0
V_b = 0.5 * 0 + 0.5 * 2.0
beta_log_Z = 0.7 * V_a + 0.3 * V_b
pi_star_a = 0.7
pi_star_bb = 0.15
''',
        "averages instead of soft maxima, and the reference's probabilities instead of pi*",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_7a__answer", "ex11_7a",
        '''def beta_for_temperature(T):
    return (1 - T) / T
''',
        "the ratio upside down",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_7b__answer", "ex11_7b",
        '''power_probs = np.array([0.25, 0.25, 0.5])
token_temperature_probs = np.array([1 / 6, 1 / 6, 2 / 3])
''',
        "the two distributions swapped",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_8b__answer", "ex11_8b",
        '''beta_equal_mass = (1.6 - 1.0) / np.log(0.02 / 0.24)
blind = get_scenario("blind_spot")
pi_low_beta, _ = tilted_optimum(blind.model.response_probs(), blind.rewards, 0.1)
true_reward_at_beta_0_1 = float(pi_low_beta @ blind.rewards)
''',
        "the log of the wrong ratio (negative beta), and the proxy reward reported as the true one",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9a__answer", "ex11_9a",
        '''demo_V_a, demo_V_b, demo_beta_log_Z, demo_pi_star_bb = 0.523, 1.434, 0.892, 0.454
''',
        "read off at beta = 1 instead of 0.5",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9b__answer", "ex11_9b",
        '''T_matching_kl, reward_at_T_matching_kl, reward_pi_star_beta_2 = 0.3, 0.35, 0.887
kl_at_max_T, reward_at_max_T = 0.045, 0.699
''',
        "a temperature whose KL is far from 0.08",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9c__answer", "ex11_9c",
        '''beta_best_true, kl_at_best_true, proxy_at_best_true = 0.241, 1.3, 1.2
proxy_at_beta_0_1, true_at_beta_0_1 = 1.58, 0.03
''',
        "takes the crossover of 11.8(b) for the peak of the true reward",
    ),
]
