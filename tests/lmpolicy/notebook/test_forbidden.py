"""lmpolicy.notebook.forbidden: the shortcuts an exercise declares (lmpolicy.exercises), blocked while it is checked,
and what reads them."""
from __future__ import annotations

import textwrap

import pytest
import torch

from lmpolicy.exercises import nb01, registry
from lmpolicy.notebook import checks, forbidden
from lmpolicy_grader.trusted_tests import no_credit

PRIVATE_SOFTMAXES = {
    "torch._softmax": "def softmax(logits, dim=-1):\n    return torch._softmax(logits, dim, False)\n",
    "torch.special.softmax": "def softmax(logits, dim=-1):\n    return torch.special.softmax(logits, dim)\n",
    "torch.ops.aten._softmax": "def softmax(logits, dim=-1):\n    return torch.ops.aten._softmax(logits, dim, False)\n",
    "torch._C._nn (an alias)": "from torch._C import _VariableFunctions as vf\nsm = vf._softmax\n\n"
                               "def softmax(logits, dim=-1):\n    return sm(logits, dim, False)\n",
}


@pytest.mark.parametrize("how", sorted(PRIVATE_SOFTMAXES))
def test_a_private_torch_softmax_gets_no_credit_by_the_declared_pattern(how):
    sources = ["import torch\n", PRIVATE_SOFTMAXES[how]]
    with nb01.SOFTMAX.blocked():
        names = forbidden.rule_names(sources) | {no_credit.leaf(fn) for fn in checks.active_blocks()}
        reason = no_credit.library_shortcut(sources, "softmax", names)
    assert reason is not None and "gets no credit" in reason, reason
    with nb01.SOFTMAX.blocked():  # the declared pattern alone, as the rule matches it
        assert no_credit.library_shortcut(sources, "softmax", forbidden.active_names()) is not None
    if how == "torch._softmax":  # torch.special's leaf is softmax itself; torch.ops and torch._C are parts of torch
        # the rule does not follow (no_credit.FOLLOWED_MODULES): each was refused without the pattern already.
        # The names alone, as the channel passed them before (the leaves of the blocked functions), let it through
        assert no_credit.library_shortcut(sources, "softmax", {"softmax", "log_softmax"}) is None


HONEST_SOFTMAXES = {
    "plain": """
        def softmax(logits, dim=-1):
            shifted = logits - logits.max(dim=dim, keepdim=True).values
            weights = torch.exp(shifted)
            return weights / weights.sum(dim=dim, keepdim=True)
    """,
    "its own helper named like a softmax": """
        def stable_softmax(z, dim):
            weights = torch.exp(z - z.max(dim=dim, keepdim=True).values)
            return weights / weights.sum(dim=dim, keepdim=True)

        def softmax(logits, dim=-1):
            return stable_softmax(logits, dim)
    """,
    "a lambda named like one": """
        my_softmax = lambda z, dim: torch.exp(z - torch.logsumexp(z, dim=dim, keepdim=True))

        def softmax(logits, dim=-1):
            return my_softmax(logits, dim)
    """,
}


@pytest.mark.parametrize("how", sorted(HONEST_SOFTMAXES))
def test_an_honest_softmax_keeps_its_credit(how):
    sources = ["import torch\n", textwrap.dedent(HONEST_SOFTMAXES[how])]
    with nb01.SOFTMAX.blocked():
        assert no_credit.library_shortcut(sources, "softmax", forbidden.rule_names(sources)) is None


def test_shortcuts_block_the_declared_functions_only_while_active():
    from lmpolicy.exact import temperature

    with nb01.SOFTMAX.blocked():
        with pytest.raises(checks.LibraryShortcutUsed):
            temperature.softmax([1.0, 2.0])
        with pytest.raises(checks.LibraryShortcutUsed):
            torch.softmax(torch.zeros(2), -1)
        assert forbidden.active_names() >= {"softmax", "log_softmax"}
    assert forbidden.active_names() == set()
    assert temperature.softmax([0.0, 0.0]).tolist() == [0.5, 0.5]
    with pytest.raises(KeyError, match="not_an_exercise"):
        registry.exercise("not_an_exercise")


def _softmax_by_attention(logits):
    n = logits.shape[-1]
    q, v = torch.ones(*logits.shape[:-1], 1, 1), torch.eye(n).expand(*logits.shape[:-1], n, n)
    return torch.nn.functional.scaled_dot_product_attention(q, logits.unsqueeze(-1), v, scale=1.0).squeeze(-2)


def _softmax_by_cross_entropy(logits):
    n = logits.shape[-1]
    return torch.exp(-torch.nn.functional.cross_entropy(logits.repeat(n, 1), torch.arange(n), reduction="none"))


def _softmin_of_minus(logits):
    return torch.nn.Softmin(dim=-1)(-logits)


def _honest(logits):
    return torch.exp(logits - torch.logsumexp(logits, -1, keepdim=True))


@pytest.mark.parametrize("softmax, refused", [
    (_softmax_by_attention, r"runs torch's aten::_safe_softmax, which computes a softmax"),
    (_softmax_by_cross_entropy, r"runs torch's aten::_log_softmax, which computes a softmax"),
    (_softmin_of_minus, r"calling \.softmax\(\) gets no credit"),  # Softmin calls the blocked method first
])
def test_torchs_softmax_refuses_under_any_name_while_the_softmax_is_checked(softmax, refused):
    """The visible check (``Exercise.call``, in the student's kernel) refuses as the hidden tests do; outside it,
    the same code gives the softmax."""
    logits = torch.tensor([[1.0, 2.0, 3.0]])
    assert torch.allclose(softmax(logits), torch.softmax(logits, -1), atol=1e-6)
    with pytest.raises(checks.LibraryShortcutUsed, match=refused):
        nb01.SOFTMAX.call(softmax, logits)
    assert forbidden.active_operators() == []


def test_an_honest_softmax_runs_while_torchs_softmax_operators_refuse():
    logits = torch.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    probs = nb01.SOFTMAX.call(_honest, logits)
    probs[0, 0].backward()  # its graph works after the check, outside the refusal
    assert torch.allclose(probs, torch.softmax(logits, -1)) and logits.grad is not None


def test_the_answer_key_is_declared_whole_for_every_varying_exercise():
    from lmpolicy.per_student import variants

    assert set(registry.library_modules()) == {forbidden.ANSWER_KEY}
    assert set(registry.library_modules()[forbidden.ANSWER_KEY]) == set(variants.VARYING)
