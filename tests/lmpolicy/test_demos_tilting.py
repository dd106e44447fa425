"""The tilting demo, driven through its widgets as a student would.

Expected values: the chapter's (and the issue's) printed numbers, and the formulas computed here by
brute force over the four or nine responses; plus equality with the exact solvers, whose numbers
the demo must show unchanged.
"""
import math

import numpy as np
import pytest

from lmpolicy.demos.base import GRADER_NOTE
from lmpolicy.demos.tilting import TiltingDemo
from lmpolicy.exact.scenarios import get_scenario
from lmpolicy.exact.tilting import soft_values, tilted_optimum, token_level_optimum

WORKED_REF = {"aa": 0.42, "ab": 0.28, "ba": 0.15, "bb": 0.15}
WORKED_REWARD = {"aa": 0.0, "ab": 1.0, "ba": 0.0, "bb": 2.0}


def brute_force_optimum(ref: dict, reward: dict, beta: float) -> dict:
    weights = {y: ref[y] * math.exp(reward[y] / beta) for y in ref}
    total = sum(weights.values())
    return {y: w / total for y, w in weights.items()}


def slider_grid(slider) -> np.ndarray:
    """Every value a FloatLogSlider can take in the browser: base ** (min + k * step)."""
    exponents = np.arange(slider.min, slider.max + slider.step / 2, slider.step)
    return slider.base ** exponents


@pytest.fixture
def worked():
    demo = TiltingDemo(scenario="worked", beta=1.0, temperature=1.0)
    demo.widget  # build the controls
    return demo


def test_worked_example_at_beta_1_shows_the_chapter_numbers(worked):
    readouts, responses, tree = worked.readouts(), worked.response_view(), worked.token_view()
    assert [round(responses[y]["pi_star"], 3) for y in ("aa", "ab", "bb")] == [0.172, 0.312, 0.454]
    assert round(responses["ba"]["pi_star"], 4) == 0.0615
    expected = brute_force_optimum(WORKED_REF, WORKED_REWARD, 1.0)
    for y in WORKED_REF:
        assert responses[y]["pi_star"] == pytest.approx(expected[y], abs=1e-12)
    assert round(tree["a"]["soft_value"], 2) == 0.52 and round(tree["b"]["soft_value"], 2) == 1.43
    assert tree["a"]["soft_value"] == pytest.approx(math.log(0.6 + 0.4 * math.e))
    assert round(readouts["objective"], 3) == 0.892
    assert readouts["beta_log_partition"] == pytest.approx(math.log(0.42 + 0.28 * math.e + 0.15 + 0.15 * math.e ** 2))
    assert round(readouts["expected_reward"], 3) == 1.221 and round(readouts["kl"], 3) == 0.329
    # the first-token edge to b rises from 0.30 to 0.52, although b itself earns nothing
    assert tree["b"]["pi_ref"] == pytest.approx(0.3)
    assert round(tree["b"]["pi_star"], 2) == 0.52
    assert readouts["reference_objective"] == pytest.approx(0.58)
    # ... and it is what the page shows
    assert 'data-readout="objective">0.892<' in worked.readout_panel.value
    assert "0.30</tspan> → <tspan" in worked.tree.value and ">0.52</tspan>" in worked.tree.value
    assert 'data-readout="pi_star_ba">0.0615<' in worked.responses_table.value


def test_readouts_are_the_exact_solvers_numbers(worked):
    scenario = get_scenario("blind_spot")
    worked.scenario_dropdown.value = "blind_spot"
    worked.beta_slider.value = 0.5
    optimum = tilted_optimum(scenario.model, scenario.rewards, worked.beta)
    readouts = worked.readouts()
    assert readouts["expected_reward"] == optimum.expected_reward
    assert readouts["kl"] == optimum.kl
    assert readouts["beta_log_partition"] == optimum.beta_log_partition
    assert readouts["true_expected_reward"] == pytest.approx(optimum.probs @ scenario.true_rewards, abs=1e-15)
    values = soft_values(scenario.model, scenario.rewards, worked.beta)
    token_optimum = token_level_optimum(scenario.model, scenario.rewards, worked.beta)
    tree = worked.token_view()
    assert tree["c"]["soft_value"] == values[1][2]
    assert tree["cc"]["pi_star"] == token_optimum.tables[1][2, 2]


def test_beta_slider_reaches_half_and_one_and_spans_the_range(worked):
    grid = slider_grid(worked.beta_slider)
    assert grid[0] <= 0.05 + 1e-9 and grid[-1] >= 20 - 1e-9 and grid[-1] < 25
    for beta in (0.5, 1.0):
        assert np.min(np.abs(grid - beta)) < 0.002
    temperatures = slider_grid(worked.temperature_slider)
    assert temperatures[0] == pytest.approx(0.1) and temperatures[-1] == pytest.approx(10 ** 0.5)
    assert np.min(np.abs(temperatures - 1.0)) < 1e-9 and np.min(np.abs(temperatures - 0.5)) < 0.002


