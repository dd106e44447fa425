"""Notebook 08, TinyLM as a policy: 11.10's disagreement rule and the three REINFORCE pieces, and their visible
checks."""
from __future__ import annotations

import math

import torch

from lmpolicy.exercises.exercise import Exercise
from lmpolicy.exercises.older_names import module_getattr
from lmpolicy.notebook import checks
from lmpolicy.notebook.forbidden import KL_PLACEMENT, REINFORCE, Shortcuts

# --- 11.10: which temperatures make k1 and k3 disagree ----------------------------------------------------
# Small made-up panels where the answer is clear, with rows built so that each usual slip in the rule (one error
# bar instead of the combined one, the errors added instead of their squares, one direction of the difference
# only, n_sigma ignored) gives a different answer.


def rule(panel, n_sigma, spread, difference=lambda row: abs(row["k1"] - row["k3"]), strict=True):
    """Which temperatures a rule flags: difference > n_sigma * spread (or >= if not strict)."""
    return {T for T, row in panel.items()
            if (difference(row) > n_sigma * spread(row) if strict else difference(row) >= n_sigma * spread(row))}


def combined(row):
    return math.sqrt(row["k1_se"] ** 2 + row["k3_se"] ** 2)


SLIPS = [  # (the temperatures a slip flags, what the slip is)
    (lambda panel, n: rule(panel, 2.0, combined),
     "it ignores n_sigma (it always uses 2); use the n_sigma it was given"),
    (lambda panel, n: rule(panel, n, lambda row: row["k3_se"]),
     "it uses k3's standard error alone; the difference of two means has the combined error "
     "sqrt(k1_se**2 + k3_se**2)"),
    (lambda panel, n: rule(panel, n, lambda row: row["k1_se"]),
     "it uses k1's standard error alone; the difference of two means has the combined error "
     "sqrt(k1_se**2 + k3_se**2)"),
    (lambda panel, n: rule(panel, n, lambda row: row["k1_se"] + row["k3_se"]),
     "it adds the two standard errors; independent errors add in squares: sqrt(k1_se**2 + k3_se**2)"),
    (lambda panel, n: rule(panel, n, lambda row: row["k1_se"] ** 2 + row["k3_se"] ** 2),
     "it compares with the sum of the squared errors, without the square root: sqrt(k1_se**2 + k3_se**2)"),
    (lambda panel, n: rule(panel, n, combined, difference=lambda row: row["k1"] - row["k3"]),
     "it only counts k1 above k3; they disagree whichever of the two is larger: use abs(k1 - k3)"),
    (lambda panel, n: rule(panel, n, combined, strict=False),
     "it flags equal means too; disagree means strictly more than n_sigma errors apart (>)"),
]


def row(k1, k1_se, k3, k3_se, exact):
    """One temperature's row of a panel."""
    return {"k1": k1, "k1_se": k1_se, "k3": k3, "k3_se": k3_se, "exact": exact}


def check_disagreeing(disagreeing_temperatures, panel, expected, n_sigma=2.0):
    """The student's ``disagreeing_temperatures(panel, n_sigma)`` must give ``expected``; a wrong set of
    temperatures that one of the ``SLIPS`` gives is named as that slip."""
    what = f"disagreeing_temperatures(panel, n_sigma={n_sigma})"
    got = checks.check_type(DISAGREEING_TEMPERATURES.call(disagreeing_temperatures, panel, n_sigma=n_sigma),
                            dict, what)
    if set(got) != set(expected):
        slip = next((words for flags, words in SLIPS
                     if flags(panel, n_sigma) == set(got) and flags(panel, n_sigma) != set(expected)), None)
        checks.check(slip is None, f"{what} flags the temperatures {sorted(got)}: {slip}")
        checks.check(False, f"{what} lists the temperatures {sorted(got)}; expected {sorted(expected)}",
                     hint="disagree means |k1 - k3| > n_sigma * sqrt(k1_se**2 + k3_se**2)")
    for T, name in expected.items():
        checks.check(got[T] == name, f"{what}[{T}] is {got[T]!r}; expected {name!r}: "
                     "give the estimator whose mean is closer to the exact value")


