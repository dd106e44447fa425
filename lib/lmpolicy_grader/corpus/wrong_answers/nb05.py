"""Typical wrong answers for 05_tilted_optimum."""
from . import DEMO_MESSAGE, Kind, WrongAnswer

NOTEBOOK = "05_tilted_optimum"


def _tilted_optimum_answer(log_weights: str, result: str) -> str:
    """A Task 4 tilted_optimum answer cell: ``log_weights`` from ref_probs, rewards, beta; then ``result``."""
    return f'''def tilted_optimum(ref_probs, rewards, beta):
    ref_probs, rewards = np.asarray(ref_probs, dtype=float), np.asarray(rewards, dtype=float)
    with np.errstate(divide="ignore"):
        log_weights = {log_weights}
    shift = log_weights.max()
    weights = np.exp(log_weights - shift)
    return {result}
'''


_LOG_WEIGHTS = "np.log(ref_probs) + rewards / beta"
_NORMALISED = "weights / weights.sum()"


def _kl_objective_answer(divergence: str, objective: str = "reward - beta * divergence") -> str:
    """A Task 4 kl_objective answer cell that computes the divergence as ``divergence``."""
    return f'''def kl_objective(policy_probs, ref_probs, rewards, beta):
    policy_probs, ref_probs = np.asarray(policy_probs, dtype=float), np.asarray(ref_probs, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        divergence = {divergence}
    reward = policy_probs @ np.asarray(rewards, dtype=float)
    return float({objective})
'''


_KL_ON_SUPPORT = "np.sum(policy_probs[policy_probs > 0] * np.log(policy_probs[policy_probs > 0] / ref_probs[policy_probs > 0]))"


def _token_level_answer(values: str, root: str, second_tilt: str = "(rewards - V[:, None]) / beta",
                        log_probs: str = "np.log(np.asarray(first_probs, float)), np.log(np.asarray(second_probs, float))",
                        first_star: str = "np.exp(log_first + (V - V0) / beta)") -> str:
    """A Task 5 answer cell in log space, with the soft values ``values`` and ``root`` written as given."""
    return f'''def token_level_optimum(first_probs, second_probs, rewards, beta):
    with np.errstate(divide="ignore"):
        log_first, log_second = {log_probs}
    V = {values}
    V0 = float({root})
    first_star = {first_star}
    second_star = np.exp(log_second + {second_tilt})
    return first_star, second_star, V, V0
'''


_SOFT_VALUES = "beta * np.logaddexp.reduce(log_second + rewards / beta, axis=1)"
_SOFT_ROOT = "beta * np.logaddexp.reduce(log_first + V / beta)"


def _worked_answer(V_a: str, V_b: str, beta_log_Z: str, pi_star_a: str, pi_star_bb: str) -> str:
    """An 11.5(b) answer cell at beta = 0.5 with the five numbers written as given."""
    return f'''beta = 0.5
first, after = my_worked.model.tables
r = my_worked.rewards.reshape(2, 2)
V_a = {V_a}
V_b = {V_b}
beta_log_Z = {beta_log_Z}
pi_star_a = {pi_star_a}
pi_star_bb = {pi_star_bb}
'''


# written for the student's own model (my_worked, the chapter's worked example without a student id)
_V_A = "beta * np.log(after[0] @ np.exp(r[0] / beta))"
_V_B = "beta * np.log(after[1] @ np.exp(r[1] / beta))"
_ROOT = "beta * np.log(first[0] * np.exp(V_a / beta) + first[1] * np.exp(V_b / beta))"
_FIRST_A = "first[0] * np.exp((V_a - beta_log_Z) / beta)"
_BB = "(1 - pi_star_a) * after[1, 1] * np.exp((r[1, 1] - V_b) / beta)"



def _blind_spot_answer(log: str = "np.log", tilt: str = "blind.rewards", measure: str = "blind.true_rewards") -> str:
    """An 11.8(b) answer cell: the crossover with the logarithm ``log``; pi* at beta = 0.1 tilted by ``tilt``,
    its expectation taken over ``measure``."""
    return f'''ref_blind = blind.model.response_probs()
bb, cc = blind.model.response_index("bb"), blind.model.response_index("cc")
beta_equal_mass = (blind.rewards[cc] - blind.rewards[bb]) / {log}(ref_blind[bb] / ref_blind[cc])
log_weights = np.log(blind.model.response_probs()) + {tilt} / 0.1
pi_low_beta = np.exp(log_weights - log_weights.max())
pi_low_beta /= pi_low_beta.sum()
true_reward_at_beta_0_1 = float(pi_low_beta @ {measure})
'''

