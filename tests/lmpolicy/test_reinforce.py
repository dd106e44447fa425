"""lmpolicy.reinforce (and lmpolicy.sft): the reference pieces against their definitions, the clipped reuse
against PPO's objective, the guard against bad student pieces, the held-out probe, and short real runs."""
import dataclasses
import math

import numpy as np
import pytest
import torch

from lmpolicy import kl as kl_module
from lmpolicy import reinforce, sft
from lmpolicy.model import CHECKPOINT_PATH, TinyLM, load_pretrained
from lmpolicy.rewards import evaluate_model

needs_checkpoint = pytest.mark.skipif(not CHECKPOINT_PATH.exists(), reason="the shipped checkpoint is not there yet")


def tiny_recipe(**changes):
    """One or two cheap updates on an untrained TinyLM, measured only at the start and the end."""
    settings = dict(threads=1, prompts_per_update=8, samples_per_prompt=4, max_updates=1, eval_every_seconds=math.inf,
                    stop_at_target=False, skip_uniform_prompts=False, heldout_measured=50)
    settings.update(changes)
    return dataclasses.replace(reinforce.Recipe(), **settings)


def untrained_model():
    torch.manual_seed(0)
    return TinyLM().eval()


# --- the three pieces -------------------------------------------------------------------------------

def test_leave_one_out_baseline_is_the_mean_of_the_other_answers():
    rewards = torch.rand(5, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    got = reinforce.leave_one_out_baseline(rewards)
    for p in range(5):
        for i in range(6):
            others = [rewards[p, j].item() for j in range(6) if j != i]
            assert got[p, i].item() == pytest.approx(np.mean(others), abs=1e-12)


def test_leave_one_out_baseline_with_two_answers_is_the_other_answer():
    rewards = torch.tensor([[1.0, 0.0], [0.3, 0.7]])
    assert torch.equal(reinforce.leave_one_out_baseline(rewards), rewards.flip(1))


def test_kl_penalized_rewards_by_hand_and_without_gradient():
    rewards = torch.tensor([1.0, 0.0])
    logp = torch.tensor([[-0.1, -0.2, -0.3, -5.0], [-1.0, -1.0, -1.0, -1.0]], requires_grad=True)
    ref = torch.tensor([[-0.5, -0.2, -0.1, -9.0], [-2.0, -1.0, -1.0, -1.5]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    got = reinforce.kl_penalized_rewards(rewards, logp, ref, mask, beta=0.5)
    # row 0: log-ratios 0.4, 0, -0.2 (padding left out) -> 1 - 0.5 * 0.2; row 1: 1, 0, 0, 0.5 -> 0 - 0.5 * 1.5
    assert got.tolist() == pytest.approx([0.9, -0.75])
    assert not got.requires_grad


def test_kl_penalized_rewards_ignore_minus_infinity_padding():
    logp = torch.tensor([[-0.1, -math.inf]])
    got = reinforce.kl_penalized_rewards(torch.tensor([1.0]), logp, torch.tensor([[-0.3, -math.inf]]),
                                         torch.tensor([[1.0, 0.0]]), beta=1.0)
    assert got.item() == pytest.approx(1.0 - 0.2)


def test_policy_gradient_loss_has_the_reinforce_gradient():
    gen = torch.Generator().manual_seed(2)
    logp = (-torch.rand(4, 3, generator=gen)).requires_grad_(True)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]])
    advantages = torch.tensor([0.5, -1.0, 2.0, 0.0], requires_grad=True)
    loss = reinforce.policy_gradient_loss(logp, mask, advantages)
    loss.backward()
    expected_grad = -advantages.detach()[:, None] * mask / 4  # d/d logp[i, t] of -(1/B) sum_i A_i sum_t m logp
    assert loss.shape == ()
    assert torch.allclose(logp.grad, expected_grad)
    assert advantages.grad is None


def test_clipped_advantages_give_the_gradient_of_ppos_clipped_objective():
    gen = torch.Generator().manual_seed(3)
    new_logp = torch.randn(12, generator=gen, dtype=torch.float64).mul(0.3).requires_grad_(True)
    old_logp = torch.randn(12, generator=gen, dtype=torch.float64).mul(0.3)
    advantages = torch.randn(12, generator=gen, dtype=torch.float64)
    ratio = (new_logp - old_logp).exp()
    assert ((ratio > 1.2) | (ratio < 0.8)).any() and ((ratio < 1.2) & (ratio > 0.8)).any()
    ppo = -torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages).mean()
    (ppo_grad,) = torch.autograd.grad(ppo, new_logp)
    weights = reinforce.clipped_advantages(advantages, ratio.detach(), 0.2)
    surrogate = -(weights * new_logp).mean()  # policy_gradient_loss with one-token answers
    (surrogate_grad,) = torch.autograd.grad(surrogate, new_logp)
    assert torch.allclose(surrogate_grad, ppo_grad)