def _disagreeing_temperatures_checks(exercise: Exercise, disagreeing_temperatures) -> None:
    made_up = {
        0.25: row(0.060, 0.003, 0.030, 0.008, 0.062),  # k3 far below, k1 matches the exact value
        0.5: row(0.060, 0.020, 0.030, 0.005, 0.061),  # 0.03 apart, within 2 combined errors (0.041): agree
        0.75: row(0.060, 0.012, 0.030, 0.005, 0.032),  # 0.03 apart, beyond 2 combined errors (0.026): k3 is closer
        1.0: row(0.0, 0.0, 0.0, 0.0, 0.0),  # the same distribution: both exactly 0
        1.5: row(0.010, 0.001, 0.050, 0.002, 0.049),  # k3 above k1 and closer to the exact value
        2.0: row(0.240, 0.004, 0.250, 0.020, 0.250),  # 0.01 apart, within 2 combined errors (0.041): agree
    }
    check_disagreeing(disagreeing_temperatures, made_up, {0.25: "k1", 0.75: "k3", 1.5: "k3"})
    check_disagreeing(disagreeing_temperatures, {0.75: row(0.02, 0.003, 0.005, 0.004, 0.021)}, {},
                      n_sigma=4.0)  # 3 combined errors apart


DISAGREEING_TEMPERATURES = Exercise("ex11_10", _disagreeing_temperatures_checks)

# --- the leave-one-out baseline ------------------------------------------------------------------------------
# Against the definition computed one answer at a time: 3 prompts with 4 answers each and the verifier's 0/1
# rewards, then 3 prompts with 2 answers each and KL-penalised rewards.


def expected_baseline(rewards):
    P, K = rewards.shape
    out = torch.empty(P, K, dtype=torch.float64)
    for p in range(P):
        for i in range(K):
            others = [float(rewards[p, j]) for j in range(K) if j != i]
            out[p, i] = sum(others) / len(others)
    return out


def scale_of(values, base):
    """c if values == c * base everywhere (and base is not all 0), else None."""
    big = base.abs() > 1e-9
    if not big.any():
        return None
    c = float((values[big] / base[big]).mean())
    return c if torch.allclose(values, c * base, atol=1e-6) else None


def check_baseline(leave_one_out_baseline, rewards):
    """The student's baseline of ``rewards``, checked against the definition (call it inside
    ``LEAVE_ONE_OUT_BASELINE.blocked()``); returns it."""
    what = f"leave_one_out_baseline(rewards of shape {tuple(rewards.shape)})"
    given = rewards.clone()
    try:
        got = checks.call_student(leave_one_out_baseline, given)
    except checks.StudentCodeRaised as error:  # (P,) against (P, K): the summed axis was dropped
        if error.hint is None and "must match the size" in error.problem:
            raise checks.StudentCodeRaised(error.problem, "keep the summed axis, so that it lines up with the "
                                           "rewards: rewards.sum(dim=1, keepdim=True)") from error.__cause__
        raise
    checks.check_type(got, torch.Tensor, what)
    checks.check(torch.equal(given, rewards), f"{what} changed the rewards tensor it was given: don't work in place")
    P, K = rewards.shape
    checks.check(tuple(got.shape) not in ((P,), (P, 1)) or (P, K) in ((P,), (P, 1)),
                 f"{what} has shape {tuple(got.shape)}, one baseline per prompt: each answer gets its own, the "
                 "mean of the other K - 1 answers to its prompt")
    checks.check_shape(got, rewards.shape, what)
    want = expected_baseline(rewards)
    values, r = got.detach().double(), rewards.double()

    def is_wrong(candidate):  # the answer computed this, and this is not the baseline
        return torch.allclose(values, candidate, atol=1e-6) and not torch.allclose(candidate, want, atol=1e-6)

    checks.check(not is_wrong(r.mean(dim=1, keepdim=True).expand_as(r)),
                 f"{what} is the mean of all K rewards, the answer's own included: leave that answer out")
    checks.check(not is_wrong(r - want), f"{what} returned the advantages r - b; return the baseline b")
    checks.check(not is_wrong(torch.zeros_like(r)),
                 f"{what} is all zeros, which is no baseline at all: each answer's baseline is the mean reward of "
                 "the other K - 1 answers to its prompt")
    others_of_prompt = r.sum(dim=1, keepdim=True) - r
    scale = scale_of(values, others_of_prompt)
    checks.check(scale is None or abs(scale - 1 / (K - 1)) < 1e-6 or abs(scale - 1 / K) > 1e-6,
                 f"{what} divides the other answers' rewards by K; there are K - 1 other answers")
    checks.check(scale is None or abs(scale - 1 / (K - 1)) < 1e-6,
                 f"{what} divides the sum of the other answers' rewards by the wrong count: here K = {K}, so "
                 f"there are K - 1 = {K - 1} others", hint="take K from rewards.shape[1], don't hard-code it")
    # never said of the right baseline, which some rewards make a multiple of the other prompts' sums too
    checks.check(P == 1 or scale_of(values, r.sum(dim=0, keepdim=True) - r) is None
                 or torch.allclose(values, want, atol=1e-6),
                 f"{what} averages over the other prompts: an answer's baseline comes from the other answers "
                 "to the same prompt, along dim=1")
    checks.check_close(got, want, what, atol=1e-6,
                       hint="baseline[p, i] = (sum of row p - rewards[p, i]) / (K - 1)")
    return got


