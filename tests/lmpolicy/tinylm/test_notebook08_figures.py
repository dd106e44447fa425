"""The figures notebook 08's prose quotes about the shipped checkpoint are the ones the library computes.

The notebook prints them (section 1's evaluation and table); its text quotes them. This recomputes each
with the library and looks for it, formatted as the notebook prints it, in the notebook's markdown.
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

NOTEBOOK = Path(__file__).resolve().parents[3] / "source" / "ch11" / "08_tinylm_reinforce.ipynb"
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