def test_moving_beta_to_half_updates_views_in_place(worked):
    image, star_dot, before = worked._figure.widget, worked._star_dot, worked._figure.widget.value
    worked.beta_slider.value = 0.5
    tree, readouts = worked.token_view(), worked.readouts()
    assert round(tree["a"]["soft_value"], 3) == 0.634
    assert round(tree["b"]["soft_value"], 3) == 1.663  # the chapter prints 1.662
    assert round(readouts["beta_log_partition"], 3) == 1.191
    assert round(tree["a"]["pi_star"], 3) == 0.230
    assert round(worked.response_view()["bb"]["pi_star"], 3) == 0.756
    assert 'data-readout="beta_log_partition">1.191<' in worked.readout_panel.value
    # the same widgets and artists, new picture
    assert worked._figure.widget is image and worked._star_dot is star_dot
    assert image.value != before
    assert star_dot.get_data()[0][0] == pytest.approx(readouts["kl"])


def test_worked_example_temperature_is_token_level(worked):
    worked.temperature_toggle.value = True
    worked.temperature_slider.value = 10 ** 0.5
    readouts = worked.readouts()
    # by hand: each next-token distribution raised to 1/T and renormalised
    t = 10 ** 0.5

    def temper(p):
        powered = np.asarray(p) ** (1 / t)
        return powered / powered.sum()

    first, after_a, after_b = temper([0.7, 0.3]), temper([0.6, 0.4]), temper([0.5, 0.5])
    probs = np.array([first[0] * after_a[0], first[0] * after_a[1], first[1] * after_b[0], first[1] * after_b[1]])
    ref = np.array(list(WORKED_REF.values()))
    assert readouts["temperature_expected_reward"] == pytest.approx(probs @ [0, 1, 0, 2])
    assert readouts["temperature_kl"] == pytest.approx(np.sum(probs * np.log(probs / ref)))
    assert round(readouts["temperature_kl"], 3) == 0.045 and round(readouts["temperature_expected_reward"], 3) == 0.699
    assert "pi_ref at T" in worked.responses_table.value
    # lowering T in the worked example lowers the reward: the likeliest answers are not the best
    worked.temperature_slider.value = 0.5
    assert worked.readouts()["temperature_expected_reward"] < 0.58


def test_likely_answers_temperature_helps_but_never_beats_the_optimum(worked):
    worked.scenario_dropdown.value = "likely"
    rewards = {}
    for t in (1.0, 0.5, 0.1):
        worked.temperature_slider.value = t
        rewards[t] = worked.readouts()["temperature_expected_reward"]
    assert abs(worked.temperature - 0.5) < 0.002 or worked.temperature == pytest.approx(0.1)
    assert round(rewards[1.0], 3) == 0.601 and round(rewards[0.1], 3) == 0.800
    assert rewards[0.5] == pytest.approx(0.726, abs=0.002)  # the slider's T is 0.5012
    numbers = TiltingDemo(scenario="likely")  # no widget: the sweep needs only the numbers
    for beta in (0.1, 0.5, 2.0):
        for t in slider_grid(worked.temperature_slider)[::3]:
            numbers.set(beta=beta, temperature=t)
            readouts = numbers.readouts()
            assert readouts["temperature_objective"] <= readouts["objective"] + 1e-12


def test_blind_spot_true_reward_peaks_near_0_43_then_collapses():
    shown = TiltingDemo(scenario="blind_spot")
    shown.widget
    assert shown._true_line.get_visible() and shown._true_caption.layout.display is None
    grid = slider_grid(shown.beta_slider)
    demo = TiltingDemo(scenario="blind_spot")  # no widget: the sweep needs only the numbers
    true_rewards = []
    for beta in grid:
        demo.set(beta=beta)
        true_rewards.append(demo.readouts()["true_expected_reward"])
    peak = int(np.argmax(true_rewards))
    assert 0.40 <= grid[peak] <= 0.47
    assert true_rewards[peak] == pytest.approx(0.626, abs=0.002)
    assert true_rewards[0] < 0.46  # below the reference's true reward at the smallest beta
    demo.set(beta=0.1)
    readouts = demo.readouts()
    assert round(readouts["expected_reward"], 2) == 1.58 and round(readouts["true_expected_reward"], 2) == 0.03
    scenario = get_scenario("blind_spot")
    ref = dict(zip(scenario.model.responses, scenario.model.response_probs()))
    brute = brute_force_optimum(ref, dict(zip(scenario.model.responses, scenario.rewards)), 0.1)
    assert readouts["true_expected_reward"] == pytest.approx(sum(brute[y] * t for y, t in
                                                                  zip(scenario.model.responses, scenario.true_rewards)))
    shown.scenario_dropdown.value = "worked"
    assert not shown._true_line.get_visible() and shown._true_caption.layout.display == "none"


@pytest.mark.parametrize("kwargs, fragment", [
    ({"scenario": "greedy"}, "unknown scenario 'greedy'"),
    ({"beta": 0}, "beta must be"),
    ({"beta": -1.0}, "beta must be"),
    ({"beta": 100.0}, "slider's range"),
    ({"temperature": 0.0}, "temperature must be"),
    ({"temperature": "hot"}, "temperature must be"),
])
def test_bad_arguments_are_named(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        TiltingDemo(**kwargs)


def test_under_the_grader_show_builds_nothing(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    demo = TiltingDemo()
    demo.show()
    assert capsys.readouterr().out.strip() == GRADER_NOTE
    assert demo._widget is None and demo._figure is None
    assert round(demo.readouts()["objective"], 3) == 0.892  # the numbers still work


def test_show_displays_the_widget(monkeypatch):
    shown = []
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr("IPython.display.display", lambda *objects: shown.extend(objects))
    demo = TiltingDemo()
    demo.show()
    assert shown == [demo.widget]