# --- the guard against bad pieces --------------------------------------------------------------------

@pytest.mark.parametrize("bad_loss, words", [
    (lambda logp, mask, adv: (logp * 0).sum() / 0.0, "NaN"),
    (lambda logp, mask, adv: -(adv * (logp * mask).sum(1)), "wrong shape"),
    (lambda logp, mask, adv: -(adv * logp.detach().sum(1)).mean(), "no gradient"),
    (lambda logp, mask, adv: -(adv * logp.sum(1)).mean().detach().item(), "not a torch.Tensor"),
])
def test_a_bad_loss_stops_the_loop_at_once_saying_which(bad_loss, words):
    model = untrained_model()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(reinforce.PieceError, match=words) as error:
        reinforce.train(tiny_recipe(), model, policy_gradient_loss=bad_loss, progress=False)
    assert "policy_gradient_loss" in str(error.value)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), "the caller's model must not change"


def test_a_baseline_of_the_wrong_shape_is_named():
    with pytest.raises(reinforce.PieceError, match=r"leave_one_out_baseline.*wrong shape"):
        reinforce.train(tiny_recipe(), untrained_model(), leave_one_out_baseline=lambda r: r.mean(dim=1),
                        progress=False)


def test_recipe_rejects_settings_it_cannot_run():
    with pytest.raises(ValueError, match="samples_per_prompt >= 2"):
        reinforce.Recipe(samples_per_prompt=1)
    with pytest.raises(ValueError, match="method"):
        reinforce.Recipe(method="ppo")


# --- measuring -----------------------------------------------------------------------------------------

def test_exact_token_kl_matches_the_numpy_kl():
    gen = torch.Generator().manual_seed(4)
    logits, ref_logits = torch.randn(3, 5, 15, generator=gen), torch.randn(3, 5, 15, generator=gen)
    got = reinforce.exact_token_kl(logits, ref_logits)
    p = torch.softmax(logits.double(), -1).numpy()
    q = torch.softmax(ref_logits.double(), -1).numpy()
    assert np.allclose(got.numpy(), kl_module.kl(p, q, axis=-1), atol=1e-10)


def test_the_probe_agrees_with_evaluate_model_and_sees_no_kl_from_itself():
    model = untrained_model()
    problems = [(a, b) for a in range(0, 100, 9) for b in range(0, 100, 13)]
    measured = reinforce.HeldoutProbe(model, problems).measure(model)
    evaluation = evaluate_model(model, problems, samples_per_problem=1)
    assert measured["greedy"] == pytest.approx(evaluation.greedy_accuracy)
    assert measured["sampled"] == pytest.approx(evaluation.expected_sampled_accuracy, rel=1e-5)
    assert measured["kl"] == pytest.approx(0.0, abs=1e-9)


def test_a_run_records_history_and_leaves_the_callers_model_alone():
    model = untrained_model()
    result = reinforce.train(tiny_recipe(max_updates=2), model, progress=False)
    h = result.history
    assert h.updates == [0, 2] and len(h.greedy) == len(h.sampled) == len(h.kl) == len(h.cpu_seconds) == 2
    assert h.answers_sampled == 2 * 8 * 4 and len(h.train_reward) == 2
    assert result.model is not model


# --- real runs from the shipped checkpoint (slow) -------------------------------------------------------

@pytest.mark.slow
@needs_checkpoint
@pytest.mark.parametrize("seed", [0, 1])
def test_a_short_reinforce_run_raises_the_expected_sampled_accuracy(seed):
    recipe = dataclasses.replace(reinforce.Recipe(), seed=seed, threads=1, prompts_per_update=256, max_updates=6,
                                 eval_every_seconds=math.inf, stop_at_target=False)
    h = reinforce.train(recipe, load_pretrained(), progress=False).history
    assert h.sampled[-1] > h.sampled[0] + 0.02
    assert 0 < h.kl[-1] < 1.0


@pytest.mark.slow
@needs_checkpoint
def test_rejection_sampling_and_sft_runs_improve_too():
    start = load_pretrained()
    rft = reinforce.train(dataclasses.replace(reinforce.Recipe(), method="rft", beta=0.0, threads=1, max_updates=6,
                                              prompts_per_update=256, eval_every_seconds=math.inf,
                                              stop_at_target=False), start, progress=False).history
    more_sft = sft.train(dataclasses.replace(sft.SFTRecipe(), n_examples=5_000, max_updates=30,
                                             eval_every_seconds=math.inf, stop_at_target=False),
                         start, progress=False).history
    for h in (rft, more_sft):
        assert h.sampled[-1] > h.sampled[0], h.label
