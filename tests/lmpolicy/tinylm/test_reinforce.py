"""lmpolicy.tinylm.reinforce (and lmpolicy.tinylm.sft, lmpolicy.tinylm.runs): the reference pieces against their
definitions, the clipped reuse against PPO's objective, the guard against bad student pieces, the held-out probe,
and short real runs."""
import dataclasses
import math

import numpy as np
import pytest
import torch

from lmpolicy.exact import kl as kl_module
from lmpolicy.tinylm import evaluate, reinforce, runs, sft
from lmpolicy.tinylm.model import CHECKPOINT_PATH, TinyLM, load_pretrained
from lmpolicy.tinylm.evaluate import evaluate_model
from tinylm_helpers import tiny_recipe, untrained_model

needs_checkpoint = pytest.mark.skipif(not CHECKPOINT_PATH.exists(), reason="the shipped checkpoint is not there yet")


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
    for temperature in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="temperature must be > 0"):
            reinforce.Recipe(temperature=temperature)


# --- scored at the sampling temperature ------------------------------------------------------------------

@needs_checkpoint
def test_every_log_prob_of_a_tempered_run_is_the_tempered_distributions_that_generate_sampled(monkeypatch):
    """At T = 0.5 the answers come from softmax(logits / T); the loss, the old policy's ratio and the KL
    penalty must all use that distribution's log-probs, and the reference's at the same T."""
    import lmpolicy.tinylm.generate as generate_module
    from lmpolicy.tinylm.logprobs import response_logprobs
    from lmpolicy.tinylm.tokenizer import PROMPT_LEN

    T, P, K = 0.5, 8, 4
    steps, generations, penalties, losses, runs_started, batches = [], [], [], [], [], []
    original_sample, original_generate = generate_module.sample_next_token, reinforce.generate
    original_start_run, original_batch = reinforce.start_run, reinforce.DistinctAnswers

    def recording_sample(logits, temperature=1.0, *args, **kwargs):
        token = original_sample(logits, temperature, *args, **kwargs)
        steps.append((logits.clone(), temperature, token.clone()))
        return token

    def recording_generate(*args, **kwargs):
        out = original_generate(*args, **kwargs)
        generations.append((kwargs.get("temperature"), out))
        return out

    def recording_start_run(*args):
        started = original_start_run(*args)
        runs_started.append(started)
        return started

    class RecordingBatch(original_batch):
        def __init__(self, answers):
            super().__init__(answers)
            batches.append(self)

    def recording_penalty(rewards, token_logprobs, ref_token_logprobs, mask, beta):
        if not runs_started:  # train's call on a small example, before the run (require_written)
            return reinforce.kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta)
        penalties.append((token_logprobs.detach().clone(), ref_token_logprobs.clone(), mask.clone()))
        return reinforce.kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta)

    def recording_loss(token_logprobs, mask, advantages):
        if not runs_started:  # train's call on a small example, before the run (require_written)
            return reinforce.policy_gradient_loss(token_logprobs, mask, advantages)
        # the policy as it is when this step's log-probs were computed, scored from scratch at T in float64
        model, ids = runs_started[0][0], batches[-1].ids
        with torch.no_grad():
            expected = response_logprobs(model(ids).double() / T, ids, PROMPT_LEN)
        losses.append((token_logprobs.detach().clone(), expected, mask.clone()))
        return reinforce.policy_gradient_loss(token_logprobs, mask, advantages)

    monkeypatch.setattr(generate_module, "sample_next_token", recording_sample)
    monkeypatch.setattr(reinforce, "generate", recording_generate)
    monkeypatch.setattr(reinforce, "start_run", recording_start_run)
    monkeypatch.setattr(reinforce, "DistinctAnswers", RecordingBatch)
    start = load_pretrained()
    reinforce.train(tiny_recipe(prompts_per_update=P, samples_per_prompt=K, temperature=T, epochs_per_batch=2),
                    start, kl_penalized_rewards=recording_penalty, policy_gradient_loss=recording_loss,
                    progress=False)

    # the distribution generate drew the training answers from, step by step: log_softmax(logits / T)
    (out,) = [g for temperature, g in generations if temperature == T]
    drawn = [(logits, token) for logits, temperature, token in steps if temperature == T and len(token) == P * K]
    assert len(drawn) == out.response_ids.shape[1]
    sampled_logp = torch.stack([torch.log_softmax(logits.double() / T, dim=-1).gather(-1, token[:, None])[:, 0]
                                for logits, token in drawn], dim=1)
    real = out.response_mask.bool()
    assert torch.equal(torch.stack([token for _, token in drawn], dim=1)[real], out.response_ids[real])

    # the KL penalty's inputs: every answer (none skipped), in order, at T; the reference at T as well
    ((policy_logp, ref_logp, mask),) = penalties
    assert torch.equal(mask, out.response_mask)
    torch.testing.assert_close(policy_logp[real].double(), sampled_logp[real], rtol=0, atol=1e-5)
    torch.testing.assert_close(ref_logp, policy_logp, rtol=0, atol=1e-6)  # before any update pi = pi_ref, at T too
    # the untempered log-probs are far from these: the checks above can tell the two apart
    with torch.no_grad():
        untempered = response_logprobs(start(out.ids).double(), out.ids, PROMPT_LEN)
    assert (untempered - sampled_logp)[real].abs().max() > 0.1

    # both steps' losses (the on-policy one and the clipped reuse, whose ratio divides these by the first's)
    # got the current policy's log-probs at T
    assert len(losses) == 2
    for got, expected, mask in losses:
        torch.testing.assert_close(got[mask.bool()].double(), expected[mask.bool()], rtol=0, atol=1e-5)
    assert not torch.allclose(losses[0][0], losses[1][0])  # the first step did move the policy


