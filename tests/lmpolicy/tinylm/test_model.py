import io

import pytest
import torch

from tinylm_helpers import sharpened_tinylm

from lmpolicy.tinylm.model import KVCache, TinyLM, TinyLMConfig
from lmpolicy.tinylm.tokenizer import PAD, encode_prompts, encode_responses


@pytest.fixture(scope="module")
def model():
    return sharpened_tinylm(seed=0, scale=20.0)


def test_parameter_count_is_about_100k_and_matches_the_architecture():
    m = TinyLM(TinyLMConfig())
    c = m.config
    d, f, v, n = c.d_model, c.d_mlp, c.vocab_size, c.block_size
    per_block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
    expected = v * d + n * d + c.n_layer * per_block + 2 * d + (d * v + v)
    assert m.num_parameters() == expected == 102_735
    buffer = io.BytesIO()
    torch.save(m.state_dict(), buffer)
    assert 300_000 < buffer.tell() < 600_000


def test_logits_shape_and_finite_even_for_padding_rows(model):
    ids = torch.cat([encode_prompts([(3, 4), (0, 0)]), encode_responses([7, 0])], dim=1)
    ids[1] = PAD  # a row that is nothing but padding
    logits = model(ids)
    assert logits.shape == (2, 11, 15)
    assert torch.isfinite(logits).all()


def test_left_padding_changes_nothing_because_position_ids_skip_it(model):
    """<pad> <pad> <bos> 3 + 4 = must be read exactly like <bos> 3 + 4 = (positions 0..4 either way)."""
    padded = encode_prompts([(3, 4)])
    torch.testing.assert_close(model(padded)[:, 2:], model(padded[:, 2:]), rtol=1e-4, atol=1e-4)


def test_causality_future_tokens_do_not_change_earlier_logits(model):
    prompt = encode_prompts([(37, 48)])
    a = torch.cat([prompt, encode_responses([85])], dim=1)
    b = torch.cat([prompt, encode_responses([12])], dim=1)
    la, lb = model(a), model(b)
    torch.testing.assert_close(la[:, :7], lb[:, :7], rtol=1e-4, atol=1e-4)
    assert not torch.allclose(la[:, 7:], lb[:, 7:], atol=1e-3)


def test_padding_is_never_attended_to(model):
    ids = torch.cat([encode_prompts([(3, 4)]), encode_responses([7])], dim=1)
    is_pad = ids[0] == PAD
    before = model(ids)
    # give the padding token a very different embedding: real tokens must not notice
    changed = TinyLM(model.config).eval()
    changed.load_state_dict(model.state_dict())
    with torch.no_grad():
        changed.tok_emb.weight[PAD] = torch.randn(model.config.d_model) * 50
    after = changed(ids)
    torch.testing.assert_close(after[0, ~is_pad], before[0, ~is_pad], rtol=1e-4, atol=1e-4)
    assert not torch.allclose(after[0, is_pad], before[0, is_pad], atol=1e-3)  # the change did something


def test_kv_cache_forward_equals_full_forward(model):
    ids = torch.cat([encode_prompts([(3, 4), (37, 48)]), encode_responses([7, 85])], dim=1)
    full = model(ids)
    cache = KVCache()
    pieces = [model(ids[:, :7], cache=cache)]
    for t in range(7, 11):
        pieces.append(model(ids[:, t : t + 1], cache=cache))
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-4)
    assert cache.length == 11


def test_too_long_input_is_rejected(model):
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 12, dtype=torch.long))


