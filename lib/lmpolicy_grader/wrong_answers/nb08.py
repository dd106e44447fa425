"""Typical wrong answers for 08_tinylm_reinforce."""
from . import WrongAnswer

NOTEBOOK = "08_tinylm_reinforce"

WRONG_ANSWERS = [
    WrongAnswer(
        NOTEBOOK, "nb08_baseline__leave_one_out_baseline", "nb08_baseline",
        '''def leave_one_out_baseline(rewards):
    return (rewards.sum(dim=1, keepdim=True) - rewards) / 3
''',
        "hard-codes K - 1 = 3 from the visible example's 4 answers per prompt: wrong for any other K",
    ),
    WrongAnswer(
        NOTEBOOK, "nb08_baseline__leave_one_out_baseline", "nb08_baseline",
        '''def leave_one_out_baseline(rewards):
    return rewards.mean(dim=1, keepdim=True).expand_as(rewards)
''',
        "the mean of all K answers, the answer's own reward included (biased, and not leave-one-out)",
    ),
    WrongAnswer(
        NOTEBOOK, "nb08_kl_reward__kl_penalized_rewards", "nb08_kl_reward",
        '''def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    k1 = (token_logprobs - ref_token_logprobs).detach()
    return rewards - beta * (k1 * mask).sum(dim=-1)
''',
        "masks the padding by multiplying: -inf - (-inf) = NaN at a padded position, and 0 x NaN = NaN",
    ),
    WrongAnswer(
        NOTEBOOK, "nb08_kl_reward__kl_penalized_rewards", "nb08_kl_reward",
        '''def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    return rewards - beta * sequence_logprob(token_logprobs - ref_token_logprobs, mask)
''',
        "forgets to detach: the KL penalty carries a gradient, so it is no longer a reward but a loss term",
    ),
    WrongAnswer(
        NOTEBOOK, "nb08_pg_loss__policy_gradient_loss", "nb08_pg_loss",
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return -(advantages.detach() * (token_logprobs * mask).sum(dim=-1)).mean()
''',
        "masks the padding by multiplying: a -inf log-prob at a padded position makes the loss NaN",
    ),
    WrongAnswer(
        NOTEBOOK, "nb08_pg_loss__policy_gradient_loss", "nb08_pg_loss",
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return (advantages.detach() * sequence_logprob(token_logprobs, mask)).mean()
''',
        "forgets the minus sign: the optimiser minimises, so this makes right answers less likely",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_10__disagreeing_temperatures", "ex11_10",
        '''def disagreeing_temperatures(panel, n_sigma=2.0):
    disagree = {}
    for T, row in panel.items():
        if abs(row["k1"] - row["k3"]) > n_sigma * row["k3_se"]:
            disagree[T] = "k1" if abs(row["k1"] - row["exact"]) <= abs(row["k3"] - row["exact"]) else "k3"
    return disagree
''',
        "uses only k3's error bar instead of the combined standard error of the difference",
    ),
    WrongAnswer(
        NOTEBOOK, "ex11_10__disagreeing_temperatures", "ex11_10",
        '''def disagreeing_temperatures(panel, n_sigma=2.0):
    return {T: "k1" for T, row in panel.items()
            if row["k1"] - row["k3"] > n_sigma * math.sqrt(row["k1_se"] ** 2 + row["k3_se"] ** 2)}
''',
        "only looks for k3 below k1 and always names k1, as on TinyLM at low temperature",
    ),
]