# --- measuring -----------------------------------------------------------------------------------------

def test_exact_token_kl_matches_the_numpy_kl():
    gen = torch.Generator().manual_seed(4)
    logits, ref_logits = torch.randn(3, 5, 15, generator=gen), torch.randn(3, 5, 15, generator=gen)
    got = evaluate.exact_token_kl(logits, ref_logits)
    p = torch.softmax(logits.double(), -1).numpy()
    q = torch.softmax(ref_logits.double(), -1).numpy()
    assert np.allclose(got.numpy(), kl_module.kl(p, q, axis=-1), atol=1e-10)


def test_the_probe_agrees_with_evaluate_model_and_sees_no_kl_from_itself():
    model = untrained_model()
    problems = [(a, b) for a in range(0, 100, 9) for b in range(0, 100, 13)]
    measured = runs.HeldoutProbe(model, problems).measure(model)
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
                                 eval_every_updates=1000, stop_at_target=False)
    h = reinforce.train(recipe, load_pretrained(), progress=False).history
    assert h.sampled[-1] > h.sampled[0] + 0.02
    assert 0 < h.kl[-1] < 1.0


@pytest.mark.slow
@needs_checkpoint
def test_rejection_sampling_and_sft_runs_improve_too():
    start = load_pretrained()
    rft = reinforce.train(dataclasses.replace(reinforce.Recipe(), method="rft", beta=0.0, threads=1, max_updates=6,
                                              prompts_per_update=256, eval_every_updates=1000,
                                              stop_at_target=False), start, progress=False).history
    more_sft = sft.train(dataclasses.replace(sft.SFTRecipe(), n_examples=5_000, max_updates=30,
                                             eval_every_updates=1000, stop_at_target=False),
                         start, progress=False).history
    for h in (rft, more_sft):
        assert h.sampled[-1] > h.sampled[0], h.label


@pytest.mark.slow
@needs_checkpoint
def test_a_rejection_sampling_run_with_a_kl_loss_term_trains_and_feels_the_term():
    """RFT computes no advantages from the reference, but a KL loss term needs its log-probs all the same."""

    from lmpolicy.tinylm import kl_placement

    recipe = dataclasses.replace(reinforce.Recipe(), method="rft", beta=0.5, threads=1, max_updates=2,
                                 prompts_per_update=64, eval_every_updates=1000, stop_at_target=False)
    calls = []

    def counted_k3(token_logp, ref_token_logp, mask, weights):
        calls.append(ref_token_logp.shape)
        return kl_placement.kl_loss_term(token_logp, ref_token_logp, mask, weights, "k3")

    result = reinforce.train(recipe, load_pretrained(), progress=False, kl_loss_term=counted_k3)
    assert calls and all(len(shape) == 2 for shape in calls)
    assert len(result.history.train_reward) == 2


# --- PromptPicker ----------------------------------------------------------------------------------------

def picker(n_prompts, seed=0, prioritize=True):
    return reinforce.PromptPicker(n_prompts, torch.Generator().manual_seed(seed), prioritize=prioritize)


