"""The tilting demo, driven through its widgets as a student would.

Expected values: the chapter's printed numbers (and their exact values), and the formulas computed here by
brute force over the four or nine responses; plus equality with the exact solvers, whose numbers
the demo must show unchanged.
"""
import math
import re
from xml.etree import ElementTree

import numpy as np
import pytest

from lmpolicy.demos.base import GRADER_NOTE
from lmpolicy.demos.tilting import TiltingDemo
from lmpolicy.exact.scenarios import get_scenario
from lmpolicy.exact.tilting import soft_values, tilted_optimum, token_level_optimum

WORKED_REF = {"aa": 0.42, "ab": 0.28, "ba": 0.15, "bb": 0.15}
WORKED_REWARD = {"aa": 0.0, "ab": 1.0, "ba": 0.0, "bb": 2.0}
SVG = "{http://www.w3.org/2000/svg}"


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
    assert shown._true_line.get_visible() and "true reward" in shown.legend.value
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
    assert not shown._true_line.get_visible() and "true reward" not in shown.legend.value


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
    assert demo._widget is None and "_figure" not in vars(demo)  # nothing built, nothing solved


def test_show_displays_the_widget(monkeypatch):
    shown = []
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr("IPython.display.display", lambda *objects: shown.extend(objects))
    demo = TiltingDemo()
    demo.show()
    # the widget, then the script that names its controls for keyboard and screen-reader users
    assert shown[0] is demo.widget and len(shown) == 2
    assert "lmpolicy-tilting-demo" in shown[1].data and "data-lm-suppress-shortcuts" in shown[1].data


def svg_texts_and_edges(svg: str):
    """(text boxes, edges) of the token tree. A text box is estimated generously from its anchor,
    its characters (0.7 em each: wider than DejaVu Sans' bold digits) and the font's ascent and
    descent; an edge is its polyline's points and stroke width."""
    root = ElementTree.fromstring(svg)
    font = float(root.get("font-size"))
    boxes = []
    for text in root.iter(f"{SVG}text"):
        content = "".join(text.itertext())
        width, x, baseline = 0.7 * font * len(content), float(text.get("x")), float(text.get("y"))
        left = {"start": x, "middle": x - width / 2, "end": x - width}[text.get("text-anchor", "start")]
        boxes.append((content, left, baseline - 0.95 * font, left + width, baseline + 0.25 * font))
    edges = [(line.get("data-edge-line"), [tuple(map(float, point.split(","))) for point in line.get("points").split()],
              float(line.get("stroke-width"))) for line in root.iter(f"{SVG}polyline")]
    return boxes, edges


def crosses(box, points, stroke) -> bool:
    """True if the line (as wide as its stroke) passes through the box: checked every 0.25 % of each segment."""
    _, left, top, right, bottom = box
    t = np.linspace(0.0, 1.0, 401)
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        x, y = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
        inside = (left - stroke / 2 < x) & (x < right + stroke / 2) & (top - stroke / 2 < y) & (y < bottom + stroke / 2)
        if inside.any():
            return True
    return False


@pytest.mark.parametrize("scenario", ["worked", "likely", "blind_spot"])
def test_tree_text_never_sits_on_an_edge(scenario):
    demo = TiltingDemo(scenario=scenario)
    demo.widget
    for beta in (0.05, 0.3, 1.0, 20.0):
        demo.set(beta=beta)
        boxes, edges = svg_texts_and_edges(demo.tree.value)
        assert len(edges) == len(demo.token_view()) - 1 and len(boxes) == 2 * len(demo.token_view()) - 1
        overlaps = [(box[0], edge) for box in boxes for edge, points, stroke in edges if crosses(box, points, stroke)]
        assert overlaps == [], f"beta {beta}: text over edges {overlaps}"


def test_the_overlap_check_sees_a_label_on_its_line():
    # the old layout: a label centred on a straight edge, 4 px above it
    svg = (f"<svg xmlns='{SVG[1:-1]}' font-size='12'><polyline points='0,0 200,90' stroke-width='6'/>"
           "<text x='110' y='45' text-anchor='middle'>0.10 → 0.97</text></svg>")
    boxes, edges = svg_texts_and_edges(svg)
    assert crosses(boxes[0], edges[0][1], edges[0][2])


def edge_widths(svg: str) -> dict:
    _, edges = svg_texts_and_edges(svg)
    return {edge: stroke for edge, _, stroke in edges}


def test_edges_are_as_thick_as_the_chance_pi_star_takes_them():
    demo = TiltingDemo(scenario="blind_spot", beta=0.1)
    demo.widget
    tree, widths = demo.token_view(), edge_widths(demo.tree.value)
    # pi* almost never starts with "a", so the edges below "a" stay thin although pi*(a | a) = 0.5
    assert tree["a"]["pi_star"] < 0.01 and tree["aa"]["pi_star"] == pytest.approx(0.5, abs=0.01)
    assert tree["aa"]["pi_star_reach"] == pytest.approx(tree["a"]["pi_star"] * tree["aa"]["pi_star"])
    assert widths["aa"] < 1.0 and widths["ab"] < 1.0 and widths["a"] < 1.0
    assert tree["cc"]["pi_star_reach"] == pytest.approx(demo.response_view()["cc"]["pi_star"])
    assert widths["cc"] > 7.0 and widths["c"] > 7.0  # where pi* really goes: 0.97
    # in the worked example at beta = 1 the reach of "bb" is pi*(bb) = 0.454
    worked = TiltingDemo()
    worked.widget
    reach = worked.token_view()["bb"]["pi_star_reach"]
    assert reach == pytest.approx(0.454, abs=5e-4)
    assert edge_widths(worked.tree.value)["bb"] == pytest.approx(0.8 + 7.0 * reach, abs=0.01)


