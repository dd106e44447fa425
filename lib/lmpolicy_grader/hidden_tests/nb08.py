"""Notebook 08's hidden tests: 11.10 on panels the student never saw (one drawn from the hidden seed), the three
REINFORCE pieces on other shapes, masks and batches, and the three pieces together in a short seeded run of the
provided training loop."""
from __future__ import annotations

import dataclasses
import math

import torch
from numpy.random import default_rng

from lmpolicy.exercises.nb08 import (KL_PENALIZED_REWARDS, LEAVE_ONE_OUT_BASELINE,
                                     POLICY_GRADIENT_LOSS, check_baseline, check_disagreeing, check_penalized,
                                     check_pg_loss, kl_reward_example, pg_loss_example, row)
from lmpolicy.notebook import checks
from lmpolicy.per_student.hidden_inputs import hidden_seed
from lmpolicy.tinylm import reinforce as library_reinforce
from lmpolicy.tinylm.model import load_pretrained
from lmpolicy_grader.class_grading import measured_runs


def _drawn_panel(rng):
    """A panel of six temperatures, its error bars, its n_sigma and the answer, drawn from ``rng``: rows built at
    least half a combined error away from the threshold, so the right answer is clear by construction."""
    n_drawn = round(float(rng.uniform(1.5, 4.0)), 2)
    panel, expected = {}, {}
    verdicts = ["k1", "k3", "agree"] + [str(v) for v in rng.choice(["k1", "k3", "agree"], size=3)]
    rng.shuffle(verdicts)
    for T, verdict in zip(sorted(rng.choice([t for t in range(5, 61) if t != 20], size=6, replace=False)), verdicts):
        T = round(float(T) * 0.05, 2)  # temperatures between 0.25 and 3, but not 1 (where both are exactly 0)
        exact, k1_se, k3_se = (float(v) for v in rng.uniform([0.15, 0.001, 0.001], [0.4, 0.01, 0.01]))
        spread = math.sqrt(k1_se ** 2 + k3_se ** 2)
        if verdict in ("k1", "k3"):  # apart by more than n_sigma combined errors; the verdict's mean near the exact KL
            gap = float(rng.uniform(n_drawn + 0.5, n_drawn + 3.0)) * spread
            near = exact + float(rng.uniform(-0.25, 0.25)) * gap
            far = near + float(rng.choice([-1.0, 1.0])) * gap
            k1, k3 = (near, far) if verdict == "k1" else (far, near)
            expected[T] = verdict
        else:  # within n_sigma combined errors: they agree
            k1 = exact + float(rng.uniform(-0.5, 0.5)) * spread
            k3 = k1 + float(rng.uniform(-1.0, 1.0)) * (n_drawn - 0.5) * spread
        panel[T] = row(k1, k1_se, k3, k3_se, exact)
    return panel, expected, n_drawn


def disagreeing_temperatures(student_disagreeing_temperatures) -> None:
    def check(panel, expected, n_sigma=2.0):
        check_disagreeing(student_disagreeing_temperatures, panel, expected, n_sigma=n_sigma)

    # no disagreement at all; an empty panel
    check({0.5: row(0.03, 0.003, 0.026, 0.005, 0.033)}, {})
    check({}, {})
    # k3 above k1, and closer to the exact value
    check({1.5: row(0.01, 0.001, 0.05, 0.002, 0.049)}, {1.5: "k3"})
    # the combined error decides: 0.03 apart, k1_se = 0.012, k3_se = 0.005 -> 2 sigma = 0.026 (disagree); with
    # only k3's error bar a wrong rule would use 0.01, and with the sum of the errors 0.034 (agree)
    check({0.5: row(0.06, 0.012, 0.03, 0.005, 0.061)}, {0.5: "k1"})
    check({0.5: row(0.06, 0.02, 0.03, 0.005, 0.061)}, {})  # 2 sigma = 0.041: agree
    # n_sigma is honoured: 3 combined errors apart disagree at 2 sigma but not at 4
    three_apart = {0.75: row(0.02, 0.003, 0.02 - 3 * 0.005, 0.004, 0.021)}
    check(three_apart, {0.75: "k1"}, n_sigma=2.0)
    check(three_apart, {}, n_sigma=4.0)
    # the direction of the difference does not matter
    check({2.0: row(0.30, 0.01, 0.20, 0.01, 0.21)}, {2.0: "k3"})
    # a panel drawn from the hidden seed, new for every submission
    panel, expected, n_sigma = _drawn_panel(default_rng(hidden_seed(1110)))
    check(panel, expected, n_sigma=n_sigma)


def leave_one_out_baseline(student_leave_one_out_baseline) -> None:
    with LEAVE_ONE_OUT_BASELINE.blocked():  # the same shortcuts on the hidden inputs
        # other numbers of answers per prompt (K = 2 is the smallest), one prompt, real-valued (KL-penalised) rewards
        for seed, (P, K) in enumerate([(1, 2), (5, 2), (3, 8), (1, 5), (6, 3)]):
            generator = torch.Generator().manual_seed(hidden_seed(300 + seed))
            check_baseline(student_leave_one_out_baseline, (torch.rand(P, K, generator=generator) > 0.5).float())
            check_baseline(student_leave_one_out_baseline, torch.randn(P, K, generator=generator, dtype=torch.float64))
        # property: the advantages r - b of each prompt add up to 0
        rewards = torch.randn(4, 6, generator=torch.Generator().manual_seed(hidden_seed(9)))
        advantages = rewards - checks.call_student(student_leave_one_out_baseline, rewards.clone())
        checks.check_close(advantages.sum(dim=1), torch.zeros(4),
                           "the sum of r - baseline over each prompt's answers", atol=1e-5)


