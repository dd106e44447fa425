"""The KL-estimator demo, driven through its widgets as a student would.

Expected values: the chapter's claims with their exact numbers (0.521, about 45%, 0.704),
recomputed here from the definitions (pi_theta ∝ pi_ref ** (1 - x), k1 = l, k2 = l²/2,
k3 = e^-l - 1 + l), and sampling checks with tolerances of several standard errors.
"""
import math
import re

import numpy as np
import pytest
from matplotlib.text import Text

from lmpolicy.demos.base import GRADER_NOTE
from lmpolicy.demos.kl_estimators import BATCHES_PER_PLAY_STEP, KLEstimatorDemo
from lmpolicy.exact.kl import estimator_moments, probability_mean_below

PI_REF = np.array([0.62, 0.18, 0.09, 0.05, 0.02, 0.02, 0.01, 0.01])  # the chapter's eight tokens


def by_hand(x: float) -> dict:
    """Exact KL and estimator means/stds for pi_theta ∝ pi_ref ** (1 - x), from the definitions."""
    weights = PI_REF ** (1 - x)
    p = weights / weights.sum()
    ratio = np.log(p / PI_REF)
    values = {"k1": ratio, "k2": ratio ** 2 / 2, "k3": np.exp(-ratio) - 1 + ratio}
    result = {"p": p, "kl": float(p @ ratio), "k1_negative_share": float(p[ratio < 0].sum())}
    for name, v in values.items():
        result[f"{name}_mean"] = float(p @ v)
        result[f"{name}_std"] = float(np.sqrt(p @ (v - p @ v) ** 2))
    return result


@pytest.fixture
def demo():
    demo = KLEstimatorDemo()
    demo.widget  # build the controls
    return demo


def test_defaults_and_exact_readouts(demo):
    readouts, exact = demo.readouts(), by_hand(0.2)
    assert demo.x_slider.value == 0.2 and demo.tokens_selector.value == 16 and readouts["batches"] == 0
    assert readouts["exact_kl"] == pytest.approx(exact["kl"], abs=1e-12)
    assert round(readouts["k1_exact_negative_share"], 3) == 0.521
    assert readouts["k1_exact_negative_share"] == pytest.approx(exact["k1_negative_share"], abs=1e-12)
    assert readouts["k3_exact_negative_share"] == 0.0 and readouts["k2_exact_negative_share"] == 0.0
    assert readouts["k1_exact_std"] == pytest.approx(exact["k1_std"] / 4)  # N = 16
    moments = estimator_moments(demo.p_theta, PI_REF)  # the solver's numbers, shown unchanged
    for name in ("k1", "k2", "k3"):
        assert readouts[f"{name}_exact_mean"] == moments.mean[name]
        assert readouts[f"{name}_exact_bias"] == moments.bias[name]
    assert math.isnan(readouts["k1_mean"])
    assert f'data-readout="exact_kl">{exact["kl"]:.4f}<' in demo.table.value


def test_buttons_and_play_draw_batches_and_reset_replays_them(demo):
    demo.draw_button.click()
    assert demo.readouts()["batches"] == 1
    demo.play.value = 1
    demo.play.value = 2
    assert demo.readouts()["batches"] == 1 + 2 * BATCHES_PER_PLAY_STEP
    first = {name: values.copy() for name, values in demo.batch_estimates.items()}
    demo.reset_button.click()
    assert demo.readouts()["batches"] == 0 and demo.play.value == 0
    assert 'data-readout="batches">0<' in demo.table.value
    demo.draw_button.click()
    demo.play.value = 1
    demo.play.value = 2
    for name in first:
        np.testing.assert_array_equal(demo.batch_estimates[name], first[name])
    assert np.all(demo.batch_estimates["k2"] >= 0) and np.all(demo.batch_estimates["k3"] >= 0)


def test_default_play_about_half_of_single_k1_values_are_negative_and_no_k3():
    demo = KLEstimatorDemo()
    demo.draw(2000)  # 32,000 tokens
    readouts, exact = demo.readouts(), by_hand(0.2)
    assert readouts["k1_negative_share"] == pytest.approx(0.521, abs=0.012)  # 4 standard errors
    assert readouts["k3_negative_share"] == 0.0 and readouts["k2_negative_share"] == 0.0
    for name in ("k1", "k3"):  # unbiased: the running mean sits on the exact KL
        standard_error = exact[f"{name}_std"] / 4 / math.sqrt(2000)
        assert abs(readouts[f"{name}_mean"] - exact["kl"]) < 4 * standard_error
    assert readouts["k1_std"] > 4 * readouts["k3_std"]  # k1's histogram is several times wider


