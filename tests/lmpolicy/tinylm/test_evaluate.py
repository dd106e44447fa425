"""The shipped checkpoint reproduces the chapter's figures on the held-out problems.

The chapter: greedy right "about 80% of the time", sampling right "only a little over half the
time", and "in about four out of five wrong answers exactly one digit is off". The bands below are
the ones the course promises: 0.80 +- 0.03, 0.50-0.60 and 0.75-0.85.
"""
import json
import math
import subprocess
import sys

import pytest

from lmpolicy.tinylm.evaluate import evaluate_model, format_evaluation
from lmpolicy.tinylm.model import CHECKPOINT_PATH, load_pretrained


@pytest.fixture(scope="module")
def figures():
    return evaluate_model(load_pretrained())


def test_checkpoint_is_small_and_shipped_inside_the_package():
    assert CHECKPOINT_PATH.parent.parent.name == "tinylm" and CHECKPOINT_PATH.parents[2].name == "lmpolicy"
    assert 100_000 < CHECKPOINT_PATH.stat().st_size < 1_000_000


def test_shipped_checkpoint_figures_are_in_the_chapter_bands(figures):
    assert figures.n_problems >= 1_000
    assert 0.77 <= figures.greedy_accuracy <= 0.83
    assert 0.50 <= figures.sampled_accuracy <= 0.60
    assert 0.50 <= figures.expected_sampled_accuracy <= 0.60
    assert 0.75 <= figures.one_digit_off_share <= 0.85


def test_figures_are_consistent_with_each_other(figures):
    n = figures.n_problems
    assert figures.n_greedy_wrong == round(n * (1 - figures.greedy_accuracy))
    assert figures.n_one_digit_off == round(figures.one_digit_off_share * figures.n_greedy_wrong)
    assert figures.n_malformed <= figures.n_greedy_wrong - figures.n_one_digit_off
    # the empirical sampled rate estimates the exact one: within 4 standard errors
    p, samples = figures.expected_sampled_accuracy, n * figures.samples_per_problem
    assert abs(figures.sampled_accuracy - p) < 4 * math.sqrt(p * (1 - p) / samples)


def test_evaluation_is_seeded(figures):
    assert evaluate_model(load_pretrained(), seed=figures.seed) == figures


def test_command_line_json_prints_the_same_figures(figures):
    done = subprocess.run([sys.executable, "-m", "lmpolicy.tinylm.evaluate", "--json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["n_problems"] == figures.n_problems
    assert printed["greedy_accuracy"] == figures.greedy_accuracy
    assert printed["one_digit_off_share"] == figures.one_digit_off_share
    assert printed["n_malformed"] == figures.n_malformed
    assert printed["expected_sampled_accuracy"] == pytest.approx(figures.expected_sampled_accuracy, abs=1e-5)
    assert printed["sampled_accuracy"] == pytest.approx(figures.sampled_accuracy, abs=0.005)


def test_plain_output_names_every_figure(figures):
    text = format_evaluation(figures)
    for words in ("held-out problems", "greedy accuracy", "sampled accuracy", "one digit off", "malformed"):
        assert words in text
    assert f"{figures.greedy_accuracy:.3f}" in text
