"""Notebook 05's hidden tests: Lab Tasks 4 and 5 on inputs drawn from the hidden seed, checked with their shortcuts
blocked and against the exact solvers; the numeric exercises against the student's own model's exact values."""
from __future__ import annotations

import numpy as np

from lmpolicy.exact import tilting as library_tilting
from lmpolicy.exact.scenarios import get_scenario
from lmpolicy.exact.temperature import power_distribution, temperature_curve, token_temperature
from lmpolicy.exact.tilting import frontier, tilted_optimum as exact_tilted
from lmpolicy.exact.toy import ToyLM
from lmpolicy.exercises.nb05 import (BEST_TRUE_NAMES, BETA_BEST_TRUE, BETA_EQUAL_MASS, BETA_FOR_TEMPERATURE,
                                     BLIND_SPOT_NAMES, DEMO_SOFT_VALUE_NAMES, DEMO_SOFT_VALUES, KL_OBJECTIVE,
                                     SOFT_VALUE_NAMES, SOFT_VALUES, TEMPERATURE_NAMES, TILTED_OPTIMUM,
                                     TOKEN_LEVEL_OPTIMUM, check_kl_objective, check_tilted_optimum,
                                     check_token_level_optimum, numbers, worked_example, worked_two_tokens)
from lmpolicy.notebook import checks
from lmpolicy.per_student import variants
from lmpolicy.per_student.hidden_inputs import hidden_seed


