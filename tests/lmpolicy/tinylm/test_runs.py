"""lmpolicy.tinylm.runs: a run is a seeded, fixed number of updates, measured on a fixed schedule."""
import dataclasses

import pytest
import torch

from lmpolicy.tinylm import reinforce, runs, sft
from lmpolicy.tinylm.model import CHECKPOINT_PATH, load_pretrained
from tinylm_helpers import tiny_recipe, untrained_model

needs_checkpoint = pytest.mark.skipif(not CHECKPOINT_PATH.exists(), reason="the shipped checkpoint is not there yet")


def test_a_run_trains_its_number_of_updates_and_is_measured_at_the_start_every_n_updates_and_the_end():
    h = reinforce.train(tiny_recipe(max_updates=5, eval_every_updates=2), untrained_model(), progress=False).history
    assert h.updates == [0, 2, 4, 5]
    assert h.answers == [0, 2 * 32, 4 * 32, 5 * 32] and h.answers_sampled == 5 * 32  # 8 prompts x 4 answers each
    assert len(h.train_reward) == 5
    assert h.seconds == sorted(h.seconds) and h.seconds[0] == 0.0
    assert h.wall_seconds >= h.seconds[-1] + h.eval_seconds * 0.99  # the run's real time includes the measuring


@needs_checkpoint
def test_the_same_seed_gives_the_same_numbers_and_another_seed_other_numbers():
    start = load_pretrained()  # its answers are a mix of right and wrong, so every update trains
    first, again, other = (reinforce.train(tiny_recipe(max_updates=3, eval_every_updates=1, seed=seed,
                                                       prompts_per_update=32), start, progress=False)
                           for seed in (5, 5, 6))
    for key in ("greedy", "sampled", "kl", "train_reward", "answers"):
        assert getattr(first.history, key) == getattr(again.history, key), key
    for p, q in zip(first.model.parameters(), again.model.parameters()):
        assert torch.equal(p, q)
    assert 0 < first.history.kl[-1] and first.history.train_reward != other.history.train_reward


def test_a_run_that_starts_on_target_stops_before_any_update_and_says_so():
    recipe = tiny_recipe(max_updates=5, stop_at_target=True, target_greedy=0.0, target_sampled=0.0)
    h = reinforce.train(recipe, untrained_model(), progress=False).history
    assert h.updates == [0] and h.answers_sampled == 0 and h.updates_to_target == 0
    assert runs.target_report(h, recipe) == "REINFORCE: reached greedy >= 0.00 and sampled >= 0.00 at update 0."


def test_a_run_short_of_its_target_says_so_plainly_with_where_it_ended():
    recipe = tiny_recipe(max_updates=2, stop_at_target=True, target_greedy=0.99, target_sampled=0.99)
    h = reinforce.train(recipe, untrained_model(), label="untrained", progress=False).history
    assert h.updates == [0, 2] and h.updates_to_target is None
    report = runs.target_report(h, recipe)
    assert report.startswith("untrained: did NOT reach greedy >= 0.99 and sampled >= 0.99 in 2 updates")
    assert f"greedy {h.greedy[-1]:.3f}, sampled {h.sampled[-1]:.3f}" in report


def test_sft_counts_its_updates_and_examples_the_same_way():
    recipe = dataclasses.replace(sft.SFTRecipe(), n_examples=500, batch_size=16, max_updates=3, eval_every_updates=2,
                                 stop_at_target=False, heldout_measured=20)
    h = sft.train(recipe, untrained_model(), progress=False).history
    assert h.updates == [0, 2, 3] and h.answers == [0, 32, 48]


@pytest.mark.parametrize("field", ["max_updates", "eval_every_updates", "heldout_measured"])
def test_a_budget_of_no_updates_or_no_measurements_is_refused_by_name(field):
    with pytest.raises(ValueError, match=field):
        runs.Budget(**{field: 0})


def test_a_bar_ended_early_on_target_is_full_and_says_why():
    import io

    from tqdm import tqdm

    out = io.StringIO()
    bar = tqdm(total=10, desc="REINFORCE", file=out)
    bar.update(4)
    runs.end_bar_early(bar, 4)
    bar.close()
    last = out.getvalue().split("\r")[-1]
    assert "REINFORCE (on target)" in last and "4/4" in last and "100%" in last


@needs_checkpoint
def test_the_probe_measures_what_the_evaluation_and_a_full_forward_give():
    """The probe continues one prompt pass; its figures are those of evaluate_model and of full forwards."""
    import torch

    from lmpolicy.tinylm.evaluate import evaluate_model, exact_token_kl
    from lmpolicy.tinylm.generate import generate
    from lmpolicy.tinylm.logprobs import sequence_logprob
    from lmpolicy.tinylm.problems import heldout_problems
    from lmpolicy.tinylm.runs import HeldoutProbe
    from lmpolicy.tinylm.tokenizer import PROMPT_LEN

    reference, policy = load_pretrained(), load_pretrained()
    with torch.no_grad():  # a policy a little away from the reference
        for weights in policy.parameters():
            weights.add_(0.02 * torch.randn(weights.shape, generator=torch.Generator().manual_seed(weights.numel())))
    problems = heldout_problems()[:300]
    probe = HeldoutProbe(reference, problems, seed=7)
    got = probe.measure(policy)
    e = evaluate_model(policy, problems)
    answers = generate(policy, probe.prompts, temperature=1.0, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        token_kl = exact_token_kl(policy(answers.ids), reference(answers.ids))[:, PROMPT_LEN - 1:-1]
    kl = sequence_logprob(token_kl, answers.response_mask).mean().item()
    assert got["greedy"] == pytest.approx(e.greedy_accuracy, abs=1e-9)
    assert got["sampled"] == pytest.approx(e.expected_sampled_accuracy, abs=1e-6)
    assert got["kl"] == pytest.approx(kl, abs=1e-5) and kl > 0.01
    assert probe.measure(policy) == got  # measuring changes nothing