def test_far_right_k2_is_about_45_percent_high(demo):
    demo.x_slider.value = 1.0
    readouts, exact = demo.readouts(), by_hand(1.0)
    assert np.allclose(demo.p_theta, 1 / 8)
    assert readouts["exact_kl"] == pytest.approx(exact["kl"]) and round(readouts["exact_kl"], 1) == 1.0
    assert readouts["k2_exact_bias"] / readouts["exact_kl"] == pytest.approx(0.446, abs=0.001)
    assert exact["k2_mean"] / exact["kl"] - 1 == pytest.approx(0.446, abs=0.001)
    demo.draw(400)
    assert 0.38 < readouts_ratio(demo) < 0.51


def readouts_ratio(demo) -> float:
    readouts = demo.readouts()
    return readouts["k2_mean"] / readouts["exact_kl"] - 1


def test_far_left_most_k3_batches_land_below_the_true_kl():
    exact = by_hand(-1.0)
    assert probability_mean_below(exact["p"], PI_REF, 16, estimator="k3") == pytest.approx(0.704, abs=0.0005)
    assert exact["k3_std"] > exact["k1_std"]
    demo = KLEstimatorDemo(x=-1.0, tokens_per_estimate=16)
    demo.draw(4000)
    readouts = demo.readouts()
    assert readouts["k3_below_kl_share"] == pytest.approx(0.704, abs=0.03)  # about 4 standard errors
    assert readouts["k3_exact_std"] > readouts["k1_exact_std"]
    assert readouts["k3_std"] > readouts["k1_std"]


def test_spreads_shrink_like_one_over_sqrt_n(demo):
    spreads = {}
    for n in (1, 256):
        demo.tokens_selector.value = n
        assert demo.readouts()["batches"] == 0  # a new N starts again
        demo.draw(300)
        spreads[n] = demo.readouts()
    for name in ("k1", "k2", "k3"):
        assert spreads[1][f"{name}_exact_std"] / spreads[256][f"{name}_exact_std"] == pytest.approx(16)
        assert 12 < spreads[1][f"{name}_std"] / spreads[256][f"{name}_std"] < 21


def test_slider_move_keeps_the_same_figure_and_widgets(demo):
    images = (demo._curves_figure.widget, demo._histogram_figure.widget)
    dots, before = demo._token_dots, [image.value for image in images]
    demo.x_slider.value = -0.5
    assert (demo._curves_figure.widget, demo._histogram_figure.widget) == images and demo._token_dots is dots
    assert all(image.value != old for image, old in zip(images, before))
    ratios = dots.get_offsets()[:, 0]
    weights = PI_REF ** 1.5
    np.testing.assert_allclose(ratios, np.log(weights / weights.sum() / PI_REF))