@pytest.mark.parametrize("prioritize", [True, False])
def test_prompt_picker_picks_n_distinct_prompts(prioritize):
    p = picker(50, prioritize=prioritize)
    p.record(torch.arange(10), torch.ones(10, 4))  # some prompts almost never wanted, still no repeats
    for n in (1, 7, 50):
        chosen = p.pick(n)
        assert len(chosen) == n and len(set(chosen.tolist())) == n
        assert 0 <= chosen.min() and chosen.max() < 50


@pytest.mark.parametrize("prioritize", [True, False])
def test_prompt_picker_rejects_more_prompts_than_there_are(prioritize):
    with pytest.raises(ValueError, match="51"):
        picker(50, prioritize=prioritize).pick(51)


def test_prompt_picker_draws_the_always_wrong_prompts_far_more_often_than_the_always_right():
    p = picker(30, seed=1)
    right, wrong, untried = torch.arange(0, 10), torch.arange(10, 20), torch.arange(20, 30)
    for _ in range(3):
        p.record(right, torch.ones(10, 8))
        p.record(wrong, torch.zeros(10, 8))
    counts = torch.zeros(30)
    for _ in range(2000):
        counts[p.pick(5)] += 1
    assert counts[wrong].sum() > 3 * counts[right].sum()
    assert counts[untried].sum() > 2 * counts[right].sum()
    assert (counts[untried] > 100).all()  # never-tried prompts are still drawn, each of them
    assert counts[wrong].sum() > counts[untried].sum()


def test_prompt_picker_without_priority_draws_uniformly_whatever_was_recorded():
    p = picker(20, seed=2, prioritize=False)
    p.record(torch.arange(10), torch.ones(10, 8))
    p.record(torch.arange(10, 20), torch.zeros(10, 8))
    counts = torch.zeros(20)
    for _ in range(4000):
        counts[p.pick(5)] += 1
    expected = 4000 * 5 / 20  # 1000 draws each; the binomial sd is about 27
    assert ((counts > 0.85 * expected) & (counts < 1.15 * expected)).all(), counts


def test_prompt_picker_success_rate_halves_older_counts_by_hand():
    p = picker(4)
    # first visit of prompts 1 and 3: 3 of 4 right, and 0 of 4 right
    p.record(torch.tensor([1, 3]), torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]))
    # second visit of prompt 1: 1 of 4 right. wins = 3 / 2 + 1 = 2.5, tries = 4 / 2 + 4 = 6
    p.record(torch.tensor([1]), torch.tensor([[0.0, 1.0, 0.0, 0.0]]))
    expected = torch.tensor([1 / 2, (2.5 + 1) / (6 + 2), 1 / 2, (0 + 1) / (4 + 2)])
    torch.testing.assert_close(p.success_rate(), expected)
    # a third visit of prompt 3: 4 of 4 right. wins = 0 / 2 + 4 = 4, tries = 4 / 2 + 4 = 6
    p.record(torch.tensor([3]), torch.ones(1, 4))
    assert p.success_rate()[3].item() == pytest.approx((4 + 1) / (6 + 2))
    assert p.success_rate()[1].item() == pytest.approx(3.5 / 8)  # untouched by the other prompt's visit


# --- one pass per distinct answer ------------------------------------------------------------------------

def test_one_pass_per_distinct_answer_with_summed_scaled_advantages_gives_the_full_gradient():
    from lmpolicy.tinylm.generate import response_mask
    from lmpolicy.tinylm.logprobs import response_logprobs
    from lmpolicy.tinylm.model import TinyLMConfig
    from lmpolicy.tinylm.tokenizer import PROMPT_LEN, encode_prompts, encode_responses

    torch.manual_seed(0)
    model = TinyLM(TinyLMConfig())
    prompts = encode_prompts([(3, 4)] * 4 + [(37, 48)] * 4 + [(9, 9)] * 4)
    responses = encode_responses([7, 7, 8, 7, 85, 85, 85, 84, 18, 81, 18, 18])
    responses[3, 2:] = torch.tensor([5, 6])  # junk after <eos>: the same answer to the verifier, another row here
    ids = torch.cat([prompts, responses], dim=1)
    advantages = torch.randn(12, generator=torch.Generator().manual_seed(1))

    def gradient(rows, adv):
        model.zero_grad()
        token_logp = response_logprobs(model(rows), rows, PROMPT_LEN)
        reinforce.policy_gradient_loss(token_logp, response_mask(rows[:, PROMPT_LEN:]), adv).backward()
        return [p.grad.clone() for p in model.parameters()]

    full = gradient(ids, advantages)
    distinct, inverse = torch.unique(ids, dim=0, return_inverse=True)
    U, B = len(distinct), len(ids)
    assert U == 7  # 7, 8, 7-with-junk, 85, 84, 18, 81
    summed = torch.zeros(U).index_add_(0, inverse, advantages) * (U / B)
    deduplicated = gradient(distinct, summed)
    for a, b in zip(deduplicated, full):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert sum(g.abs().sum() for g in full) > 0
    # without the distinct / all scaling the gradient is U / B times too large: the scaling matters
    unscaled = gradient(distinct, summed * (B / U))
    assert not torch.allclose(unscaled[0], full[0], rtol=1e-3, atol=1e-6)


