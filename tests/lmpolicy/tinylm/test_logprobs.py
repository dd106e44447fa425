import math

import pytest
import torch
import torch.nn.functional as F

from lmpolicy.tinylm.logprobs import response_logprobs, sequence_logprob


def test_shift_on_a_hand_example():
    """4 columns, prompt_len 2: logits column 1 predicts token 2, column 2 predicts token 3."""
    V = 3
    logits = torch.full((1, 4, V), -1e9)
    # column 1 -> token in column 2 (id 2) gets probability 1/2 (two equal top logits)
    logits[0, 1, 2] = 0.0
    logits[0, 1, 0] = 0.0
    # column 2 -> token in column 3 (id 1) gets probability e / (e + 1 + 1)
    logits[0, 2] = torch.tensor([0.0, 1.0, 0.0])
    # columns 0 and 3 must not be used: make them NaN-free but wildly wrong
    logits[0, 0] = torch.tensor([50.0, -50.0, 0.0])
    logits[0, 3] = torch.tensor([-50.0, 50.0, 0.0])
    ids = torch.tensor([[0, 1, 2, 1]])
    out = response_logprobs(logits, ids, prompt_len=2)
    assert out.shape == (1, 2)
    torch.testing.assert_close(out[0], torch.tensor([math.log(0.5), 1 - math.log(math.e + 2)]))


def test_against_a_brute_force_loop():
    torch.manual_seed(0)
    B, L, V, prompt_len = 5, 11, 15, 7
    logits = torch.randn(B, L, V) * 3
    ids = torch.randint(V, (B, L))
    out = response_logprobs(logits, ids, prompt_len)
    assert out.shape == (B, L - prompt_len)
    for b in range(B):
        for j in range(L - prompt_len):
            t = prompt_len + j  # the token's column
            z = logits[b, t - 1].double()
            expected = z[ids[b, t]] - torch.log(torch.exp(z).sum())
            assert abs(out[b, j].item() - expected.item()) < 1e-5