def kl_penalized_rewards(student_kl_penalized_rewards) -> None:
    def check(*batch, beta):
        check_penalized(student_kl_penalized_rewards, *batch, beta=beta)

    rewards, logp, ref_logp, mask = kl_reward_example()
    with KL_PENALIZED_REWARDS.blocked():  # the same shortcuts on the hidden inputs
        # beta = 0 gives the rewards back; integer and boolean masks; a batch of one
        check(rewards, logp, ref_logp, mask, beta=0.0)
        check(rewards, logp, ref_logp, mask.long(), beta=0.5)
        check(rewards[:1], logp[:1], ref_logp[:1], mask[:1].bool(), beta=0.05)
        # padding holding -inf under both models (a sampler that forbade the token): -inf - (-inf) is NaN,
        # so the padding must be left out by selecting, not by multiplying with the mask
        logp_inf, ref_inf = logp.clone(), ref_logp.clone()
        logp_inf[~mask.bool()], ref_inf[~mask.bool()] = -math.inf, -math.inf
        check(rewards, logp_inf, ref_inf, mask, beta=0.1)
        # random batches with random lengths
        for seed, (B, R) in enumerate([(7, 4), (2, 9), (16, 3)]):
            generator = torch.Generator().manual_seed(hidden_seed(400 + seed))
            lengths = torch.randint(1, R + 1, (B,), generator=generator)
            random_mask = (torch.arange(R)[None, :] < lengths[:, None]).float()
            check((torch.rand(B, generator=generator) > 0.5).float(), -3 * torch.rand(B, R, generator=generator),
                  -3 * torch.rand(B, R, generator=generator), random_mask, beta=0.2)


# The three pieces together: a short seeded run of the provided loop from the shipped checkpoint.
SHORT_RUN = dataclasses.replace(library_reinforce.Recipe(), seed=0, threads=1, prompts_per_update=256, max_updates=6,
                                eval_every_updates=6, stop_at_target=False)
LEAST_GAIN = 0.02  # the rise in expected sampled accuracy that correct pieces clearly exceed in SHORT_RUN


PIECES = ("leave_one_out_baseline", "kl_penalized_rewards", "policy_gradient_loss")


def short_run(namespace: dict):
    """SHORT_RUN trained with the student's three pieces, read by name from ``namespace``; its history."""
    pieces = {}
    for name in PIECES:
        checks.check(callable(namespace.get(name)), f"{name} is not defined: run its answer cell")
        pieces[name] = namespace[name]
    try:
        return library_reinforce.train(SHORT_RUN, load_pretrained(), progress=False, **pieces).history
    except library_reinforce.PieceError as error:
        checks.check(False, f"the training loop stopped on your pieces: {error}")


def policy_gradient_loss(student_policy_gradient_loss, namespace: dict) -> None:
    """The loss on hidden batches, then the three pieces of ``namespace`` (the test cell's ``globals()``) in
    SHORT_RUN. The other two pieces are read from the namespace by name, not passed: the code rule holds the
    names a test cell reads to this exercise's answer cell, and they are other exercises' answers."""
    logp, mask = pg_loss_example()
    with POLICY_GRADIENT_LOSS.blocked():  # the same shortcuts on the hidden inputs
        # padding at -inf (multiplying by the mask gives NaN), a batch of one, boolean masks, zero advantages
        check_pg_loss(student_policy_gradient_loss, logp.masked_fill(~mask.bool(), -math.inf), mask,
                      torch.tensor([1.0, -0.5, 2.0]))
        check_pg_loss(student_policy_gradient_loss, logp[:1], mask[:1].bool(), torch.tensor([-2.0]))
        check_pg_loss(student_policy_gradient_loss, logp, mask, torch.zeros(3))
        for seed, (B, R) in enumerate([(8, 4), (2, 7), (32, 3)]):
            generator = torch.Generator().manual_seed(hidden_seed(500 + seed))
            lengths = torch.randint(1, R + 1, (B,), generator=generator)
            check_pg_loss(student_policy_gradient_loss, -3 * torch.rand(B, R, generator=generator),
                          (torch.arange(R)[None, :] < lengths[:, None]).float(), torch.randn(B, generator=generator))

    history = short_run(namespace)
    measured_runs.show(measured_runs.RunPoint.of(history))  # the student's point on the class's reward-KL plane
    gain = history.sampled[-1] - history.sampled[0]
    checks.check(gain > LEAST_GAIN, f"6 REINFORCE updates with your three pieces changed the expected sampled "
                 f"accuracy by {gain:+.3f} (from {history.sampled[0]:.3f}); with correct pieces it rises clearly")
