"""Where the KL goes: each placement computes what its formula says, and the experiment's command line runs.

The one-position toys follow Exercise 11.6: a softmax policy over a few tokens, a fixed reference, and the
expectation over y ~ pi taken exactly (a sum over the vocabulary, weights pi(y) held fixed), so that the
expected gradient of each placement can be set against the gradient of a KL computed in closed form.
"""
import json

import pytest
import torch

from lmpolicy.tinylm.kl_placement import (PLACEMENTS, KLPlacementSettings, kl_estimate, kl_in_reward, kl_loss_term,
                                          main, no_kl_in_reward, parse_placement, quick_settings, train_with_placement)
from lmpolicy.tinylm.reinforce import policy_gradient_loss

V = 6


def toy():
    """Policy logits (trainable) and reference log-probs (fixed), one position, in float64."""
    g = torch.Generator().manual_seed(3)
    theta = torch.randn(V, generator=g, dtype=torch.float64).requires_grad_(True)
    ref_logp = torch.log_softmax(torch.randn(V, generator=g, dtype=torch.float64), -1)
    return theta, ref_logp


def reverse_kl_gradient(theta, ref_logp):
    logp = torch.log_softmax(theta, -1)
    return torch.autograd.grad((logp.exp() * (logp - ref_logp)).sum(), theta)[0]


def forward_kl_gradient(theta, ref_logp):
    logp = torch.log_softmax(theta, -1)
    return torch.autograd.grad((ref_logp.exp() * (ref_logp - logp)).sum(), theta)[0]


def every_token_as_a_row(theta, ref_logp):
    """Each vocabulary token as one sampled 'answer' of one token, weighted by pi(y) * V so that a mean over the
    V rows is the expectation over y ~ pi."""
    logp = torch.log_softmax(theta, -1)
    weights = (logp.exp() * V).detach()
    return logp.view(V, 1), ref_logp.view(V, 1), torch.ones(V, 1), weights


def test_estimators_are_their_formulas():
    logp, ref = torch.tensor([[-0.5, -2.0, -1.0]]), torch.tensor([[-1.0, -1.0, -1.0]])
    l = torch.tensor([[0.5, -1.0, 0.0]])
    torch.testing.assert_close(kl_estimate(logp, ref, "k1"), l)
    torch.testing.assert_close(kl_estimate(logp, ref, "k2"), l ** 2 / 2)
    torch.testing.assert_close(kl_estimate(logp, ref, "k3"), torch.exp(-l) - 1 + l)
    assert (kl_estimate(torch.randn(50), torch.randn(50), "k3") >= 0).all()  # k3 is never negative
    with pytest.raises(ValueError, match="'k1', 'k2' or 'k3'"):
        kl_estimate(logp, ref, "k4")


@pytest.mark.parametrize("estimator, which", [("k1", "none"), ("k2", "reverse"), ("k3", "forward")])
def test_expected_gradient_of_each_estimator_in_the_loss(estimator, which):
    theta, ref_logp = toy()
    logp, ref, mask, weights = every_token_as_a_row(theta, ref_logp)
    expected_grad = torch.autograd.grad(kl_loss_term(logp, ref, mask, weights, estimator), theta)[0]
    target = {"none": torch.zeros(V, dtype=torch.float64), "reverse": reverse_kl_gradient(theta, ref_logp),
              "forward": forward_kl_gradient(theta, ref_logp)}[which]
    torch.testing.assert_close(expected_grad, target)
    # and the forward and reverse gradients really differ here, so the test tells them apart
    assert (reverse_kl_gradient(theta, ref_logp) - forward_kl_gradient(theta, ref_logp)).abs().max() > 1e-2


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_kl_in_the_reward_is_detached_and_its_score_function_gradient(estimator):
    theta, ref_logp = toy()
    logp, ref, mask, weights = every_token_as_a_row(theta, ref_logp)
    beta = 0.3
    shaped = kl_in_reward(estimator)(torch.zeros(V, dtype=torch.float64), logp, ref, mask, beta)
    assert not shaped.requires_grad  # a number the answer is scored with, not a term to differentiate
    # the loss's gradient is minus the expected score-function gradient of the shaped reward
    grad = torch.autograd.grad(policy_gradient_loss(logp, mask, weights * shaped), theta)[0]
    reverse, forward = reverse_kl_gradient(theta, ref_logp), forward_kl_gradient(theta, ref_logp)
    # k1: beta times the reverse KL's gradient, the objective's own; k3: reverse minus forward
    target = beta * reverse if estimator == "k1" else beta * (reverse - forward)
    torch.testing.assert_close(grad, target)


