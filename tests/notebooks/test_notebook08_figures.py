"""The figures notebook 08's prose quotes are the ones its cells make.

Section 1's (the shipped checkpoint): recomputed with the library and looked for, formatted as the notebook
prints them, in the notebook's markdown. Sections 5 and 6 (the training runs): read from the notebook run as a
student runs it (``conftest.notebook08_as_a_student``, shared with its execution test), plus one run the prose
mentions that the notebook does not make (the stronger leash, beta = 0.2).
"""
from pathlib import Path

import nbformat
import numpy as np
import pytest

from lmpolicy.tinylm.evaluate import classify_answer, correct_answer_probability, evaluate_model
from lmpolicy.tinylm.generate import generate
from lmpolicy.tinylm.model import CHECKPOINT_PATH, load_pretrained
from lmpolicy.tinylm.problems import heldout_problems, training_problems
from lmpolicy.tinylm.tokenizer import encode_prompts

from .conftest import NOTEBOOK08_GROUP

NOTEBOOK = Path(__file__).resolve().parents[2] / "source" / "ch11" / "08_tinylm_reinforce.ipynb"
pytestmark = pytest.mark.skipif(not CHECKPOINT_PATH.exists() or not NOTEBOOK.exists(),
                                reason="needs the shipped checkpoint and notebook 08")


@pytest.fixture(scope="module")
def prose() -> str:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    return " ".join(" ".join(c.source.split()) for c in nb.cells if c.cell_type == "markdown")


def group_figures(model, problems):
    greedy = generate(model, encode_prompts(problems), temperature=0).response_ids
    right = np.array([classify_answer(r, a + b) == "correct" for r, (a, b) in zip(greedy, problems)])
    p_correct = correct_answer_probability(model, problems).numpy()
    one_digit = np.array([min(a, b) < 10 for a, b in problems])
    carry = np.array([a % 10 + b % 10 >= 10 for a, b in problems])
    groups = {"one, carry": one_digit & carry, "one, no carry": one_digit & ~carry, "two, carry": ~one_digit & carry,
              "two, no carry": ~one_digit & ~carry, "one": one_digit}
    return {g: (rows.sum(), right[rows].mean(), (~right[rows]).sum(), p_correct[rows].mean())
            for g, rows in groups.items()}


def test_the_checkpoints_three_figures_are_quoted_exactly(prose):
    e = evaluate_model(load_pretrained(), samples_per_problem=4, seed=0)  # as section 1 computes them
    assert f"here {e.greedy_accuracy:.3f}" in prose
    assert f"{e.sampled_accuracy:.3f}, both from 4,000 samples and exactly" in prose
    assert f"{e.expected_sampled_accuracy:.3f}" == f"{e.sampled_accuracy:.3f}"
    assert f"{e.one_digit_off_share:.3f}, {e.n_one_digit_off} of the {e.n_greedy_wrong}" in prose


def test_where_the_mistakes_are_is_quoted_from_the_table(prose):
    model = load_pretrained()
    held_out, training = group_figures(model, heldout_problems()), group_figures(model, training_problems())
    n_wrong = sum(held_out[g][2] for g in ("one", "two, carry", "two, no carry"))
    assert (f"greedy accuracy is {held_out['two, no carry'][1]:.3f} and {held_out['two, carry'][1]:.3f} when both "
            "operands have two digits") in prose
    assert f"{held_out['one, no carry'][1]:.3f} when one has a single digit" in prose
    assert f"and {held_out['one, carry'][1]:.3f} when they do" in prose
    assert f"right with probability {held_out['one, carry'][3]:.3f} on average" in prose
    assert f"are {held_out['one'][0]} of the 1,000, about a fifth, yet they hold {held_out['one'][2]} of the {n_wrong}" \
        in prose
    assert (f"greedy accuracy {training['one'][1]:.3f} with a one-digit operand, {training['one, no carry'][1]:.3f} "
            f"and {training['one, carry'][1]:.3f} without and with a carry") in prose


# --- sections 5 and 6: the runs the prose quotes, as the notebook's cells made them -------------------------

RL_UPDATES, SFT_UPDATES = 20, 160  # section 6: 40,960 sampled answers, or worked examples, per run
runs_of_the_notebook = pytest.mark.xdist_group(NOTEBOOK08_GROUP)


@pytest.fixture(scope="module")
def figures(notebook08_as_a_student):
    return notebook08_as_a_student[2]