WRONG_ANSWERS = [
    # --- Lab Task 4: tilted_optimum ------------------------------------------------------------------
    WrongAnswer(
        NOTEBOOK, "task4__tilted_optimum",
        '''def tilted_optimum(ref_probs, rewards, beta):
    weights = np.asarray(ref_probs) * np.exp(np.asarray(rewards) / beta)
    return weights / weights.sum(), float(np.log(weights.sum()))
''',
        "not in log space: exp(r / beta) overflows for small beta and pi* becomes NaN",
        kind=Kind.PITFALL, names="work in log space",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__tilted_optimum",
        _tilted_optimum_answer(_LOG_WEIGHTS, f"{_NORMALISED}, float(beta * (shift + np.log(weights.sum())))"),
        "returns beta * log Z where log Z is asked for (the same at beta = 1)",
        kind=Kind.PITFALL, names="is beta * log Z",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__tilted_optimum",
        _tilted_optimum_answer(_LOG_WEIGHTS, "weights, float(shift + np.log(weights.sum()))"),
        "forgets to normalise: returns the shifted weights instead of pi*",
        kind=Kind.PITFALL, names="normalise",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__tilted_optimum",
        _tilted_optimum_answer("np.log(ref_probs + 1e-12) + rewards / beta",
                               f"{_NORMALISED}, float(shift + np.log(weights.sum()))"),
        "an epsilon in the log: a response with pi_ref = 0 and a large reward gets mass at small beta",
        kind=Kind.PITFALL, names="must stay impossible",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__tilted_optimum",
        '''def tilted_optimum(ref_probs, rewards, beta):
    ref_probs, rewards = np.asarray(ref_probs, dtype=float), np.asarray(rewards, dtype=float)
    shift = (rewards / beta).max()
    weights = ref_probs * np.exp(rewards / beta - shift)
    return weights / weights.sum(), float(shift + np.log(weights.sum()))
''',
        "subtracts the largest r / beta instead of the largest log-weight: when that reward sits on a response with "
        "pi_ref = 0, every weight underflows to 0 and pi* is 0 / 0",
        kind=Kind.PITFALL, names="underflowed to 0",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__tilted_optimum",
        _tilted_optimum_answer(_LOG_WEIGHTS, f"{_NORMALISED}, float(np.log(weights.sum()))"),
        "log Z without the maximum added back (log of the shifted sum only)",
        kind=Kind.PITFALL, names="leaves out the maximum",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__tilted_optimum",
        _tilted_optimum_answer(_LOG_WEIGHTS, f"{_NORMALISED}, float((shift + np.log(weights.sum())) / np.log(10))"),
        "log Z as a base-10 log",
        kind=Kind.PITFALL, names="base-10",
    ),
    # --- Lab Task 4: kl_objective --------------------------------------------------------------------
    WrongAnswer(
        NOTEBOOK, "task4__kl_objective",
        _kl_objective_answer("np.nansum(ref_probs * np.log(ref_probs / policy_probs))"),
        "the KL with its arguments swapped, KL(pi_ref || pi)",
        kind=Kind.PITFALL, names="computes KL(pi_ref || pi)",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__kl_objective",
        _kl_objective_answer("np.sum(policy_probs * np.log(policy_probs / ref_probs))"),
        "sums p log(p / q) over every response: a response the policy never writes gives 0 x -inf = NaN",
        kind=Kind.PITFALL, names="0 log 0",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__kl_objective",
        _kl_objective_answer(_KL_ON_SUPPORT, "reward + beta * divergence"),
        "adds the KL penalty instead of subtracting it",
        kind=Kind.PITFALL, names="adds the KL",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__kl_objective",
        _kl_objective_answer(_KL_ON_SUPPORT, "reward - divergence"),
        "leaves beta out of the objective (the same at beta = 1)",
        kind=Kind.PITFALL, names="leaves out beta",
    ),
    WrongAnswer(
        NOTEBOOK, "task4__kl_objective",
        _kl_objective_answer("np.sum(policy_probs[(policy_probs > 0) & (ref_probs > 0)] * np.log("
                             "policy_probs[(policy_probs > 0) & (ref_probs > 0)] / ref_probs[(policy_probs > 0) & (ref_probs > 0)]))"),
        "skips the responses with pi_ref = 0, so a policy with mass there gets a finite J instead of -inf",
        kind=Kind.PITFALL, names="the KL is infinite",
    ),
    # --- Lab Task 5 ----------------------------------------------------------------------------------
    WrongAnswer(
        NOTEBOOK, "task5__token_level_optimum",
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
        kind=Kind.PITFALL, names="soft maximum",
    ),
    WrongAnswer(
        NOTEBOOK, "task5__token_level_optimum",
        '''def token_level_optimum(first_probs, second_probs, rewards, beta):
    first_probs, second_probs = np.asarray(first_probs, float), np.asarray(second_probs, float)
    V = beta * np.log((second_probs * np.exp(rewards / beta)).sum(axis=1))
    V0 = float(beta * np.log(first_probs @ np.exp(V / beta)))
    first_star = first_probs * np.exp((V - V0) / beta)
    second_star = second_probs * np.exp((rewards - V[:, None]) / beta)
    return first_star, second_star, V, V0
''',
        "right formulas outside log space: overflow at beta = 1e-3",
        kind=Kind.PITFALL, names="work in log space",
    ),
    WrongAnswer(
        NOTEBOOK, "task5__token_level_optimum",
        _token_level_answer("np.logaddexp.reduce(log_second + rewards / beta, axis=1)",
                            "beta * np.logaddexp.reduce(log_first + V)", second_tilt="rewards / beta - V[:, None]",
                            first_star="np.exp(log_first + V - V0 / beta)"),
        "soft values without the beta in front of the log (the same at beta = 1)",
        kind=Kind.PITFALL, names="multiply by beta",
    ),
    WrongAnswer(
        NOTEBOOK, "task5__token_level_optimum",
        _token_level_answer("beta * np.logaddexp.reduce(log_second + rewards, axis=1)",
                            "beta * np.logaddexp.reduce(log_first + V / beta)"),
        "soft values with beta outside the log only, e^r instead of e^(r / beta) inside (the same at beta = 1)",
        kind=Kind.PITFALL, names="inside the exponential it is r / beta",
    ),
    WrongAnswer(
        NOTEBOOK, "task5__token_level_optimum",
        _token_level_answer(_SOFT_VALUES, "np.logaddexp.reduce(log_first + V / beta)",
                            first_star="np.exp(log_first + V / beta - V0)"),
        "returns log Z as V0 instead of beta log Z (the same at beta = 1)",
        kind=Kind.PITFALL, names="is log Z",
    ),
    WrongAnswer(
        NOTEBOOK, "task5__token_level_optimum",
        _token_level_answer(_SOFT_VALUES, _SOFT_ROOT, second_tilt="(rewards - V0) / beta"),
        "tilts the second token by r - V0 instead of r - V(y1): the rows of pi*(y2 | y1) do not sum to 1",
        kind=Kind.PITFALL, names="subtract V(y1), not V0",
    ),
    WrongAnswer(
        NOTEBOOK, "task5__token_level_optimum",
        _token_level_answer(_SOFT_VALUES, _SOFT_ROOT,
                            log_probs="np.log(np.asarray(first_probs, float) + 1e-12), "
                                      "np.log(np.asarray(second_probs, float) + 1e-12)"),
        "an epsilon in the logs: impossible tokens with large rewards get mass at small beta",
        kind=Kind.PITFALL, names="impossible continuation",
    ),
    # --- Exercise 11.5(b) ----------------------------------------------------------------------------
    WrongAnswer(
        NOTEBOOK, "ex11_5b__answer",
        '''first, after = my_worked.model.tables
r = my_worked.rewards.reshape(2, 2)
V_a = after[0] @ r[0]
V_b = after[1] @ r[1]
beta_log_Z = first[0] * V_a + first[1] * V_b
pi_star_a = first[0]
pi_star_bb = first[1] * after[1, 1]
''',
        "averages instead of soft maxima, and the reference's probabilities instead of pi*",
        kind=Kind.PITFALL, names="soft maximum",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_5b__answer",
        _worked_answer("library_soft_values(my_worked.model, my_worked.rewards, 1.0)[1][0]",
                       "library_soft_values(my_worked.model, my_worked.rewards, 1.0)[1][1]",
                       "float(library_soft_values(my_worked.model, my_worked.rewards, 1.0)[0])",
                       "library_token_level_optimum(my_worked.model, my_worked.rewards, 1.0).tables[0][0]",
                       "library_tilted_optimum(my_worked.model, my_worked.rewards, 1.0).probs[3]"),
        "copies the beta = 1 numbers of section 4",
        kind=Kind.PITFALL, names="at beta = 1",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_5b__answer",
        _worked_answer(_V_A, _V_B, _ROOT, _FIRST_A, "after[1, 1] * np.exp((r[1, 1] - V_b) / beta)"),
        "pi*(b | b), the second token's probability, instead of the whole response's pi*(bb)",
        kind=Kind.PITFALL, names="is pi*(b | b)",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_5b__answer",
        _worked_answer(_V_A, _V_B, "np.log(first[0] * np.exp(V_a / beta) + first[1] * np.exp(V_b / beta))",
                       "first[0] * np.exp(V_a / beta) / np.exp(beta_log_Z)",
                       "first[1] * after[1, 1] * np.exp(r[1, 1] / beta) / np.exp(beta_log_Z)"),
        "log Z instead of beta log Z (pi* from it is right)",
        kind=Kind.PITFALL, names="is log Z",
    ),
    # --- Exercise 11.7 -------------------------------------------------------------------------------
    WrongAnswer(
        NOTEBOOK, "ex11_7a__answer",
        '''def beta_for_temperature(T):
    return (1 - T) / T
''',
        "the ratio upside down",
        kind=Kind.PITFALL, names="needs a larger beta",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_7a__answer",
        '''def beta_for_temperature(T):
    return T
''',
        "takes the temperature itself for the KL coefficient",
        kind=Kind.PITFALL, names="is not the power distribution",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_7a__answer",
        '''def beta_for_temperature(T):
    return T / (1 + T)
''',
        "a sign slip matching the exponents: 1/beta = 1/T + 1",
        kind=Kind.PITFALL, names="is not the power distribution",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_7b__answer",
        '''power_probs = np.array([0.25, 0.25, 0.5])
token_temperature_probs = np.array([1 / 6, 1 / 6, 2 / 3])
''',
        "the two distributions swapped",
        kind=Kind.PITFALL, names="not proportional to pi_ref(y)^(1/T)",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_7b__answer",
        '''power_probs = np.array([1 / 6, 1 / 6, 2 / 3])
token_temperature_probs = power_probs.copy()
''',
        "believes token-level temperature gives the power distribution",
        kind=Kind.PITFALL, names="the same distribution",
    ),
    # --- Exercise 11.8(b) ----------------------------------------------------------------------------
    WrongAnswer(
        NOTEBOOK, "ex11_8b__answer",
        '''ref_blind = blind.model.response_probs()
bb, cc = blind.model.response_index("bb"), blind.model.response_index("cc")
beta_equal_mass = (blind.rewards[cc] - blind.rewards[bb]) / np.log(ref_blind[cc] / ref_blind[bb])
pi_low_beta, _ = tilted_optimum(blind.model.response_probs(), blind.rewards, 0.1)
true_reward_at_beta_0_1 = float(pi_low_beta @ blind.rewards)
''',
        "the log of the wrong ratio (negative beta), and the proxy reward reported as the true one",
        kind=Kind.PITFALL, names="must be positive",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_8b__answer",
        _blind_spot_answer(log="np.log10"),
        "a base-10 log in the crossover",
        kind=Kind.PITFALL, names="not 1",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_8b__answer",
        _blind_spot_answer(measure="blind.rewards"),
        "reports the proxy (reward-model) reward of pi* as its true reward",
        kind=Kind.PITFALL, names="blind.true_rewards",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_8b__answer",
        _blind_spot_answer(tilt="blind.true_rewards"),
        "tilts pi* by the true rewards, which the optimiser never sees",
        kind=Kind.PITFALL, names="reward model's scores",
    ),
    # --- Exercise 11.9(a)-(c) ------------------------------------------------------------------------
    # what a student reads off the demo and types in (the chapter's worked example and blind spot: no student id)
    WrongAnswer(
        NOTEBOOK, "ex11_9a__answer",
        '''demo_V_a, demo_V_b = 0.523, 1.434  # the tree at beta = 1, where the demo starts
demo_beta_log_Z = 0.892
demo_pi_star_bb = 0.4543
''',
        "read off at beta = 1 instead of 0.5",
        kind=Kind.PITFALL, names="soft values at beta = 1",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9a__answer",
        '''demo_V_a, demo_V_b = 0.634, 1.663
demo_beta_log_Z = 1.191
demo_pi_star_bb = 0.77  # the tree's edge into "b"
''',
        "pi*(b) (the first token's edge on the tree) read as pi*(bb)",
        kind=Kind.BREADTH,
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9a__answer",
        '''at_half = TiltingDemo(scenario=variants.scenario("ex11_9a").name, beta=0.5)
demo_V_a, demo_V_b = at_half.token_view()["a"]["soft_value"], at_half.token_view()["b"]["soft_value"]
demo_beta_log_Z, demo_pi_star_bb = at_half.readouts()["beta_log_partition"], at_half.response_view()["bb"]["pi_star"]
''',
        "the right numbers, taken from a demo built in the answer cell: the demo is not there while grading",
        kind=Kind.FROM_DEMO, names=DEMO_MESSAGE,
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9b__answer",
        '''T_matching_kl, reward_at_T_matching_kl, reward_pi_star_beta_2 = 0.3, 0.35, 0.887
kl_at_max_T, reward_at_max_T = 0.045, 0.699
''',
        "a temperature whose KL is far from 0.08",
        kind=Kind.PITFALL, names="not about 0.08",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9b__answer",
        '''T_matching_kl, reward_at_T_matching_kl, reward_pi_star_beta_2 = 0.486, 0.407, 0.727
kl_at_max_T, reward_at_max_T = 0.045, 0.699
''',
        "records pi*'s objective J = E[r] - beta KL at beta = 2 instead of its expected reward",
        kind=Kind.PITFALL, names="is J(pi*)",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9b__answer",
        '''T_matching_kl, reward_at_T_matching_kl, reward_pi_star_beta_2 = 0.486, 0.407, 0.887
kl_at_max_T, reward_at_max_T = 0.0, 0.58
''',
        "the readouts at T = 1 (the reference itself) instead of the largest temperature",
        kind=Kind.BREADTH,
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9c__answer",
        '''beta_best_true, kl_at_best_true, proxy_at_best_true = 0.241, 1.513, 1.214  # at the crossover of 11.8(b)
proxy_at_beta_0_1, true_at_beta_0_1 = 1.582, 0.029
''',
        "takes the crossover of 11.8(b) for the peak of the true reward",
        kind=Kind.PITFALL, names="below its peak",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9c__answer",
        '''beta_best_true, kl_at_best_true, proxy_at_best_true = 0.428, 0.503, 0.899
true_at_beta_0_1, proxy_at_beta_0_1 = 1.582, 0.029
''',
        "the proxy and the true reward at beta = 0.1 swapped",
        kind=Kind.PITFALL, names="swapped",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_9c__answer",
        '''demo_9c = TiltingDemo(scenario=variants.scenario("ex11_9c").name)
on_slider = []
for beta in 2.0 ** (np.arange(-43, 44) / 10):  # every stop of the beta slider
    demo_9c.set(beta=beta)
    on_slider.append(demo_9c.readouts())
best = max(on_slider, key=lambda shown: shown["true_expected_reward"])
beta_best_true, kl_at_best_true, proxy_at_best_true = best["beta"], best["kl"], best["expected_reward"]
demo_9c.set(beta=2.0 ** -3.3)  # the stop nearest 0.1
proxy_at_beta_0_1, true_at_beta_0_1 = demo_9c.readouts()["expected_reward"], demo_9c.readouts()["true_expected_reward"]
''',
        "the right numbers, taken from a demo built in the answer cell: the demo is not there while grading",
        kind=Kind.FROM_DEMO, names=DEMO_MESSAGE,
    ),
]
