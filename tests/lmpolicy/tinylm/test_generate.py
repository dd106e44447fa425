import math

import pytest
import torch

from tinylm_helpers import sharpened_tinylm

from lmpolicy.tinylm.generate import Generation, generate, response_mask, sample_next_token
from lmpolicy.tinylm.problems import all_problems
from lmpolicy.tinylm.tokenizer import EOS, PAD, PROMPT_LEN, RESPONSE_LEN, encode_prompts


@pytest.fixture(scope="module")
def model():
    """A random TinyLM with sharpened weights: peaked, varied next-token distributions (eos, pad included)."""
    return sharpened_tinylm(seed=1, scale=8.0)


@pytest.fixture(scope="module")
def prompts():
    problems = all_problems()[::37]  # 271 problems with 1- and 2-digit operands
    return encode_prompts(problems)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def brute_force_greedy(model, prompts):
    """Greedy decoding one row at a time, without padding the batch or caching anything."""
    rows = []
    for prompt in prompts:
        ids = prompt[None]
        done = False
        for _ in range(RESPONSE_LEN):
            token = PAD if done else model(ids)[0, -1].argmax().item()
            done = done or token == EOS
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        rows.append(ids[0])
    return torch.stack(rows)


def test_output_shapes_and_prompt_kept(model, prompts):
    out = generate(model, prompts, generator=gen(0))
    assert isinstance(out, Generation)
    assert out.ids.shape == (len(prompts), PROMPT_LEN + RESPONSE_LEN)
    assert out.response_mask.shape == (len(prompts), RESPONSE_LEN)
    assert torch.equal(out.ids[:, :PROMPT_LEN], prompts)
    assert torch.equal(out.response_ids, out.ids[:, PROMPT_LEN:])


def test_temperature_zero_is_argmax_at_every_step(model, prompts):
    out = generate(model, prompts, temperature=0)
    assert torch.equal(out.ids, brute_force_greedy(model, prompts))


@pytest.mark.parametrize("settings", [dict(temperature=0), dict(temperature=1.0), dict(temperature=0.7, top_k=3),
                                      dict(temperature=1.3, top_p=0.8)])
def test_kv_cache_gives_exactly_the_same_tokens_as_recomputing(model, prompts, settings):
    cached = generate(model, prompts, generator=gen(5), use_cache=True, **settings)
    uncached = generate(model, prompts, generator=gen(5), use_cache=False, **settings)
    assert torch.equal(cached.ids, uncached.ids)
    assert torch.equal(cached.response_mask, uncached.response_mask)


def test_top_k_1_and_tiny_top_p_are_greedy(model, prompts):
    greedy = generate(model, prompts, temperature=0).ids
    assert torch.equal(generate(model, prompts, temperature=1.0, top_k=1, generator=gen(3)).ids, greedy)
    assert torch.equal(generate(model, prompts, temperature=1.0, top_p=1e-6, generator=gen(3)).ids, greedy)


def test_same_seed_same_samples_and_other_seed_other_samples(model, prompts):
    a = generate(model, prompts, generator=gen(11)).ids
    b = generate(model, prompts, generator=gen(11)).ids
    c = generate(model, prompts, generator=gen(12)).ids
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_response_mask_is_one_up_to_and_including_eos_and_tokens_after_eos_are_pad(model, prompts):
    out = generate(model, prompts, generator=gen(0))
    responses = out.response_ids
    assert (responses == EOS).any(), "the test model should end some responses early"
    for row, mask in zip(responses.tolist(), out.response_mask.tolist()):
        end = row.index(EOS) + 1 if EOS in row else RESPONSE_LEN
        assert mask == [1.0] * end + [0.0] * (RESPONSE_LEN - end)
        assert row[end:] == [PAD] * (RESPONSE_LEN - end)


def test_response_mask_on_hand_made_rows():
    rows = torch.tensor([[8, 5, EOS, PAD], [EOS, PAD, PAD, PAD], [1, 9, 8, EOS], [1, 2, 3, 4], [3, EOS, 4, EOS]])
    expected = [[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0]]
    assert response_mask(rows).tolist() == expected