@needs_checkpoint
def test_a_tiny_run_records_each_chosen_prompts_own_verifier_rewards(monkeypatch):
    from lmpolicy.tinylm.problems import training_problems
    from lmpolicy.tinylm.rewards import verifier_reward
    from lmpolicy.tinylm.tokenizer import PROMPT_LEN, encode_prompts

    seen, generations = [], []

    class RecordingPicker(reinforce.PromptPicker):
        def record(self, chosen, rewards):
            seen.append((chosen.clone(), rewards.clone()))
            super().record(chosen, rewards)

    original_generate = reinforce.generate

    def recording_generate(*args, **kwargs):
        out = original_generate(*args, **kwargs)
        generations.append(out)
        return out

    monkeypatch.setattr(reinforce, "PromptPicker", RecordingPicker)
    monkeypatch.setattr(reinforce, "generate", recording_generate)
    # from the checkpoint, so that the rewards are a mix of 1s and 0s and a mix-up between prompts would show
    result = reinforce.train(tiny_recipe(max_updates=3, epochs_per_batch=3, skip_uniform_prompts=True),
                             load_pretrained(), progress=False)
    h = result.history
    assert h.answers_sampled == 3 * 8 * 4 and len(seen) == 3
    assert 0 < torch.cat([rewards for _, rewards in seen]).mean() < 1
    train_prompts = encode_prompts(training_problems())
    train_generations = [g for g in generations if len(g.ids) == 8 * 4]  # not the held-out probe's, if any
    assert len(train_generations) == 3
    for (chosen, rewards), out, mean_reward in zip(seen, train_generations, h.train_reward):
        assert len(set(chosen.tolist())) == 8
        assert torch.equal(out.ids[:, :PROMPT_LEN], train_prompts[chosen].repeat_interleave(4, 0))
        expected = verifier_reward(out.ids[:, :PROMPT_LEN], out.response_ids).view(8, 4)
        assert torch.equal(rewards, expected)
        assert rewards.mean().item() == pytest.approx(mean_reward)
    assert all(torch.isfinite(p).all() for p in result.model.parameters())


@needs_checkpoint
def test_the_loops_loss_over_distinct_answers_equals_the_loss_over_all_answers(monkeypatch):
    from lmpolicy.tinylm.logprobs import response_logprobs, sequence_logprob
    from lmpolicy.tinylm.rewards import verifier_reward
    from lmpolicy.tinylm.tokenizer import PROMPT_LEN

    start, generations, losses = load_pretrained(), [], []
    original_generate = reinforce.generate

    def recording_generate(*args, **kwargs):
        out = original_generate(*args, **kwargs)
        generations.append(out)
        return out

    def recording_loss(token_logp, mask, advantages):
        loss = reinforce.policy_gradient_loss(token_logp, mask, advantages)
        if generations:  # not train's call on a small example before the run (require_written)
            losses.append((loss.item(), len(advantages)))
        return loss

    monkeypatch.setattr(reinforce, "generate", recording_generate)
    # no KL, no normalisation, one step: each answer's advantage is its reward minus the mean of the other 3
    reinforce.train(tiny_recipe(prompts_per_update=16, beta=0.0, normalize_advantages=False, epochs_per_batch=1),
                    start, policy_gradient_loss=recording_loss, progress=False)
    (out,) = [g for g in generations if len(g.ids) == 16 * 4]
    rewards = verifier_reward(out.ids[:, :PROMPT_LEN], out.response_ids).view(16, 4)
    assert 0 < rewards.mean() < 1
    advantages = rewards - (rewards.sum(dim=1, keepdim=True) - rewards) / 3
    with torch.no_grad():
        logp = sequence_logprob(response_logprobs(start(out.ids), out.ids, PROMPT_LEN), out.response_mask)
    full_loss = -(advantages.reshape(-1) * logp).mean().item()
    ((loss, rows),) = losses
    assert rows < 16 * 4  # the loop did run on fewer rows than answers
    assert loss == pytest.approx(full_loss, rel=1e-4, abs=1e-6)