def test_kl_in_the_loss_leaves_the_reward_alone():
    rewards = torch.tensor([1.0, 0.0])
    assert no_kl_in_reward(rewards, torch.randn(2, 3), torch.randn(2, 3), torch.ones(2, 3), 0.5) is rewards


def test_placements_are_named_and_checked():
    assert [parse_placement(p) for p in PLACEMENTS] == [("k1", "reward"), ("k1", "loss"), ("k2", "loss"),
                                                        ("k3", "loss"), ("k3", "reward")]
    with pytest.raises(ValueError, match="placement must be one of"):
        KLPlacementSettings(placements=("k3-advantage",))
    with pytest.raises(ValueError, match="method must be 'reinforce'"):
        KLPlacementSettings(method="rft")


def test_without_a_leash_every_placement_is_the_same_run():
    """beta = 0 removes the only thing the placements change: same seed, same numbers, whatever the placement."""
    settings = quick_settings(beta=0.0, max_updates=2, eval_every_updates=2, heldout_measured=20)
    runs = [train_with_placement(settings, p, progress=False).history for p in ("k1-reward", "k3-loss", "k3-reward")]
    for h in runs[1:]:
        assert h.kl == runs[0].kl and h.sampled == runs[0].sampled and h.train_reward == runs[0].train_reward
    assert runs[0].kl[-1] > 0  # the policy did move


def test_with_a_leash_the_placements_differ_and_repeat_exactly():
    settings = quick_settings(beta=0.5, max_updates=2, eval_every_updates=2, heldout_measured=20)
    a = train_with_placement(settings, "k1-reward", progress=False).history
    b = train_with_placement(settings, "k3-loss", progress=False).history
    again = train_with_placement(settings, "k1-reward", progress=False).history
    assert a.kl[-1] != b.kl[-1]
    assert a.kl == again.kl and a.sampled == again.sampled


def test_the_command_line_writes_the_figures(tmp_path, capsys):
    out = tmp_path / "figures"
    main(["--max-updates", "2", "--eval-every-updates", "1", "--heldout-measured", "20", "--prompts-per-update", "8",
          "--placements", "k1-reward", "k3-reward", "--out-dir", str(out)])
    for name in ("reward_and_kl_over_updates.png", "reward_kl_plane.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    numbers = json.loads((out / "histories.json").read_text())
    assert list(numbers["runs"]) == ["k1-reward", "k3-reward"]
    assert numbers["runs"]["k3-reward"]["updates"] == [0, 1, 2]
    assert "k3-reward" in capsys.readouterr().out


@pytest.mark.slow
def test_the_full_run_shows_what_the_notebook_and_readme_say():
    """The notebook's full run (about two minutes): the claims its prose and the README make, read off the runs."""
    from lmpolicy.tinylm.kl_placement import run_placements

    runs = run_placements(KLPlacementSettings(), progress=False)
    start_reward = runs["k1-reward"].sampled[0]
    assert f"{start_reward:.2f}" == "0.57"  # "climbs from the checkpoint's 0.57"
    leashed = ("k1-reward", "k2-loss", "k3-loss")
    for p in leashed:  # stable: the reward climbs and the KL stays around a tenth of a nat
        assert runs[p].sampled[-1] > start_reward + 0.05 and runs[p].kl[-1] < 0.15
    largest_leashed = max(runs[p].kl[-1] for p in leashed)
    assert runs["k1-loss"].kl[-1] > 3 * largest_leashed  # no leash: several times the leashed runs' KL
    assert runs["k1-loss"].sampled[-1] < runs["k1-reward"].sampled[-1]
    runaway = runs["k3-reward"]  # past a nat, ten times the leashed runs' KL; its reward below the start's
    assert runaway.kl[-1] > max(1.0, 10 * largest_leashed) and runaway.sampled[-1] < start_reward - 0.05