def test_kv_cache_repeat_rows_continues_like_a_cache_of_the_repeated_prompts(model):
    prompts = encode_prompts([(3, 4), (37, 48), (0, 9)])  # different amounts of left padding
    shared = KVCache()
    first_shared = model(prompts, cache=shared)
    shared.repeat_rows(3)
    direct = KVCache()
    first_direct = model(prompts.repeat_interleave(3, 0), cache=direct)
    # a batch of 3 rows and one of 9 are multiplied in different blocks (MKL's compatible path, lmpolicy.arithmetic):
    # the same logits up to float32 rounding, as the steps below (one step differed by 2.2e-5 on an AMD EPYC
    # without AVX-512: CI)
    rounding = {"rtol": 1e-5, "atol": 1e-4}
    torch.testing.assert_close(first_shared.repeat_interleave(3, 0), first_direct, **rounding)
    assert shared.length == direct.length == 7
    assert torch.equal(shared.n_real, direct.n_real) and torch.equal(shared.key_is_real, direct.key_is_real)
    # the three copies of each prompt now continue differently, including an <eos> then <pad>
    responses = encode_responses([7, 70, 9, 85, 11, 185, 9, 0, 19])
    for t in range(4):
        step = responses[:, t : t + 1]
        torch.testing.assert_close(model(step, cache=shared), model(step, cache=direct), **rounding)
    assert shared.length == direct.length == 11


def test_kv_cache_repeat_rows_after_the_prompt_matches_the_full_forward(model):
    prompts = encode_prompts([(3, 4), (37, 48)])
    responses = encode_responses([7, 2, 85, 86])
    cache = KVCache()
    model(prompts, cache=cache)
    cache.repeat_rows(2)
    pieces = [model(responses[:, t : t + 1], cache=cache) for t in range(4)]
    full = model(torch.cat([prompts.repeat_interleave(2, 0), responses], dim=1))
    torch.testing.assert_close(torch.cat(pieces, dim=1), full[:, 7:], rtol=1e-4, atol=1e-4)


def test_forward_sharing_prompts_equals_the_full_forward_with_the_same_gradients():
    from lmpolicy.tinylm.model import forward_sharing_prompts

    torch.manual_seed(3)
    model = TinyLM(TinyLMConfig()).train()
    for p in model.parameters():  # away from the init, so every weight matters
        p.data.add_(0.2 * torch.randn_like(p))
    prompts = encode_prompts([(37, 48), (3, 4), (37, 48), (60, 1), (3, 4), (37, 48)])
    responses = encode_responses([85, 7, 86, 61, 17, 185])  # answers repeat prompts, one is 3 digits
    responses[1, 2] = 5  # junk after <eos>, attended by nothing that matters but still computed
    ids = torch.cat([prompts, responses], dim=1)
    weights = torch.randn(ids.shape[0], ids.shape[1], model.config.vocab_size)

    full = model(ids)
    (full * weights).sum().backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    shared = forward_sharing_prompts(model, ids)
    (shared * weights).sum().backward()

    torch.testing.assert_close(shared, full, atol=1e-5, rtol=1e-5)
    for got, expected in zip((p.grad for p in model.parameters()), want):
        torch.testing.assert_close(got, expected, atol=2e-4, rtol=1e-3)  # float32 sums in another order


@pytest.mark.parametrize("n_rows,n_columns,high", [(2048, 11, 3), (500, 7, 15), (1, 4, 15), (0, 11, 15)])
def test_unique_rows_is_torch_unique_of_the_rows(n_rows, n_columns, high):
    from lmpolicy.tinylm.model import unique_rows

    ids = torch.randint(0, high, (n_rows, n_columns), generator=torch.Generator().manual_seed(n_rows))
    rows, which = unique_rows(ids)
    expected_rows, expected_which = torch.unique(ids, dim=0, return_inverse=True)
    assert torch.equal(rows, expected_rows) and torch.equal(which, expected_which)


def test_unique_rows_of_ids_it_cannot_pack_falls_back_to_torch_unique():
    from lmpolicy.tinylm.model import unique_rows

    for ids in (torch.randint(0, 40, (300, 5)), torch.randint(0, 3, (300, 20))):  # ids past the vocabulary; long rows
        rows, which = unique_rows(ids)
        expected_rows, expected_which = torch.unique(ids, dim=0, return_inverse=True)
        assert torch.equal(rows, expected_rows) and torch.equal(which, expected_which)
    with pytest.raises(ValueError, match="integer dtype"):
        unique_rows(torch.zeros(3, 4))