@pytest.mark.parametrize("kwargs, fragment", [
    ({"x": 1.5}, "x must be between"),
    ({"x": "flat"}, "x must be a number"),
    ({"tokens_per_estimate": 5}, "tokens_per_estimate must be one of"),
    ({"seed": 1.5}, "seed must be an integer"),
])
def test_bad_arguments_are_named(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        KLEstimatorDemo(**kwargs)


def test_draw_rejects_a_bad_batch_count():
    with pytest.raises(ValueError, match="batches must be a whole number"):
        KLEstimatorDemo().draw(0)


def test_under_the_grader_show_builds_nothing(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    demo = KLEstimatorDemo()
    demo.show()
    assert capsys.readouterr().out.strip() == GRADER_NOTE
    assert demo._widget is None and "_curves_figure" not in vars(demo)  # nothing built, nothing drawn


SIGNED_ZERO = re.compile(r"[-+−]0\.0+(?![0-9]*[1-9])")


def test_table_never_shows_a_signed_zero(demo):
    # at the default x the exact biases of k1 and k3 are rounding noise around 0 (about -1e-17)
    assert abs(demo.readouts()["k1_exact_bias"]) < 1e-12
    assert 'data-readout="k1_exact_bias">0.0000<' in demo.table.value
    for x in np.linspace(-1.0, 1.0, 21):
        demo.x_slider.value = round(float(x), 2)
        demo.draw(3)
        assert not SIGNED_ZERO.search(demo.table.value), (x, SIGNED_ZERO.search(demo.table.value).group())
    assert re.search(r'data-readout="k2_exact_bias">\+0\.\d*[1-9]', demo.table.value)  # real signs stay


def test_one_token_per_estimate_is_singular(demo):
    demo.tokens_selector.value = 1
    assert "N = 1 token per estimate" in demo.table.value and "1 tokens" not in demo.table.value
    demo.tokens_selector.value = 4
    assert "N = 4 tokens per estimate" in demo.table.value
    assert demo.tokens_selector.tooltips[0] == "1 token per estimate"


def test_play_and_stop_are_labelled(demo):
    # ipywidgets' Play draws two bare icons: a label beside them and a tooltip say what they do
    assert "Play" in demo.play.tooltip and "Stop" in demo.play.tooltip
    row = next(box for box in demo.widget.children[1].children if demo.play in box.children)
    assert demo.play_label in row.children
    assert "▶ Play" in demo.play_label.value and "■ Stop" in demo.play_label.value
    for button in (demo.draw_button, demo.reset_button):
        assert button.description and button.tooltip


def test_estimates_beyond_the_histogram_range_are_counted_at_its_edge():
    demo = KLEstimatorDemo(x=-1.0, tokens_per_estimate=16)
    demo.widget
    demo.draw(2000)
    edges, histograms = demo.histogram_edges(), demo.histogram_counts()
    k3 = demo.batch_estimates["k3"]
    above = int(np.sum(k3 > edges[-1]))
    assert above > 10  # k3's long right tail at x = -1 reaches past KL + 4 standard deviations
    assert histograms["k3"]["above"] == above and histograms["k3"]["below"] == int(np.sum(k3 < edges[0]))
    for name, parts in histograms.items():
        assert parts["counts"].sum() + parts["below"] + parts["above"] == demo.batches
    # the last bin holds only estimates inside the range: the tail is not piled into it
    assert histograms["k3"]["counts"][-1] == int(np.sum((k3 >= edges[-2]) & (k3 <= edges[-1])))
    marker = demo._histograms["k3"]["beyond"]["above"]
    assert marker.get_visible() and f"{above:,} beyond →" == marker.get_text()
    assert not demo._histograms["k3"]["beyond"]["below"].get_visible()
    demo.reset_button.click()
    assert not any(text.get_visible() for parts in demo._histograms.values() for text in parts["beyond"].values())


def test_moving_x_or_n_says_that_it_cleared_the_batches(demo):
    assert "Moving x or N clears the batches" in demo.status_line.value  # said before it happens
    demo.draw(5)
    demo.x_slider.value = -0.5
    assert demo.readouts()["batches"] == 0
    assert "x moved from 0.20 to -0.50, so the 5 batches drawn before were cleared" in demo.status_line.value
    demo.draw_button.click()
    demo.tokens_selector.value = 64
    assert "N changed from 16 to 64, so the one batch drawn before was cleared" in demo.status_line.value
    demo.x_slider.value = 0.0  # nothing drawn since: nothing cleared, the last message stays true
    assert "N changed from 16 to 64" in demo.status_line.value
    demo.draw(2)
    demo.reset_button.click()  # the student cleared them: back to the plain rule
    assert "Moving x or N clears the batches" in demo.status_line.value


def test_every_histogram_numbers_its_ticks_and_the_log_ratio_axis_is_named(demo):
    demo.x_slider.value = 1.0
    demo.draw(50)
    for name, parts in demo._histograms.items():
        marks = parts["tick_marks"].get_xdata()
        numbers = [float(label.get_text()) for label in parts["tick_labels"] if label.get_visible()]
        assert len(numbers) >= 3 and numbers == pytest.approx(list(marks)), name  # a number under every mark
        left, right = parts["axes"].get_xlim()
        assert all(left < value < right for value in numbers), name
    texts = [text.get_text() for text in demo._curves_figure.figure.findobj(Text)]
    assert any("log-ratio" in text and r"\ell" in text for text in texts), texts
    assert "k3 = e^(−ℓ) − 1 + ℓ" in demo.table.value and "= l" not in demo.table.value


def test_the_pictures_say_in_words_what_they_show_and_follow_the_draws():
    from lmpolicy.demos.kl_estimators import ACCESSIBLE, COLORS

    demo = KLEstimatorDemo(x=0.2, tokens_per_estimate=16, seed=0)
    demo.widget
    assert "k2 = ℓ²/2 (dashed line)" in demo._curves_figure.text_widget.value
    assert "no batch drawn yet" in demo._histogram_figure.text_widget.value
    assert demo.spoken.value.endswith("no estimate yet.")
    demo.draw(3)
    assert "Three histograms of 3 batch estimates of N = 16 tokens each" in demo._histogram_figure.text_widget.value
    assert f"k3 {demo.readouts()['k3_mean']:.4f}" in demo.spoken.value
    demo.tokens_selector.value = 64
    assert "N = 64 tokens, 0 batches" in demo.spoken.value
    # the three curves differ by line style and marker as well as colour; no text is in a series' colour
    lines = demo._curves_figure.figure.axes[0].get_lines()[:3]
    assert len({line.get_linestyle() for line in lines}) == 3 and len({line.get_marker() for line in lines}) == 3
    for colour in COLORS.values():
        assert f"color:{colour}" not in demo.table.value.replace(" ", "")
    classes = {cls for control in (demo.x_slider, demo.tokens_selector, demo.spoken, demo.widget)
               for cls in control._dom_classes}
    assert {ACCESSIBLE.root, *ACCESSIBLE.sliders, "lmpolicy-kl-tokens", *ACCESSIBLE.live} <= classes