def test_sampling_follows_softmax_with_temperature():
    # the chapter's logits (2, 1, 0): at T = 0.5 the probabilities are 0.867, 0.117, 0.016
    logits = torch.tensor([2.0, 1.0, 0.0]).repeat(40_000, 1)
    counts = torch.bincount(sample_next_token(logits, 0.5, generator=gen(0)), minlength=3).float()
    expected = [math.exp(2 * z) for z in (2, 1, 0)]
    expected = torch.tensor(expected) / sum(expected)
    torch.testing.assert_close(counts / counts.sum(), expected, rtol=0, atol=0.01)
    torch.testing.assert_close(expected, torch.tensor([0.867, 0.117, 0.016]), rtol=0, atol=6e-4)


def test_top_k_and_top_p_truncate_then_renormalise():
    logits = torch.tensor([2.0, 1.0, 0.0]).repeat(40_000, 1)  # probabilities 0.665, 0.245, 0.090
    p_top2 = torch.tensor([math.e, 1.0, 0.0]) / (math.e + 1)
    for kwargs in (dict(top_k=2), dict(top_p=0.9)):  # the top two hold 0.910 >= 0.9
        counts = torch.bincount(sample_next_token(logits, 1.0, generator=gen(1), **kwargs), minlength=3).float()
        torch.testing.assert_close(counts / counts.sum(), p_top2, rtol=0, atol=0.01)
    counts = torch.bincount(sample_next_token(logits, 1.0, top_p=0.95, generator=gen(1)), minlength=3)
    assert counts[2] > 0  # 0.910 < 0.95, so the third token stays


@pytest.mark.parametrize("bad", [dict(temperature=-0.1), dict(temperature=float("nan")), dict(top_p=0.0),
                                 dict(top_p=1.5), dict(top_p=-0.2), dict(top_k=0)])
def test_bad_settings_raise_clear_errors(model, prompts, bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        generate(model, prompts[:2], **bad)


def test_bad_prompt_shape_is_rejected(model):
    with pytest.raises(ValueError, match="shape"):
        generate(model, torch.zeros(2, 5, dtype=torch.long))


def test_kv_cache_matches_recomputing_on_the_shipped_checkpoint():
    from lmpolicy.tinylm.model import load_pretrained
    from lmpolicy.tinylm.problems import heldout_problems

    trained, prompts = load_pretrained(), encode_prompts(heldout_problems())
    for temperature in (0.0, 1.0):
        cached = generate(trained, prompts, temperature=temperature, generator=gen(2), use_cache=True)
        uncached = generate(trained, prompts, temperature=temperature, generator=gen(2), use_cache=False)
        assert torch.equal(cached.ids, uncached.ids)


# --- samples_per_prompt: K answers per prompt, the prompt's keys and values shared ---------------------

def test_samples_per_prompt_gives_k_rows_per_prompt_in_repeat_interleave_order(model, prompts):
    K = 3
    out = generate(model, prompts[:20], samples_per_prompt=K, generator=gen(0))
    assert out.ids.shape == (20 * K, PROMPT_LEN + RESPONSE_LEN)
    assert out.response_mask.shape == (20 * K, RESPONSE_LEN)
    for b in range(20):
        for k in range(K):
            assert torch.equal(out.ids[b * K + k, :PROMPT_LEN], prompts[b])


def test_samples_per_prompt_draws_k_different_answers_not_one_answer_copied(model, prompts):
    K = 4
    responses = generate(model, prompts, samples_per_prompt=K, generator=gen(1)).response_ids.view(-1, K, RESPONSE_LEN)
    all_same = (responses == responses[:, :1]).all(dim=2).all(dim=1)
    assert (~all_same).sum() > len(prompts) // 2


@pytest.mark.parametrize("settings", [dict(temperature=0), dict(temperature=1.0), dict(temperature=0.7, top_k=3),
                                      dict(temperature=1.3, top_p=0.8)])
def test_samples_per_prompt_with_cache_equals_recomputing_and_repeated_prompts(model, prompts, settings):
    K = 3
    cached = generate(model, prompts, samples_per_prompt=K, generator=gen(5), **settings)
    uncached = generate(model, prompts, samples_per_prompt=K, generator=gen(5), use_cache=False, **settings)
    repeated = generate(model, prompts.repeat_interleave(K, 0), generator=gen(5), **settings)
    # the logits of the shared prompt pass are bit-identical to those of the repeated prompts here, so the
    # same generator draws the same tokens: exact equality, not just the same distribution
    assert torch.equal(cached.ids, uncached.ids)
    assert torch.equal(cached.ids, repeated.ids)
    assert torch.equal(cached.response_mask, repeated.response_mask)


def test_samples_per_prompt_greedy_answers_are_the_brute_force_greedy_answer_k_times(model, prompts):
    out = generate(model, prompts[:40], temperature=0, samples_per_prompt=2)
    assert torch.equal(out.ids, brute_force_greedy(model, prompts[:40]).repeat_interleave(2, 0))


def test_samples_per_prompt_one_is_the_default(model, prompts):
    assert torch.equal(generate(model, prompts, samples_per_prompt=1, generator=gen(4)).ids,
                       generate(model, prompts, generator=gen(4)).ids)


def test_samples_per_prompt_leaves_the_models_training_mode_alone(model, prompts):
    model.train()
    try:
        generate(model, prompts[:3], samples_per_prompt=2, generator=gen(0))
        assert model.training
    finally:
        model.eval()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "2"])
