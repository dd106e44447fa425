"""Typical wrong answers for 08_tinylm_reinforce: the three REINFORCE pieces and 11.10's disagreement rule."""
from . import Kind, WrongAnswer

NOTEBOOK = "08_tinylm_reinforce"
BASELINE = (NOTEBOOK, "nb08_baseline__leave_one_out_baseline")
KL_REWARD = (NOTEBOOK, "nb08_kl_reward__kl_penalized_rewards")
PG_LOSS = (NOTEBOOK, "nb08_pg_loss__policy_gradient_loss")
EX11_10 = (NOTEBOOK, "ex11_10__disagreeing_temperatures")

WRONG_ANSWERS = [
    # --- the leave-one-out baseline -----------------------------------------------------------
    WrongAnswer(
        *BASELINE,
        '''def leave_one_out_baseline(rewards):
    return (rewards.sum(dim=1, keepdim=True) - rewards) / 3
''',
        "hard-codes K - 1 = 3 from the first example's 4 answers per prompt: wrong for any other K",
        kind=Kind.PITFALL, names="don't hard-code it",
    ),
    WrongAnswer(
        *BASELINE,
        '''def leave_one_out_baseline(rewards):
    return rewards.mean(dim=1, keepdim=True).expand_as(rewards)
''',
        "the mean of all K answers, the answer's own reward included (biased, and not leave-one-out)",
        kind=Kind.PITFALL, names="the answer's own included",
    ),
    WrongAnswer(
        *BASELINE,
        '''def leave_one_out_baseline(rewards):
    K = rewards.shape[1]
    return (rewards.sum(dim=1, keepdim=True) - rewards) / K
''',
        "leaves the answer out of the sum but still divides by K",
        kind=Kind.PITFALL, names="there are K - 1 other answers",
    ),
    WrongAnswer(
        *BASELINE,
        '''def leave_one_out_baseline(rewards):
    K = rewards.shape[1]
    return rewards - (rewards.sum(dim=1, keepdim=True) - rewards) / (K - 1)
''',
        "returns the advantages r - b instead of the baseline b",
        kind=Kind.PITFALL, names="return the baseline b",
    ),
    WrongAnswer(
        *BASELINE,
        '''def leave_one_out_baseline(rewards):
    return torch.zeros_like(rewards)
''',
        "no baseline at all (zeros): plain REINFORCE, with no variance taken out",
        kind=Kind.PITFALL, names="is all zeros, which is no baseline at all",
    ),
    WrongAnswer(
        *BASELINE,
        '''def leave_one_out_baseline(rewards):
    P = rewards.shape[0]
    return (rewards.sum(dim=0, keepdim=True) - rewards) / (P - 1)
''',
        "leaves the answer out along the wrong axis: the other prompts' answers in the same position",
        kind=Kind.PITFALL, names="same prompt, along dim=1",
    ),
    WrongAnswer(
        *BASELINE,
        '''def leave_one_out_baseline(rewards):
    K = rewards.shape[1]
    return (rewards.sum(dim=1) - rewards) / (K - 1)
''',
        "drops the summed axis: (P,) minus (P, K) does not line up",
        kind=Kind.PITFALL, names="keepdim=True",
    ),
    WrongAnswer(
        *BASELINE,
        '''from lmpolicy.tinylm.reinforce import leave_one_out_baseline
''',
        "imports the library's leave_one_out_baseline instead of writing it",
        kind=Kind.PITFALL, names="implement this yourself",
    ),
    # --- the KL penalty folded into the reward ------------------------------------------------
    WrongAnswer(
        *KL_REWARD,
        '''def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    k1 = (token_logprobs - ref_token_logprobs).detach()
    return rewards - beta * (k1 * mask).sum(dim=-1)
''',
        "masks the padding by multiplying: -inf - (-inf) = NaN at a padded position, and 0 x NaN = NaN",
        kind=Kind.PITFALL, names="not by multiplying by the mask",
    ),
    WrongAnswer(
        *KL_REWARD,
        '''def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    return rewards - beta * sequence_logprob(token_logprobs - ref_token_logprobs, mask)
''',
        "forgets to detach: the KL penalty carries a gradient, so it is no longer a reward but a loss term",
        kind=Kind.PITFALL, names="carries a gradient",
    ),
    WrongAnswer(
        *KL_REWARD,
        '''def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    k1 = (token_logprobs - ref_token_logprobs).detach()
    return rewards + beta * sequence_logprob(k1, mask)
''',
        "adds the penalty: rewards the policy for moving away from the reference",
        kind=Kind.PITFALL, names="wrong sign",
    ),
    WrongAnswer(
        *KL_REWARD,
        '''def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    k1 = (ref_token_logprobs - token_logprobs).detach()
    return rewards - beta * sequence_logprob(k1, mask)
''',
        "the log-ratio the wrong way round, log pi_ref - log pi",
        kind=Kind.PITFALL, names="wrong sign",
    ),
    WrongAnswer(
        *KL_REWARD,
        '''def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    log_ratio = (token_logprobs - ref_token_logprobs).detach()
    k3 = torch.exp(-log_ratio) - 1 + log_ratio
    return rewards - beta * sequence_logprob(k3, mask)
''',
        "uses the k3 estimator instead of k1",
        kind=Kind.PITFALL, names="uses k3",
    ),
    WrongAnswer(
        *KL_REWARD,
        '''def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    k1 = (token_logprobs - ref_token_logprobs).detach()
    return rewards - beta * sequence_logprob(k1, mask) / mask.sum(dim=-1)
''',
        "averages the log-ratio over the answer's tokens instead of summing it",
        kind=Kind.PITFALL, names="averages the log-ratio",
    ),
    WrongAnswer(
        *KL_REWARD,
        '''def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    return rewards - beta * (token_logprobs - ref_token_logprobs).detach().sum(dim=-1)
''',
        "padding not left out: sums the log-ratio over every column",
        kind=Kind.PITFALL, names="leave the padding out",
    ),
    WrongAnswer(
        *KL_REWARD,
        '''from lmpolicy.tinylm.reinforce import kl_penalized_rewards
''',
        "imports the library's kl_penalized_rewards instead of writing it",
        kind=Kind.PITFALL, names="implement this yourself",
    ),
    # --- the policy-gradient loss -------------------------------------------------------------
    WrongAnswer(
        *PG_LOSS,
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return -(advantages.detach() * (token_logprobs * mask).sum(dim=-1)).mean()
''',
        "masks the padding by multiplying: a -inf log-prob at a padded position makes the loss NaN",
        kind=Kind.PITFALL, names="masked by multiplying",
    ),
    WrongAnswer(
        *PG_LOSS,
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return (advantages.detach() * sequence_logprob(token_logprobs, mask)).mean()
''',
        "forgets the minus sign: the optimiser minimises, so this makes right answers less likely",
        kind=Kind.PITFALL, names="wrong sign",
    ),
    WrongAnswer(
        *PG_LOSS,
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return -(advantages * sequence_logprob(token_logprobs, mask)).mean()
''',
        "advantages not detached: a gradient flows into whatever computed them",
        kind=Kind.PITFALL, names="advantages.detach()",
    ),
    WrongAnswer(
        *PG_LOSS,
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    lengths = mask.sum(dim=-1)
    return -(advantages.detach() * sequence_logprob(token_logprobs, mask) / lengths).mean()
''',
        "the per-answer mean of the token log-probs (original GRPO) instead of their sum",
        kind=Kind.PITFALL, names="averages each answer's log-probs",
    ),
    WrongAnswer(
        *PG_LOSS,
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return -(advantages.detach() * sequence_logprob(token_logprobs, mask)).sum() / mask.sum()
''',
        "the token mean (DAPO): divides by the batch's number of tokens instead of its number of answers",
        kind=Kind.PITFALL, names="number of tokens",
    ),
    WrongAnswer(
        *PG_LOSS,
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return -(advantages.detach() * sequence_logprob(token_logprobs, mask)).sum()
''',
        "sums over the answers instead of averaging",
        kind=Kind.PITFALL, names="average them",
    ),
    WrongAnswer(
        *PG_LOSS,
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return -(advantages.detach() * sequence_logprob(token_logprobs, mask))
''',
        "forgets the mean: one loss per answer",
        kind=Kind.PITFALL, names="one loss per answer",
    ),
    WrongAnswer(
        *PG_LOSS,
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return -(advantages.detach() * token_logprobs.sum(dim=-1)).mean()
''',
        "padding not masked: the padded -inf log-probs are summed in",
        kind=Kind.PITFALL, names="were summed in",
    ),
    WrongAnswer(
        *PG_LOSS,
        '''def policy_gradient_loss(token_logprobs, mask, advantages):
    return -(advantages.detach() * sequence_logprob(token_logprobs, mask)).mean().item()
''',
        "returns a Python number: nothing left to backpropagate",
        kind=Kind.PITFALL, names="torch.Tensor",
    ),
    WrongAnswer(
        *PG_LOSS,
        '''from lmpolicy.tinylm.reinforce import policy_gradient_loss
''',
        "imports the library's policy_gradient_loss instead of writing it",
        kind=Kind.PITFALL, names="implement this yourself",
    ),
    # --- 11.10: which temperatures make k1 and k3 disagree ------------------------------------
    WrongAnswer(
        *EX11_10,
        '''def disagreeing_temperatures(panel, n_sigma=2.0):
    disagree = {}
    for T, row in panel.items():
        if abs(row["k1"] - row["k3"]) > n_sigma * row["k3_se"]:
            disagree[T] = "k1" if abs(row["k1"] - row["exact"]) <= abs(row["k3"] - row["exact"]) else "k3"
    return disagree
''',
        "uses only k3's error bar instead of the combined standard error of the difference",
        kind=Kind.PITFALL, names="k3's standard error alone",
    ),
    WrongAnswer(
        *EX11_10,
        '''def disagreeing_temperatures(panel, n_sigma=2.0):
    return {T: "k1" for T, row in panel.items()
            if row["k1"] - row["k3"] > n_sigma * math.sqrt(row["k1_se"] ** 2 + row["k3_se"] ** 2)}
''',
        "only looks for k3 below k1 and always names k1, as on TinyLM at low temperature",
        kind=Kind.PITFALL, names="abs(k1 - k3)",
    ),
    WrongAnswer(
        *EX11_10,
        '''def disagreeing_temperatures(panel, n_sigma=2.0):
    disagree = {}
    for T, row in panel.items():
        if abs(row["k1"] - row["k3"]) > n_sigma * (row["k1_se"] + row["k3_se"]):
            disagree[T] = "k1" if abs(row["k1"] - row["exact"]) <= abs(row["k3"] - row["exact"]) else "k3"
    return disagree
''',
        "adds the two standard errors instead of their squares",
        kind=Kind.PITFALL, names="add in squares",
    ),
    WrongAnswer(
        *EX11_10,
        '''def disagreeing_temperatures(panel, n_sigma=2.0):
    disagree = {}
    for T, row in panel.items():
        if abs(row["k1"] - row["k3"]) > n_sigma * (row["k1_se"] ** 2 + row["k3_se"] ** 2):
            disagree[T] = "k1" if abs(row["k1"] - row["exact"]) <= abs(row["k3"] - row["exact"]) else "k3"
    return disagree
''',
        "forgets the square root of the summed variances",
        kind=Kind.PITFALL, names="without the square root",
    ),
    WrongAnswer(
        *EX11_10,
        '''def disagreeing_temperatures(panel, n_sigma=2.0):
    disagree = {}
    for T, row in panel.items():
        if abs(row["k1"] - row["k3"]) >= n_sigma * math.sqrt(row["k1_se"] ** 2 + row["k3_se"] ** 2):
            disagree[T] = "k1" if abs(row["k1"] - row["exact"]) <= abs(row["k3"] - row["exact"]) else "k3"
    return disagree
''',
        ">= instead of >: equal means with zero error bars (T = 1) count as a disagreement",
        kind=Kind.PITFALL, names="strictly",
    ),
    WrongAnswer(
        *EX11_10,
        '''def disagreeing_temperatures(panel, n_sigma=2.0):
    disagree = {}
    for T, row in panel.items():
        if abs(row["k1"] - row["k3"]) > 2 * math.sqrt(row["k1_se"] ** 2 + row["k3_se"] ** 2):
            disagree[T] = "k1" if abs(row["k1"] - row["exact"]) <= abs(row["k3"] - row["exact"]) else "k3"
    return disagree
''',
        "ignores n_sigma and always uses 2",
        kind=Kind.PITFALL, names="ignores n_sigma",
    ),
    WrongAnswer(
        *EX11_10,
        '''def disagreeing_temperatures(panel, n_sigma=2.0):
    disagree = {}
    for T, row in panel.items():
        if abs(row["k1"] - row["k3"]) > n_sigma * math.sqrt(row["k1_se"] ** 2 + row["k3_se"] ** 2):
            disagree[T] = "k1" if row["k1"] > row["k3"] else "k3"
    return disagree
''',
        "names the larger of the two means instead of the one closer to the exact value",
        kind=Kind.PITFALL, names="closer to the exact value",
    ),
]