@pytest.mark.slow
@runs_of_the_notebook
def test_the_main_run_reaches_the_targets_where_the_prose_says(prose, figures):
    h, recipe, again = figures["main"], figures["recipe"], figures["again"]
    assert h["updates_to_target"] is not None and h["updates"][-1] == h["updates_to_target"]  # stopped on target
    on_target = [g >= recipe["target_greedy"] and s >= recipe["target_sampled"] for g, s in zip(h["greedy"], h["sampled"])]
    assert on_target[-1] and not any(on_target[:-1])  # at the first measurement that reached both
    # the trained model measured afresh, by the evaluation of section 1 rather than the run's own probe
    assert again["greedy"] >= recipe["target_greedy"] and again["sampled"] >= recipe["target_sampled"]
    assert again["greedy"] == pytest.approx(h["greedy"][-1], abs=1e-6)
    assert again["sampled"] == pytest.approx(h["sampled"][-1], abs=1e-6)
    answers = h["updates_to_target"] * recipe["prompts_per_update"] * recipe["samples_per_prompt"]
    assert h["answers"][-1] == answers
    targets = f"{recipe['target_greedy']:.0%} greedy and {recipe['target_sampled']:.0%} sampled accuracy"
    assert f"needs many more updates and answers to reach {targets}" in prose
    assert f"gets there at update {h['updates_to_target']}, after {answers:,} sampled answers" in prose
    assert f"it reaches {targets} at update {h['updates_to_target']}, after {answers:,} sampled answers" in prose
    # its last stretch on the reward-KL plane, as the prose reads it: the sampled accuracy up, the KL no further
    last, before = h["updates"].index(h["updates_to_target"]), h["updates"].index(h["updates_to_target"] - 10)
    assert (f"from update {h['updates'][before]:.0f} to {h['updates'][last]:.0f} the sampled accuracy rose from "
            f"{h['sampled'][before]:.3f} to {h['sampled'][last]:.3f} while the KL stayed near 0.4 nats "
            f"({h['kl'][before]:.3f}, then {h['kl'][last]:.3f})") in prose
    assert h["sampled"][last] - h["sampled"][before] > 0.02 and abs(h["kl"][last] - h["kl"][before]) < 0.02
    assert round(h["kl"][last], 1) == round(h["kl"][before], 1) == 0.4
    # the notebook's two training cells: the main run, then three comparison runs
    assert f"trains for {h['updates_to_target'] + 2 * RL_UPDATES + SFT_UPDATES} updates" in prose


@pytest.fixture(scope="module")
def comparison(figures):
    import dataclasses

    from lmpolicy.tinylm import reinforce, sft

    runs = {name: figures[name] for name in ("no leash", "rft", "sft")}
    # the stronger leash the prose mentions: made here as the notebook makes its other comparison runs
    recipe = dataclasses.replace(reinforce.Recipe(), beta=0.2, max_updates=RL_UPDATES, eval_every_updates=10,
                                 stop_at_target=False)
    dial = reinforce.train(recipe, load_pretrained(), progress=False).history
    runs["beta 0.2"] = {key: list(getattr(dial, key)) for key in ("answers", "greedy", "sampled", "kl")}
    answers = RL_UPDATES * recipe.prompts_per_update * recipe.samples_per_prompt
    assert SFT_UPDATES * sft.SFTRecipe().batch_size == answers
    assert {h["answers"][-1] for h in runs.values()} == {answers}  # the same number of answers each
    # the notebook's table shows section 5's run at its measurement after as many answers
    main = figures["main"]
    at = main["answers"].index(answers)
    runs["leashed"] = {key: main[key][at] for key in ("greedy", "sampled", "kl")}
    return runs


@pytest.mark.slow
@runs_of_the_notebook
def test_the_comparisons_are_quoted_as_the_seeded_runs_end(prose, comparison):
    free, dial, rft, more_sft = ({k: v[-1] if isinstance(v, list) else v for k, v in comparison[name].items()}
                                 for name in ("no leash", "beta 0.2", "rft", "sft"))
    leashed = comparison["leashed"]
    assert (f"(greedy {leashed['greedy']:.3f} and {free['greedy']:.3f}, sampled {leashed['sampled']:.3f} and "
            f"{free['sampled']:.3f}, KL {leashed['kl']:.3f} and {free['kl']:.3f} nats)") in prose
    assert f"it ends at KL {dial['kl']:.3f} nats and sampled accuracy {dial['sampled']:.3f}" in prose
    assert f"(greedy {rft['greedy']:.3f}, sampled {rft['sampled']:.3f})" in prose
    assert f"(KL {rft['kl']:.3f} nats)" in prose
    assert f"(greedy {more_sft['greedy']:.3f}, sampled {more_sft['sampled']:.3f})" in prose
    assert f"reference (KL {more_sft['kl']:.3f} nats)" in prose
    assert f"each seeing {more_sft['answers']:,.0f} answers: {RL_UPDATES} updates" in prose
    assert f"after {more_sft['answers']:,.0f} answers" in prose
    # and what the prose says of them: the leash costs no accuracy worth the name and the leashed run is a little
    # closer to the reference; the stronger leash is as accurate, further left; rejection sampling ahead of
    # REINFORCE and a little further from the reference; SFT far ahead and furthest from the reference
    for key in ("greedy", "sampled"):
        assert abs(leashed[key] - free[key]) < 0.01 and abs(dial[key] - leashed[key]) < 0.01
    assert leashed["kl"] < free["kl"]
    assert dial["kl"] < min(leashed["kl"], free["kl"]) - 0.02
    assert rft["greedy"] > leashed["greedy"] and rft["sampled"] > leashed["sampled"]
    assert max(leashed["kl"], free["kl"]) < rft["kl"] < max(leashed["kl"], free["kl"]) + 0.1
    assert more_sft["greedy"] > rft["greedy"] + 0.01
    assert more_sft["sampled"] > rft["sampled"] + 0.03
    assert more_sft["kl"] > max(free["kl"], rft["kl"]) and more_sft["kl"] > leashed["kl"]