def test_bad_samples_per_prompt_is_rejected(model, prompts, bad):
    with pytest.raises(ValueError, match="samples_per_prompt"):
        generate(model, prompts[:2], samples_per_prompt=bad)


# --- one prompt pass shared by several continuations (the held-out probe's measurements) -------------------

def test_generating_from_a_kept_prompt_pass_gives_the_same_tokens_and_leaves_the_pass_as_it_was(model, prompts):
    from lmpolicy.tinylm.generate import run_prompts

    kept = run_prompts(model, prompts)
    length = kept.cache.length
    for settings in (dict(temperature=0), dict(temperature=1.0, samples_per_prompt=3)):
        alone = generate(model, prompts, generator=gen(5), **settings)
        shared = generate(model, prompts, generator=gen(5), prompts=kept, **settings)
        assert torch.equal(alone.ids, shared.ids)
    assert kept.cache.length == length == PROMPT_LEN  # continuing copied the cache, never extended it


def test_a_kept_prompt_pass_of_other_prompts_or_without_the_cache_is_refused(model, prompts):
    from lmpolicy.tinylm.generate import run_prompts

    kept = run_prompts(model, prompts[:5])
    with pytest.raises(ValueError, match="pass over these prompt_ids"):
        generate(model, prompts[5:10], prompts=kept)
    with pytest.raises(ValueError, match="use_cache=True"):
        generate(model, prompts[:5], prompts=kept, use_cache=False)


def test_answer_logits_are_the_full_forwards_logits_that_predict_the_answer(model, prompts):
    from lmpolicy.tinylm.generate import answer_logits, run_prompts

    answers = generate(model, prompts, generator=gen(3))
    kept = run_prompts(model, prompts)
    with torch.no_grad():
        full = model(answers.ids)[:, PROMPT_LEN - 1:-1]
    # the same sums in another order: float32 rounding only (this model's logits are large: up to 2e-4 apart)
    torch.testing.assert_close(answer_logits(model, kept, answers.response_ids), full, atol=5e-4, rtol=1e-4)
    torch.testing.assert_close(answer_logits(model, kept, answers.response_ids), full, atol=5e-4, rtol=1e-4)  # again
    with pytest.raises(ValueError, match="response_ids must have shape"):
        answer_logits(model, kept, answers.response_ids[:3])