def tilted_optimum(student_tilted_optimum) -> None:
    cases = []
    rng = np.random.default_rng(hidden_seed(40))
    for size, beta in [(4, 0.5), (4, 1e-3), (6, 0.05), (50, 3.0), (1, 0.7), (9, 100.0), (12, 1e-3)]:
        ref_h = rng.dirichlet(np.ones(size))
        if size > 4:
            ref_h[rng.choice(size, size // 3, replace=False)] = 0.0  # zero-probability responses
            ref_h /= ref_h.sum()
        rewards_h = rng.normal(0, 1, size) * 2
        if size > 4:
            rewards_h[np.argmin(ref_h)] = 10.0  # the best reward sits on an impossible response
        exact = library_tilting.tilted_optimum(ref_h, rewards_h, beta)
        cases.append((ref_h, rewards_h, beta, exact.probs, exact.log_partition,
                      f"random {size} responses, beta={beta}"))
    worked_ref, worked_rewards = worked_example()
    exact = library_tilting.tilted_optimum(worked_ref, worked_rewards, 1e-3)
    cases.append((worked_ref, worked_rewards, 1e-3, exact.probs, exact.log_partition, "worked, beta=1e-3"))

    with TILTED_OPTIMUM.blocked():
        for case in cases:
            check_tilted_optimum(student_tilted_optimum, *case)
        pi_h, _ = check_tilted_optimum(student_tilted_optimum, *cases[-1])
        checks.check(pi_h[3] > 0.999999, "at beta = 1e-3 pi* must put (almost) all its mass on the best response 'bb'")


def kl_objective(student_kl_objective) -> None:
    cases = []
    rng = np.random.default_rng(hidden_seed(41))
    for size, beta in [(5, 0.3), (8, 2.0), (30, 1e-3)]:
        ref_h = rng.dirichlet(np.ones(size))
        ref_h[0] = 0.0
        ref_h /= ref_h.sum()
        rewards_h = rng.normal(0, 1, size)
        optimum_h = library_tilting.tilted_optimum(ref_h, rewards_h, beta)
        for _ in range(3):
            policy_h = rng.dirichlet(np.ones(size))
            policy_h[0] = 0.0
            policy_h[rng.integers(1, size)] = 0.0  # responses the policy never writes
            policy_h /= policy_h.sum()
            # Gibbs identity, independently of kl_objective: J(pi) = beta log Z - beta KL(pi || pi*),
            # the KL from log pi* (pi* itself underflows to 0 on many responses at beta = 1e-3)
            on = policy_h > 0
            kl_from_optimum = float(policy_h[on] @ (np.log(policy_h[on]) - optimum_h.log_probs[on]))
            expected = optimum_h.beta_log_partition - beta * kl_from_optimum
            cases.append((policy_h, ref_h, rewards_h, beta, expected,
                          f"random policy over {size} responses, beta={beta}"))
        bad_policy = np.full(size, 1.0 / size)  # puts mass on response 0, which pi_ref never writes
        cases.append((bad_policy, ref_h, rewards_h, beta, -np.inf,
                      f"a policy with mass where pi_ref = 0 ({size} responses)"))

    with KL_OBJECTIVE.blocked():
        for case in cases:
            check_kl_objective(student_kl_objective, *case)


def token_level_optimum(student_token_level_optimum) -> None:
    cases = []
    rng = np.random.default_rng(hidden_seed(50))
    for K, beta in [(2, 1e-3), (3, 0.3), (5, 1.0), (4, 50.0), (6, 1e-3), (2, 0.5)]:
        first_h = rng.dirichlet(np.ones(K))
        second_h = rng.dirichlet(np.ones(K), size=K)
        if K > 2:
            first_h[0] = 0.0  # a first token the reference never writes
            first_h /= first_h.sum()
            second_h[:, -1] = 0.0  # a second token it never writes
            second_h /= second_h.sum(axis=1, keepdims=True)
        rewards_h = rng.normal(0, 1, (K, K))
        toy_h = ToyLM(tuple("abcdefgh"[:K]), [first_h, second_h])
        values_h = library_tilting.soft_values(toy_h, rewards_h.ravel(), beta)
        star_h = library_tilting.token_level_optimum(toy_h, rewards_h.ravel(), beta)
        cases.append((first_h, second_h, rewards_h, beta, values_h, star_h))
    first_v, second_v, rewards_v = worked_two_tokens()
    worked_toy = ToyLM(("a", "b"), [first_v, second_v])
    cases.append((first_v, second_v, rewards_v, 0.5, library_tilting.soft_values(worked_toy, rewards_v.ravel(), 0.5),
                  library_tilting.token_level_optimum(worked_toy, rewards_v.ravel(), 0.5)))

    with TOKEN_LEVEL_OPTIMUM.blocked():
        results = [check_token_level_optimum(student_token_level_optimum, f, s, r, beta,
                                             f"{len(f)} tokens, beta={beta}") for f, s, r, beta, _, _ in cases]
    for (f, s, r, beta, values_h, star_h), (first_star, second_star, V, V0) in zip(cases, results):
        label = f"{len(f)} tokens, beta={beta}"
        checks.check_close(V, values_h[1], f"V for {label} (against the exact solver)", atol=1e-8, rtol=1e-8)
        checks.check_close(V0, values_h[0], f"V0 for {label} (against the exact solver)", atol=1e-8, rtol=1e-8)
        checks.check_close(first_star, star_h.tables[0], f"first_star for {label} (against the exact solver)",
                           atol=1e-9)
        checks.check_close(second_star, star_h.tables[1], f"second_star for {label} (against the exact solver)",
                           atol=1e-8)


def soft_values(namespace) -> None:
    # your own model's five numbers from the exact solvers (the chapter's without a student id), within 1.5e-3
    checks.check_variant_answers(SOFT_VALUES.key, numbers(namespace, SOFT_VALUE_NAMES))


def beta_for_temperature(student_beta_for_temperature) -> None:
    rng = np.random.default_rng(hidden_seed(70))
    for T in (0.05, 0.3, 0.5, 0.9, 0.99):
        beta = checks.check_number(BETA_FOR_TEMPERATURE.call(student_beta_for_temperature, T),
                                   f"beta_for_temperature({T})")
        ref_h = rng.dirichlet(np.ones(6))
        tilted_h = exact_tilted(ref_h, np.log(ref_h), beta).probs
        checks.check_close(tilted_h, power_distribution(ref_h, T),
                           f"the tilted optimum with reward log pi_ref at beta_for_temperature({T})", atol=1e-9,
                           hint="it must equal the power distribution p_T")


def power_and_token_temperature(power_probs, token_temperature_probs) -> None:
    toy_h = ToyLM(("a", "b", "c"), [[0.5, 0.5, 0.0], [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3]]])
    keep = [toy_h.response_index(y) for y in ("aa", "ab", "bc")]
    checks.check_close(power_probs, power_distribution(toy_h, 0.5)[keep], "power_probs", atol=2e-3)
    checks.check_close(token_temperature_probs, token_temperature(toy_h, 0.5).response_probs()[keep],
                       "token_temperature_probs", atol=2e-3,
                       hint="sharpen each next-token distribution separately, then multiply along the response")


def beta_equal_mass(namespace) -> None:
    answer = numbers(namespace, BLIND_SPOT_NAMES)
    blind_h = variants.scenario(BETA_EQUAL_MASS.key)  # your blind spot (the chapter's without a student id)
    bb, cc = blind_h.model.response_index("bb"), blind_h.model.response_index("cc")
    at_answer = exact_tilted(blind_h.model, blind_h.rewards, answer["beta_equal_mass"]).probs
    checks.check_close(at_answer[bb] / at_answer[cc], 1.0, "pi*(bb) / pi*(cc) at your beta_equal_mass", atol=0.01)
    checks.check_variant_answers(BETA_EQUAL_MASS.key,
                                 submitted={"true_reward_at_beta_0_1": answer["true_reward_at_beta_0_1"]},
                                 hint="use the true rewards, with pi* computed from the proxy")


def demo_soft_values(namespace) -> None:
    # any beta the slider might show near 0.5 (0.495 .. 0.505, the chapter's slider stops at 0.501) is accepted, within
    # 2e-3 of what the exact solvers give for your model there (variants.demo_readouts_range)
    checks.check_variant_answers(DEMO_SOFT_VALUES.key, numbers(namespace, DEMO_SOFT_VALUE_NAMES),
                                 hint="set beta to 0.5 in your model's scenario and read the tree, the readouts "
                                      "and the bars")


def t_matching_kl(namespace) -> None:
    answer = numbers(namespace, TEMPERATURE_NAMES)
    worked_h = get_scenario("worked")
    at_answer = temperature_curve(worked_h.model, worked_h.rewards, [answer["T_matching_kl"]])
    checks.check_close(at_answer.kl[0], exact_tilted(worked_h.model, worked_h.rewards, 2.0).kl,
                       "the KL of pi_ref at your T_matching_kl", atol=0.012,
                       hint="move T until the temperature readout's KL is about that of pi* at beta = 2")
    checks.check_close(answer["reward_at_T_matching_kl"], at_answer.expected_reward[0],
                       "reward_at_T_matching_kl (for your T)", atol=0.01)
    checks.check_close(answer["reward_pi_star_beta_2"],
                       exact_tilted(worked_h.model, worked_h.rewards, 2.0).expected_reward, "reward_pi_star_beta_2",
                       atol=0.005)
    at_max = temperature_curve(worked_h.model, worked_h.rewards, [10 ** 0.5])
    checks.check_close(answer["kl_at_max_T"], at_max.kl[0], "kl_at_max_T (at T = 3.16)", atol=0.005)
    checks.check_close(answer["reward_at_max_T"], at_max.expected_reward[0], "reward_at_max_T (at T = 3.16)", atol=0.01)


def beta_best_true(namespace) -> None:
    answer = numbers(namespace, BEST_TRUE_NAMES)
    blind_h = variants.scenario(BETA_BEST_TRUE.key)  # your blind spot (the chapter's without a student id)
    grid = frontier(blind_h.model, blind_h.rewards, np.geomspace(0.05, 20, 2000))
    best_true = float((grid.probs @ blind_h.true_rewards).max())
    at_answer = exact_tilted(blind_h.model, blind_h.rewards, answer["beta_best_true"])
    checks.check(at_answer.probs @ blind_h.true_rewards >= best_true - 0.008,
                 f"at beta = {answer['beta_best_true']:.3g} the true reward is "
                 f"{at_answer.probs @ blind_h.true_rewards:.3f}, below its peak of {best_true:.3f}")
    checks.check_close(answer["kl_at_best_true"], at_answer.kl, "kl_at_best_true (at your beta)", atol=0.02)
    checks.check_close(answer["proxy_at_best_true"], at_answer.expected_reward, "proxy_at_best_true (at your beta)",
                       atol=0.01)
    low_values = [exact_tilted(blind_h.model, blind_h.rewards, beta) for beta in (0.097, 0.1, 0.102)]
    for name, values in (("proxy_at_beta_0_1", [o.expected_reward for o in low_values]),
                         ("true_at_beta_0_1", [o.probs @ blind_h.true_rewards for o in low_values])):
        checks.check(min(values) - 3e-3 <= answer[name] <= max(values) + 3e-3,
                     f"{name} = {answer[name]:.4g} is not what the demo shows at beta = 0.1 (about {values[1]:.3f})")