def test_sequence_logprob_sums_only_masked_tokens_and_survives_minus_infinity():
    tok = torch.tensor([[-0.5, -1.0, -0.25, float("-inf")], [-2.0, float("-inf"), float("nan"), -3.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    out = sequence_logprob(tok, mask)
    assert out.tolist() == [-1.75, -2.0]
    # the bug the chapter warns about: multiplying by the mask turns -inf into NaN
    assert torch.isnan((tok * mask).sum(-1)).all()


def test_sequence_logprob_against_a_loop():
    torch.manual_seed(1)
    tok = -torch.rand(6, 4) * 5
    mask = (torch.rand(6, 4) > 0.4).float()
    expected = [sum(tok[b, j].item() for j in range(4) if mask[b, j] == 1) for b in range(6)]
    torch.testing.assert_close(sequence_logprob(tok, mask), torch.tensor(expected))


def test_gradients_reach_only_the_logits_of_response_predictions():
    logits = torch.randn(2, 11, 15, requires_grad=True)
    ids = torch.randint(15, (2, 11))
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    sequence_logprob(response_logprobs(logits, ids, 7), mask).sum().backward()
    touched = logits.grad.abs().sum(-1) > 0
    assert touched.tolist() == [[False] * 6 + [True, True, True] + [False, False],
                                [False] * 6 + [True, True] + [False] * 3]


@pytest.mark.parametrize("prompt_len", [0, 11])
def test_bad_prompt_len_is_rejected(prompt_len):
    with pytest.raises(ValueError, match="prompt_len"):
        response_logprobs(torch.zeros(1, 11, 15), torch.zeros(1, 11, dtype=torch.long), prompt_len)


def test_shape_mismatch_is_rejected():
    with pytest.raises(ValueError, match="shape"):
        sequence_logprob(torch.zeros(2, 4), torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"\(B, L, V\)"):
        response_logprobs(torch.zeros(1, 10, 15), torch.zeros(1, 11, dtype=torch.long), 7)


# --- precision, the slice before the log-softmax ------------------------------------------------------

def formula(logits, ids, prompt_len):
    """The definition, in float64: log_softmax of the columns that predict response tokens, at the chosen ids."""
    z = logits[:, prompt_len - 1:-1].double()
    return torch.log_softmax(z, dim=-1).gather(-1, ids[:, prompt_len:].unsqueeze(-1)).squeeze(-1)


def test_float64_logits_give_float64_log_probs_to_float64_accuracy():
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 9, 40, generator=gen, dtype=torch.float64) * 20  # large logits: float32 would lose digits
    ids = torch.randint(40, (3, 9), generator=gen)
    out = response_logprobs(logits, ids, 4)
    assert out.dtype == torch.float64
    # brute force in float64, one entry at a time: z[id] - log sum exp(z), with the max taken out
    for b in range(3):
        for j in range(5):
            z = logits[b, 3 + j]
            m = z.max()
            expected = z[ids[b, 4 + j]] - m - torch.log(torch.exp(z - m).sum())
            assert abs(out[b, j].item() - expected.item()) < 1e-12
    # float32 would be off by far more than 1e-12 here: the check above can tell the two apart
    as_float32 = response_logprobs(logits.float(), ids, 4).double()
    assert (as_float32 - out).abs().max() > 1e-9


@pytest.mark.parametrize("half", [torch.bfloat16, torch.float16])
def test_half_precision_logits_are_upcast_to_float32(half):
    gen = torch.Generator().manual_seed(6)
    logits = (torch.randn(2, 8, 30, generator=gen) * 3).to(half)
    ids = torch.randint(30, (2, 8), generator=gen)
    out = response_logprobs(logits, ids, 5)
    assert out.dtype == torch.float32
    # computed from the half-precision values, exactly representable in float32, at float32 accuracy
    torch.testing.assert_close(out.double(), formula(logits.float(), ids, 5), rtol=0, atol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_the_formula_on_random_inputs(seed):
    gen = torch.Generator().manual_seed(seed)
    B, L, V = 4, 13, 50
    prompt_len = int(torch.randint(1, L, (1,), generator=gen))
    logits = torch.randn(B, L, V, generator=gen, dtype=torch.float64) * 4
    ids = torch.randint(V, (B, L), generator=gen)
    out = response_logprobs(logits, ids, prompt_len)
    assert out.shape == (B, L - prompt_len)
    torch.testing.assert_close(out, formula(logits, ids, prompt_len), rtol=0, atol=1e-12)


def test_an_all_minus_infinity_prompt_column_leaves_the_gradient_finite():
    """Left padding can give a prompt column logits of -inf everywhere; no response token is read from it."""
    gen = torch.Generator().manual_seed(7)
    B, L, V, prompt_len = 3, 10, 20, 6
    logits = torch.randn(B, L, V, generator=gen)
    logits[0, 1] = -math.inf  # a padding column of row 0, well inside the prompt
    logits[2, 0] = -math.inf
    logits.requires_grad_(True)
    ids = torch.randint(V, (B, L), generator=gen)
    out = response_logprobs(logits, ids, prompt_len)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(logits.grad).all()
    assert (logits.grad[:, : prompt_len - 1] == 0).all()  # the prompt's own predictions get no gradient
    # the gradient of the predicting columns is the formula's: one-hot(chosen) - softmax
    z = logits.detach()[:, prompt_len - 1:-1]
    expected = F.one_hot(ids[:, prompt_len:], V).float() - torch.softmax(z, dim=-1)
    torch.testing.assert_close(logits.grad[:, prompt_len - 1:-1], expected)
    # what slicing after the log-softmax did with the same logits: NaN in the gradient
    before = logits.detach().clone().requires_grad_(True)
    logp = F.log_softmax(before[:, :-1], dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    logp[:, prompt_len - 1:].sum().backward()
    assert torch.isnan(before.grad).any()