def _baseline_checks(exercise: Exercise, leave_one_out_baseline) -> None:
    with exercise.blocked():
        check_baseline(leave_one_out_baseline,
                       torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]))
        check_baseline(leave_one_out_baseline, torch.tensor([[0.97, -0.02], [0.0, 1.0], [0.99, 0.98]]))


LEAVE_ONE_OUT_BASELINE = Exercise(
    "nb08_baseline", _baseline_checks, Shortcuts(library=(f"{REINFORCE}:leave_one_out_baseline",)))

# --- the KL penalty folded into the reward --------------------------------------------------------------
# Against the formula computed one token at a time. Three answers of 3, 4 and 2 tokens; the first one's padding
# holds -inf under both models, the last one's finite junk.

KL_SELECT_HINT = "sum the log-ratio over the answer's tokens with sequence_logprob (torch.where inside), then detach"


def kl_reward_example():
    """The visible checks' batch, made afresh for every use: (rewards, logp, ref_logp, mask)."""
    rewards = torch.tensor([1.0, 0.0, 1.0])
    logp = torch.tensor([[-0.1, -0.3, -0.05, -math.inf], [-1.2, -0.4, -0.3, -0.2], [-0.01, -0.02, -0.9, -1.0]])
    ref_logp = torch.tensor([[-0.4, -0.9, -0.1, -math.inf], [-0.7, -0.5, -0.3, -0.8], [-0.3, -0.02, -0.5, -1.5]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    return rewards, logp, ref_logp, mask


def expected_penalized(rewards, logp, ref_logp, mask, beta):
    out = []
    for r, row_, ref_row, keep in zip(rewards.tolist(), logp.tolist(), ref_logp.tolist(), mask.bool().tolist()):
        out.append(r - beta * sum(a - b for a, b, k in zip(row_, ref_row, keep) if k))
    return torch.tensor(out, dtype=torch.float64)


def check_penalized(kl_penalized_rewards, rewards, logp, ref_logp, mask, beta):
    """The student's penalised rewards, checked against the formula (call it inside
    ``KL_PENALIZED_REWARDS.blocked()``); returns them."""
    what = f"kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta={beta})"
    logp = logp.clone().requires_grad_(True)
    got = checks.check_type(checks.call_student(kl_penalized_rewards, rewards, logp, ref_logp, mask, beta),
                            torch.Tensor, what)
    checks.check(got.shape != logp.shape or logp.shape == rewards.shape,
                 f"{what} has shape {tuple(got.shape)}, one number per token: sum each answer's k1 terms into "
                 "one penalty per answer", hint=KL_SELECT_HINT)
    checks.check_shape(got, rewards.shape, what)
    checks.check(not got.requires_grad, f"{what} carries a gradient: the penalty is part of the reward, a number; "
                 "detach the log-probs before using them")
    values = got.detach().double()
    checks.check(not torch.isnan(values).any(),
                 f"{what} contains NaN: at a padded position both log-probs can be -inf, and -inf - (-inf) = NaN; "
                 "leave the padding out by selecting, not by multiplying by the mask", hint=KL_SELECT_HINT)
    keep = mask.bool()
    log_ratio = torch.where(keep, (logp.detach() - ref_logp).double(), torch.zeros((), dtype=torch.float64))
    kl, n_tokens, r = log_ratio.sum(dim=-1), keep.sum(dim=-1).clamp(min=1), rewards.double()
    want = expected_penalized(rewards, logp.detach(), ref_logp, mask, beta)

    def is_wrong(candidate):  # the answer computed this, and this is not the penalised reward
        return torch.allclose(values, candidate, atol=1e-5) and not torch.allclose(candidate, want, atol=1e-5)

    checks.check(not is_wrong(r + beta * kl), f"{what}: the penalty has the wrong sign; the leash lowers the "
                 "reward of answers the policy likes more than the reference does: r - beta * sum(log pi - log pi_ref)")
    k3 = torch.where(keep, torch.exp(-log_ratio) - 1 + log_ratio, torch.zeros((), dtype=torch.float64)).sum(dim=-1)
    checks.check(not is_wrong(r - beta * k3), f"{what} uses k3; the penalty in the reward is k1, the plain log-ratio "
                 "log pi - log pi_ref")
    checks.check(not is_wrong(r - beta * kl / n_tokens), f"{what} averages the log-ratio over each answer's "
                 "tokens: the KL of a whole answer is their sum")
    checks.check(not is_wrong(r - kl), f"{what} leaves out beta: the penalty is beta times the log-ratio")
    checks.check_close(got, want, what, atol=1e-5,
                       hint="r - beta * (sum of log pi - log pi_ref over the tokens where mask is 1); "
                            "k1 is the plain log-ratio, not k3")
    return got


def _kl_reward_checks(exercise: Exercise, kl_penalized_rewards) -> None:
    with exercise.blocked():
        check_penalized(kl_penalized_rewards, *kl_reward_example(), beta=0.1)


KL_PENALIZED_REWARDS = Exercise(
    "nb08_kl_reward", _kl_reward_checks,
    Shortcuts(library=(f"{REINFORCE}:kl_penalized_rewards", f"{KL_PLACEMENT}:kl_in_reward",
                       f"{KL_PLACEMENT}:no_kl_in_reward", f"{KL_PLACEMENT}:kl_estimate")))

# --- the policy-gradient loss ------------------------------------------------------------------------------
# Its value and its gradient, against the formula term by term. Three answers of 3, 4 and 2 tokens whose padding
# holds -inf (a sampler that gave <pad> probability 0 before <eos>).

PG_SELECT_HINT = "sequence_logprob(token_logprobs, mask) sums each answer's log-probs with torch.where"


def pg_loss_example():
    """The visible checks' batch, made afresh for every use: (logp, mask)."""
    logp = torch.tensor([[-0.1, -0.3, -0.05, -math.inf], [-1.2, -0.4, -0.3, -0.2],
                         [-0.01, -0.02, -math.inf, -math.inf]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    return logp, mask


def expected_loss_and_grad(logp, mask, advantages):
    B, R = logp.shape
    keep = mask.bool().tolist()
    loss = -sum(float(advantages[i]) * sum(float(logp[i, t]) for t in range(R) if keep[i][t]) for i in range(B)) / B
    grad = torch.tensor([[-float(advantages[i]) / B if keep[i][t] else 0.0 for t in range(R)] for i in range(B)],
                        dtype=torch.float64)
    return loss, grad


def check_pg_loss(policy_gradient_loss, logp, mask, advantages):
    """The student's loss and its gradient, checked against the formula (call it inside
    ``POLICY_GRADIENT_LOSS.blocked()``)."""
    what = "policy_gradient_loss(token_logprobs, mask, advantages)"
    logp = logp.clone().requires_grad_(True)
    advantages = advantages.clone().requires_grad_(True)
    got = checks.check_type(checks.call_student(policy_gradient_loss, logp, mask, advantages), torch.Tensor, what)
    checks.check(got.shape != advantages.shape or advantages.shape == (),
                 f"{what} has shape {tuple(got.shape)}, one loss per answer: average them into one number (.mean())")
    checks.check_shape(got, (), what)
    checks.check(got.requires_grad, f"{what} has no gradient: keep the autograd graph of token_logprobs "
                 "(no .item(), no numpy, no detach on the log-probs)")
    keep = mask.bool()
    has_neginf = bool(torch.isneginf(logp.detach()[~keep]).any())
    value = float(got.detach())
    checks.check(not (math.isnan(value) and has_neginf),
                 f"{what} is NaN: the padding was masked by multiplying, and 0 x -inf = NaN", hint=PG_SELECT_HINT)
    checks.check(not (math.isinf(value) and has_neginf),
                 f"{what} is infinite: the padded positions, which hold -inf, were summed in", hint=PG_SELECT_HINT)
    want_loss, want_grad = expected_loss_and_grad(logp.detach().nan_to_num(neginf=0.0), mask, advantages.detach())
    seq = torch.where(keep, logp.detach().double(), torch.zeros((), dtype=torch.float64)).sum(dim=-1)
    A, lengths = advantages.detach().double(), keep.sum(dim=-1).clamp(min=1)

    def is_wrong(candidate):  # the answer computed this, and this is not the loss
        candidate = float(candidate)
        return math.isclose(value, candidate, abs_tol=1e-5) and not math.isclose(candidate, want_loss, abs_tol=1e-5)

    checks.check(not is_wrong(-want_loss), f"{what} has the wrong sign: the optimiser minimises the loss, so the "
                 "loss is minus the objective, -mean(A * log pi(y | x))")
    checks.check(not is_wrong(-(A * seq / lengths).mean()), f"{what} averages each answer's log-probs over its "
                 "tokens: log pi(y | x) is their sum (notebook 7, section 6)")
    checks.check(not is_wrong(-(A * seq).sum() / lengths.sum()), f"{what} divides by the number of tokens in the "
                 "batch; average over the B answers instead")
    checks.check(not is_wrong(-(A * seq).sum()), f"{what} sums over the answers; average them (.mean())")
    checks.check_close(got, want_loss, what, atol=1e-5,
                       hint="-(advantages * sum of masked log-probs per answer).mean(): "
                            "sum over tokens, no per-answer mean")
    got.backward()
    checks.check(advantages.grad is None or bool((advantages.grad == 0).all()),
                 f"gradient flows into the advantages through {what}: use advantages.detach()")
    checks.check_close(logp.grad, want_grad, f"the gradient of {what} with respect to token_logprobs", atol=1e-6,
                       hint="each real token of answer i gets -A_i / B, padding gets 0")


def _pg_loss_checks(exercise: Exercise, policy_gradient_loss) -> None:
    with exercise.blocked():
        check_pg_loss(policy_gradient_loss, *pg_loss_example(), torch.tensor([0.5, -1.0, 0.25]))


POLICY_GRADIENT_LOSS = Exercise(
    "nb08_pg_loss", _pg_loss_checks,
    Shortcuts(library=(f"{REINFORCE}:policy_gradient_loss", f"{KL_PLACEMENT}:kl_loss_term")))

EXERCISES = (DISAGREEING_TEMPERATURES, LEAVE_ONE_OUT_BASELINE, KL_PENALIZED_REWARDS, POLICY_GRADIENT_LOSS)

__getattr__ = module_getattr(__name__)  # older copies' names of its exercises, and what it holds