SIGNED_ZERO = re.compile(r"[-+−]0\.0+(?![0-9]*[1-9])")


def test_no_signed_zero_is_ever_shown():
    demo = TiltingDemo(show_temperature=True)
    demo.widget
    for scenario in ("worked", "likely", "blind_spot"):
        demo.scenario_dropdown.value = scenario
        for beta in slider_grid(demo.beta_slider)[::4]:
            demo.beta_slider.value = beta
            for html in (demo.readout_panel.value, demo.tree.value, demo.responses_table.value):
                assert not SIGNED_ZERO.search(html), SIGNED_ZERO.search(html).group()
    assert SIGNED_ZERO.search("V = -0.00<") and not SIGNED_ZERO.search("-0.0012")


def test_readouts_compare_three_policies_in_a_short_table(worked):
    # one column per policy, one row per quantity: as short as the four controls beside it
    table = ElementTree.fromstring(worked.readout_panel.value)
    rows = table.findall("tr")
    # each column headed by its policy's name (after a swatch of its colour: the name, not the colour, says it)
    assert ["".join(th.itertext()).strip() for th in rows[0].findall("th")][1:] == ["pi* at this β", "pi_ref at T",
                                                                                     "pi_ref"]
    assert all(th.get("scope") == "col" for th in rows[0].findall("th")[1:])
    assert len(rows) <= 6
    readouts = worked.readouts()
    # each row headed by its quantity (a row header, for a screen reader)
    row = {tr.find("th").text: [td.findtext("span") or td.text for td in tr.findall("td")] for tr in rows[1:]}
    assert row["E[r]"] == [f"{readouts[k]:.3f}" for k in ("expected_reward", "temperature_expected_reward",
                                                          "reference_expected_reward")]
    assert row["J = E[r] − β·KL"][0] == "0.892" and row["KL from pi_ref"][2] == "0"
    worked.scenario_dropdown.value = "blind_spot"
    assert "E[true reward]" in worked.readout_panel.value


def test_scenario_menu_names_the_vocabulary(worked):
    labels = [label for label, _ in worked.scenario_dropdown.options]
    assert labels == ["Worked example from the text (vocabulary a, b)",
                      "Likely answers are good answers (vocabulary a, b, c)",
                      "Reward model with a blind spot (vocabulary a, b, c)"]
    assert "two tokens" in worked.widget.children[0].value  # the header says how long responses are


def test_the_picture_and_the_tree_say_in_words_what_they_show_and_follow_the_slider(worked):
    words = worked._figure.text_widget.value
    assert "data-describes='lmpolicy-tilting-picture'" in words and "pi*: aa 0.172, ab 0.312, ba 0.061, bb 0.454" in words
    assert "lmpolicy-tilting-picture" in worked._figure.widget._dom_classes  # the picture the words name
    tree = ElementTree.fromstring(worked.tree.value)
    assert tree.get("role") == "img" and tree.get("aria-label").startswith("Token tree. start: V = 0.892")
    assert worked.spoken.value.startswith("β = 1, T = 1: pi* has E[r] 1.221")
    worked.beta_slider.value = 0.5
    assert "pi* at β = 0.5 is at KL" in worked._figure.text_widget.value
    assert worked.spoken.value.startswith("β = 0.5,") and "likeliest response is bb (0.756)" in worked.spoken.value


def test_no_text_is_told_apart_by_colour_alone_and_all_of_it_takes_the_themes_colours(worked):
    from lmpolicy.demos.tilting import COLORS

    worked.scenario_dropdown.value = "blind_spot"
    worked.temperature_toggle.value = True
    for html in (worked.readout_panel.value, worked.responses_table.value, worked.tree.value, worked.legend.value):
        for colour in COLORS.values():  # a series' colour only in a swatch (aria-hidden), never on text
            assert f"color:{colour}" not in html.replace(" ", "") and f"fill='{colour}'" not in worked.tree.value
    assert "fill='black'" not in worked.tree.value and "fill='currentColor'" in worked.tree.value  # dark theme


def test_the_front_end_script_names_every_control_the_demo_has(worked):
    from lmpolicy.demos.tilting import ACCESSIBLE

    classes = {cls for control in (worked.scenario_dropdown, worked.beta_slider, worked.temperature_slider,
                                   worked.spoken, worked.widget) for cls in control._dom_classes}
    assert {ACCESSIBLE.root, *ACCESSIBLE.sliders, *ACCESSIBLE.selects, *ACCESSIBLE.live} <= classes
    script = ACCESSIBLE.script()
    assert '"β, the weight of the KL penalty"' in script and "aria-valuetext" in script and "stopPropagation" in script
