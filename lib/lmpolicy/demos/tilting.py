"""Demo "Tilting a toy language model": pi* = pi_ref exp(r / beta) / Z, seen token by token and on
the reward-KL plane, next to the reference sampled at a lower or higher temperature.

With a student id (``lmpolicy.per_student.variants``) the scenario menu also offers the student's own two models,
"your_worked" (Exercises 11.5(b), 11.9(a)) and "your_blind_spot" (11.8(b), 11.9(c)), after the chapter's.

Every number comes from the exact solvers (``lmpolicy.exact.tilting``, ``lmpolicy.exact.temperature``,
``lmpolicy.exact.kl``) applied to the three toy models of ``lmpolicy.exact.scenarios``. Temperature here is
token-level temperature: each next-token distribution raised to the power 1/T and renormalised,
which is what a sampler does.

    >>> demo = TiltingDemo(scenario="worked", beta=1.0)
    >>> round(demo.readouts()["objective"], 3)
    0.892
"""
from __future__ import annotations

import html
import math

import numpy as np

from lmpolicy.demos.accessible import Accessible, Slider
from lmpolicy.demos.base import TABLE_STYLE, WidgetDemo, format_number, spoken_readout, swatch, text_block
from lmpolicy.demos.figure_widget import FigureImage
from lmpolicy.exact.kl import kl
from lmpolicy.per_student import variants
from lmpolicy.exact.scenarios import SCENARIOS, Scenario, get_scenario
from lmpolicy.exact.temperature import temperature_curve, token_temperature
from lmpolicy.exact.numeric import check_positive
from lmpolicy.exact.tilting import (check_beta, expected_reward, frontier, kl_objective, soft_values,
                                    tilted_optimum, token_level_optimum)

# Slider grids in log10 units. beta: 10 steps per doubling, so 0.5 and 1 are exact grid points,
# from 2 ** -4.4 = 0.047 to 2 ** 4.4 = 21. Temperature: 0.1 to 10 ** 0.5 = 3.16 in 60 steps
# (T = 1 is a grid point, T = 0.5 is within 0.0012).
BETA_LOG_STEP = math.log10(2.0) / 10
BETA_LOG_RANGE = (-44 * BETA_LOG_STEP, 44 * BETA_LOG_STEP)
TEMPERATURE_LOG_STEP = 0.025
TEMPERATURE_LOG_RANGE = (-1.0, 0.5)
BETA_RANGE = tuple(10.0 ** e for e in BETA_LOG_RANGE)
TEMPERATURE_RANGE = tuple(10.0 ** e for e in TEMPERATURE_LOG_RANGE)
CURVE_POINTS = 200

COLORS = {"ref": "#7f7f7f", "star": "#6a3d9a", "temperature": "#2ca02c", "true": "#d62728"}
# Each series is told apart by more than its colour: its curve's line style, its dot's marker and its bars'
# hatching (for colour-blind eyes, and for a print in grey).
LINES = {"star": "solid", "temperature": "dotted", "true": "dashed"}
MARKERS = {"ref": "D", "star": "o", "temperature": "s", "true": "open"}
HATCHES = {"ref": "", "star": "///", "temperature": "..."}
TEMPERATURE_MEANING = "token-level sampling temperature: T < 1 sharpens every next-token distribution"
# The controls' column, beside the readouts: together they fit a laptop's 848 px output area.
CONTROL_WIDTH_PX = 400
DESCRIPTION_WIDTH_PX = 64


def available_scenarios() -> dict[str, Scenario]:
    """The menu: the chapter's scenarios, then the current student's own (none without a student id)."""
    return {**SCENARIOS, **variants.tilting_scenarios()}


def _scenario_named(name: str) -> Scenario:
    scenarios = available_scenarios()
    if name in scenarios:
        return scenarios[name]
    if name in (variants.YOUR_WORKED, variants.YOUR_BLIND_SPOT):
        raise ValueError(f"scenario {name!r} is a student's own model and needs a student id: {variants.SET_ID_HOW}")
    return get_scenario(name)  # ValueError naming the chapter's scenarios


def _check_in_range(value: float, name: str, bounds: tuple[float, float]) -> float:
    """``value`` if within the slider's range (to rounding: the browser computes 10 ** exponent)."""
    low, high = bounds
    if not low * (1 - 1e-9) <= value <= high * (1 + 1e-9):
        raise ValueError(f"{name} must be between {low:.3g} and {high:.3g} (the slider's range), got {value!r}")
    return value


ACCESSIBLE = Accessible(
    root="lmpolicy-tilting-demo", name="Tilting demo",
    sliders={"lmpolicy-tilting-beta": Slider("β, the weight of the KL penalty", "β"),
             "lmpolicy-tilting-temperature": Slider("T, the sampling temperature of pi_ref", "T")},
    selects={"lmpolicy-tilting-scenario": "scenario"},
    live=("lmpolicy-tilting-spoken",))


class TiltingDemo(WidgetDemo):
    """The tilting demo: state, readouts, and (on first use of ``widget``) its controls.

    Parameters
    ----------
    scenario : "worked" (default), "likely" or "blind_spot" (see ``lmpolicy.exact.scenarios``); with a
        student id also "your_worked" and "your_blind_spot" (``lmpolicy.per_student.variants``)
    beta : float > 0, default 1.0, within the slider's range (about 0.05 to 20)
    temperature : float > 0, default 1.0, within the slider's range (0.1 to 3.16); token-level
    show_temperature : bool, default False: also show pi_ref at temperature T in the response bars

    Controls (after ``widget`` or ``show()``): ``scenario_dropdown``, ``beta_slider`` (a
    FloatLogSlider), ``temperature_slider`` (FloatLogSlider) and ``temperature_toggle``
    (Checkbox). Setting their ``value`` updates the demo exactly as in JupyterLab.

    Under nbgrader (validate or grading) it computes nothing: ``show()`` prints one line, and anything
    else raises ``DemoNotAvailableWhileGrading`` (``lmpolicy.demos.base``).
    """

    _ACCESSIBLE = ACCESSIBLE

    def __init__(self, scenario: str = "worked", beta: float = 1.0, temperature: float = 1.0,
                 show_temperature: bool = False) -> None:
        if self._stand_in_under_grader():  # no numbers while grading (lmpolicy.demos.base)
            return
        self._figure = None
        self._set_scenario(scenario)
        self.beta = _check_in_range(check_beta(beta), "beta", BETA_RANGE)
        self.temperature = _check_in_range(check_positive(temperature, "temperature", TEMPERATURE_MEANING),
                                           "temperature", TEMPERATURE_RANGE)
        self.show_temperature = bool(show_temperature)
        self._solve_beta()
        self._solve_temperature()

    # -- state -------------------------------------------------------------------------------

    def _set_scenario(self, name: str) -> None:
        self.scenario = _scenario_named(name)
        model, rewards = self.scenario.model, self.scenario.rewards
        self.reference_probs = model.response_probs()
        betas = np.geomspace(*BETA_RANGE, CURVE_POINTS)
        self.frontier = frontier(model, rewards, betas)
        self.frontier_true_reward = self.frontier.probs @ self.scenario.true_rewards
        self.temperature_curve = temperature_curve(model, rewards, np.geomspace(*TEMPERATURE_RANGE, CURVE_POINTS))

    def _solve_beta(self) -> None:
        model, rewards = self.scenario.model, self.scenario.rewards
        self.optimum = tilted_optimum(model, rewards, self.beta)
        self.soft_values = soft_values(model, rewards, self.beta)
        self.token_optimum = token_level_optimum(model, rewards, self.beta)

    def _solve_temperature(self) -> None:
        self.tempered = token_temperature(self.scenario.model, self.temperature)

    def set(self, *, scenario: str | None = None, beta: float | None = None,
            temperature: float | None = None, show_temperature: bool | None = None) -> None:
        """Change any of the four settings (validated as in the constructor) and update the views."""
        if scenario is not None and scenario != self.scenario.name:
            self._set_scenario(scenario)
        if beta is not None:
            self.beta = _check_in_range(check_beta(beta), "beta", BETA_RANGE)
        if temperature is not None:
            self.temperature = _check_in_range(
                check_positive(temperature, "temperature", TEMPERATURE_MEANING), "temperature", TEMPERATURE_RANGE)
        if show_temperature is not None:
            self.show_temperature = bool(show_temperature)
        if scenario is not None or beta is not None:
            self._solve_beta()
        if scenario is not None or temperature is not None:
            self._solve_temperature()
        self._refresh(rebuild=scenario is not None)

    def readouts(self) -> dict:
        """The readout panel as floats.

        pi* at this beta: ``expected_reward`` E[r], ``true_expected_reward`` E[true r] (equal to
        E[r] outside the blind-spot scenario), ``kl`` KL(pi* || pi_ref), ``objective`` J = E[r] - beta KL,
        ``beta_log_partition`` beta log Z. Other policies at this beta: ``reference_objective``
        J(pi_ref) = E_ref[r], ``reference_expected_reward`` and ``reference_true_expected_reward``
        (pi_ref's KL is 0); pi_ref at temperature T: ``temperature_expected_reward``,
        ``temperature_true_expected_reward``, ``temperature_kl``, ``temperature_objective``.
        Also ``beta`` and ``temperature``.
        """
        model, rewards, beta = self.scenario.model, self.scenario.rewards, self.beta
        tempered_probs = self.tempered.response_probs()
        return {
            "beta": beta,
            "temperature": self.temperature,
            "expected_reward": self.optimum.expected_reward,
            "true_expected_reward": expected_reward(self.optimum.probs, self.scenario.true_rewards),
            "kl": self.optimum.kl,
            "objective": self.optimum.objective,
            "beta_log_partition": self.optimum.beta_log_partition,
            "reference_objective": kl_objective(self.reference_probs, model, rewards, beta),
            "reference_expected_reward": expected_reward(self.reference_probs, rewards),
            "reference_true_expected_reward": expected_reward(self.reference_probs, self.scenario.true_rewards),
            "temperature_expected_reward": expected_reward(tempered_probs, rewards),
            "temperature_true_expected_reward": expected_reward(tempered_probs, self.scenario.true_rewards),
            "temperature_kl": kl(tempered_probs, self.reference_probs),
            "temperature_objective": kl_objective(tempered_probs, model, rewards, beta),
        }

    def response_view(self) -> dict:
        """Per response: ``{"aa": {"reward", "true_reward", "pi_ref", "pi_star", "pi_temperature"}, ...}``."""
        tempered = self.tempered.response_probs()
        return {response: {"reward": float(self.scenario.rewards[i]),
                           "true_reward": float(self.scenario.true_rewards[i]),
                           "pi_ref": float(self.reference_probs[i]),
                           "pi_star": float(self.optimum.probs[i]),
                           "pi_temperature": float(tempered[i])}
                for i, response in enumerate(self.scenario.model.responses)}

    def token_view(self) -> dict:
        """Per node of the token tree (the prefixes "", "a", ..., "aa", ...): ``soft_value`` V, and
        for every node but the root the edge into it, ``pi_ref`` -> ``pi_star``: the probability of
        its last token after its parent prefix, under pi_ref and under the token-level pi*; and
        ``pi_star_reach``, the probability that pi* writes this prefix at all (the product of the
        ``pi_star`` values along the path from the root).
        """
        model = self.scenario.model
        view = {"": {"soft_value": float(self.soft_values[0])}}
        for depth in range(1, model.depth + 1):
            reach = self.token_optimum.prefix_probs(depth)
            for prefix in model.prefixes(depth):
                index = model.prefix_index(prefix)
                view[prefix] = {"soft_value": float(self.soft_values[depth][index]),
                                "pi_ref": float(model.tables[depth - 1][index]),
                                "pi_star": float(self.token_optimum.tables[depth - 1][index]),
                                "pi_star_reach": float(reach[index])}
        return view

    # -- widgets -----------------------------------------------------------------------------

    def _build_widget(self):
        import ipywidgets as w

        self.tree = w.HTML()
        self.responses_table = w.HTML()
        self.readout_panel = w.HTML(layout=w.Layout(margin="0 0 0 16px"))
        self.legend = w.HTML()
        self.spoken = spoken_readout("lmpolicy-tilting-spoken")
        self._build_figure()
        control = {"layout": w.Layout(width=f"{CONTROL_WIDTH_PX}px"),
                   "style": {"description_width": f"{DESCRIPTION_WIDTH_PX}px"}}
        self.scenario_dropdown = w.Dropdown(options=[(s.title, s.name) for s in available_scenarios().values()],
                                            value=self.scenario.name, description="scenario", **control)
        self.beta_slider = w.FloatLogSlider(value=self.beta, base=10, min=BETA_LOG_RANGE[0],
                                            max=BETA_LOG_RANGE[1], step=BETA_LOG_STEP,
                                            readout_format=".3g", description="β", **control)
        self.temperature_slider = w.FloatLogSlider(value=self.temperature, base=10,
                                                   min=TEMPERATURE_LOG_RANGE[0], max=TEMPERATURE_LOG_RANGE[1],
                                                   step=TEMPERATURE_LOG_STEP, readout_format=".3g",
                                                   description="T", **control)
        self.temperature_toggle = w.Checkbox(value=self.show_temperature,
                                             description="show pi_ref at temperature T in the bars",
                                             indent=False,
                                             layout=w.Layout(margin=f"0 0 0 {DESCRIPTION_WIDTH_PX + 8}px"))
        self.scenario_dropdown.observe(lambda change: self.set(scenario=change["new"]), names="value")
        self.beta_slider.observe(lambda change: self.set(beta=change["new"]), names="value")
        self.temperature_slider.observe(lambda change: self.set(temperature=change["new"]), names="value")
        self.temperature_toggle.observe(lambda change: self.set(show_temperature=change["new"]), names="value")
        for control_widget, name in ((self.scenario_dropdown, "scenario"), (self.beta_slider, "beta"),
                                     (self.temperature_slider, "temperature"), (self.temperature_toggle, "toggle")):
            control_widget.add_class(f"lmpolicy-tilting-{name}")
        title = w.HTML(text_block(
            "<b>Tilting a toy language model.</b> Every response is two tokens from the scenario's "
            "vocabulary; pi* = pi_ref·exp(r/β)/Z. Move β to trade reward against KL from pi_ref, "
            "T to sample pi_ref at a temperature instead."))
        notes = w.HTML(text_block(
            "<b>Reading the demo.</b> Token view (left): each edge reads pi_ref → pi* for that token after "
            "its parent and is drawn as thick as the chance that pi* takes it; V is the node's soft value "
            "(at a finished response, its reward). Response view (right, and the bars above): the same "
            "policies as probabilities of whole responses. <i>Temperature is token-level</i>: T rescales "
            "every next-token distribution of pi_ref (each raised to 1/T and renormalised), as a sampler "
            "does; it knows nothing about the reward.", note=True))
        # Everything β moves sits directly under the controls, inside one laptop screen: readouts
        # beside the controls, then the picture, then the token tree beside the response table.
        controls = w.VBox([self.scenario_dropdown, self.beta_slider, self.temperature_slider,
                           self.temperature_toggle])
        self._refresh(rebuild=True)
        row = w.Layout(flex_flow="row wrap")  # in a narrower output area the right part goes below
        box = w.VBox([title, w.HBox([controls, self.readout_panel], layout=row), self.spoken, self.legend,
                      self._figure.widget, self._figure.text_widget, w.HBox([self.tree, self.responses_table],
                                                                             layout=row), notes])
        box.add_class("lmpolicy-tilting-demo")
        box.add_class("lmpolicy-demo")
        return box

    # -- figure: response bars and the reward-KL plane ---------------------------------------

    def _build_figure(self) -> None:
        self._figure = FigureImage(width=8.6, height=2.5, name="lmpolicy-tilting-picture")
        figure = self._figure.figure
        self._bars_axes = figure.add_axes((0.07, 0.2, 0.40, 0.77))
        self._plane_axes = figure.add_axes((0.575, 0.2, 0.41, 0.77))
        plane = self._plane_axes
        self._frontier_line, = plane.plot([], [], color=COLORS["star"], linestyle=LINES["star"], linewidth=2)
        self._true_line, = plane.plot([], [], color=COLORS["true"], linestyle=LINES["true"], linewidth=1.5)
        self._temperature_line, = plane.plot([], [], color=COLORS["temperature"], linestyle=LINES["temperature"],
                                             linewidth=2)
        self._reference_dot, = plane.plot([], [], "D", color=COLORS["ref"], markersize=7)
        self._temperature_dot, = plane.plot([], [], "s", color=COLORS["temperature"], markersize=8)
        self._true_dot, = plane.plot([], [], "o", markerfacecolor="white", color=COLORS["true"], markersize=8)
        self._star_dot, = plane.plot([], [], "o", color=COLORS["star"], markersize=10)
        plane.set_xlabel("KL(pi ‖ pi_ref)")
        plane.set_ylabel("E[r]")
        self._bars = None

    def _rebuild_scenario_artists(self) -> None:
        """New bars and curve data: only when the scenario (and so the responses) change."""
        axes = self._bars_axes
        axes.clear()
        responses = self.scenario.model.responses
        positions = np.arange(len(responses))
        width = 0.27
        self._bars = {key: axes.bar(positions + offset, np.zeros(len(responses)), width, color=COLORS[key],
                                    hatch=HATCHES[key], edgecolor="white" if HATCHES[key] else COLORS[key],
                                    linewidth=0)
                      for key, offset in (("ref", -width), ("star", 0.0), ("temperature", width))}
        self._figure.set_moving([bar for bars in self._bars.values() for bar in bars]
                                + [self._star_dot, self._true_dot, self._temperature_dot])
        axes.set_xticks(positions, responses)
        axes.set_ylim(0.0, 1.0)
        axes.set_ylabel("probability")
        self._frontier_line.set_data(self.frontier.kl, self.frontier.expected_reward)
        self._temperature_line.set_data(self.temperature_curve.kl, self.temperature_curve.expected_reward)
        blind_spot = self.scenario.has_blind_spot
        self._true_line.set_data(self.frontier.kl, self.frontier_true_reward)
        self._true_line.set_visible(blind_spot)
        self._true_dot.set_visible(blind_spot)
        self.legend.value = figure_legend(blind_spot)
        self._reference_dot.set_data([0.0], [expected_reward(self.reference_probs, self.scenario.rewards)])
        kls = np.concatenate([self.frontier.kl, self.temperature_curve.kl])
        values = np.concatenate([self.frontier.expected_reward, self.temperature_curve.expected_reward,
                                 self.frontier_true_reward])
        margin = 0.05 * (values.max() - values.min())
        self._plane_axes.set_xlim(-0.03 * kls.max(), 1.05 * kls.max())
        self._plane_axes.set_ylim(values.min() - margin, values.max() + margin)

    def _refresh(self, rebuild: bool = False) -> None:
        """Update the bars, dots, tree and tables in place; re-render the picture once."""
        if self._figure is None:  # no widget yet: nothing to draw
            return
        if rebuild or self._bars is None:
            self._rebuild_scenario_artists()
        view = self.response_view()
        for key, column in (("ref", "pi_ref"), ("star", "pi_star"), ("temperature", "pi_temperature")):
            for bar, row in zip(self._bars[key], view.values()):
                bar.set_height(row[column])
                bar.set_visible(key != "temperature" or self.show_temperature)
        readouts = self.readouts()
        self._star_dot.set_data([readouts["kl"]], [readouts["expected_reward"]])
        self._true_dot.set_data([readouts["kl"]], [readouts["true_expected_reward"]])
        self._temperature_dot.set_data([readouts["temperature_kl"]], [readouts["temperature_expected_reward"]])
        self._figure.describe(picture_description(view, readouts, self.show_temperature,
                                                  self.scenario.has_blind_spot))
        self._figure.redraw(full=rebuild)
        tokens = self.token_view()
        self.tree.value = token_tree_svg(self.scenario.model.tokens, self.scenario.model.depth, tokens)
        self.responses_table.value = response_table(view, self.show_temperature,
                                                    self.scenario.has_blind_spot)
        self.readout_panel.value = readout_panel(readouts, self.scenario.has_blind_spot)
        self.spoken.value = html.escape(spoken_summary(view, readouts))


# -- HTML and SVG views ------------------------------------------------------------------------

def _readout(key: str, value: float, digits: int = 3) -> str:
    return f'<span data-readout="{html.escape(key)}">{format_number(value, digits)}</span>'


# The readout table: one column per policy, one row per quantity, so that the three policies
# compare along a row. Each cell is a readouts() key (None: the policy has no such number).
READOUT_COLUMNS = (("pi* at this β", "star"), ("pi_ref at T", "temperature"), ("pi_ref", "ref"))
READOUT_ROWS = (
    ("E[r]", ("expected_reward", "temperature_expected_reward", "reference_expected_reward")),
    ("E[true reward]", ("true_expected_reward", "temperature_true_expected_reward",
                        "reference_true_expected_reward")),
    ("KL from pi_ref", ("kl", "temperature_kl", None)),
    ("J = E[r] − β·KL", ("objective", "temperature_objective", "reference_objective")),
)


def _curve(key: str, text: str) -> str:
    """``text`` after a picture of series ``key``'s curve and dot (its colour, line style and marker)."""
    return f"{swatch(COLORS[key], LINES.get(key, 'solid'), MARKERS[key])} {text}"


def _dot(key: str, text: str) -> str:
    return f"{swatch(COLORS[key])} {text}"


def _bar(key: str, text: str) -> str:
    return f"{swatch(COLORS[key], hatch=bool(HATCHES[key]))} {text}"


def figure_legend(blind_spot: bool) -> str:
    """What the picture's series are (HTML above it: text in the picture would slow every redraw): each named
    in words beside a small picture of its line style, marker or bar hatching, never by colour alone."""
    plane = (f"{_curve('star', 'pi* for every β, ● this β')}; "
             f"{_curve('temperature', 'pi_ref at every T, ■ this T')}; {_dot('ref', '◆ pi_ref')}")
    if blind_spot:
        plane += "; " + _curve("true", "the true reward of pi*, ○ this β (the reward model is wrong on \"cc\")")
    return text_block(f"<b>Left</b>, the responses' probabilities: {_bar('ref', 'pi_ref')} "
                      f"{_bar('star', 'pi*')} {_bar('temperature', 'pi_ref at T')} (when ticked). "
                      f"<b>Right</b>, the reward-KL plane, every policy a point (KL from pi_ref, E[r]): {plane}.")


def picture_description(view: dict, readouts: dict, show_temperature: bool, blind_spot: bool) -> str:
    """The picture in words (its text alternative): every bar's height, and where each dot of the plane is."""
    def probabilities(column: str) -> str:
        return ", ".join(f"{response} {row[column]:.3f}" for response, row in view.items())

    bars = f"pi_ref: {probabilities('pi_ref')}; pi*: {probabilities('pi_star')}"
    if show_temperature:
        bars += f"; pi_ref at T = {readouts['temperature']:.3g}: {probabilities('pi_temperature')}"
    plane = (f"pi* at β = {readouts['beta']:.3g} is at KL {readouts['kl']:.3f}, E[r] "
             f"{readouts['expected_reward']:.3f}; pi_ref at T = {readouts['temperature']:.3g} at KL "
             f"{readouts['temperature_kl']:.3f}, E[r] {readouts['temperature_expected_reward']:.3f}; pi_ref at KL 0, "
             f"E[r] {readouts['reference_expected_reward']:.3f}")
    if blind_spot:
        plane += f"; the true reward of pi* is {readouts['true_expected_reward']:.3f}"
    return (f"Left, bar chart of each response's probability: {bars}. Right, the reward-KL plane: {plane}; "
            f"the curve of pi* for every β rises from pi_ref's point as KL grows.")


def spoken_summary(view: dict, readouts: dict) -> str:
    """One sentence said after every change (the live readout): where pi* is now, and its likeliest response."""
    likeliest = max(view, key=lambda response: view[response]["pi_star"])
    return (f"β = {readouts['beta']:.3g}, T = {readouts['temperature']:.3g}: pi* has E[r] "
            f"{readouts['expected_reward']:.3f} at KL {readouts['kl']:.3f} from pi_ref, J = {readouts['objective']:.3f}; "
            f"its likeliest response is {likeliest} ({view[likeliest]['pi_star']:.3f}).")


def readout_panel(readouts: dict, blind_spot: bool) -> str:
    """The readouts as a compact HTML table (policies as columns); each number in a span with
    ``data-readout="<key>"``. pi_ref's KL from itself is 0 by definition and shown as such."""
    # the policies by name (the legend above the picture pairs each name with its colour and style)
    head = "<tr><th></th>" + "".join(f"<th scope='col' style='text-align:right'>{title}</th>"
                                     for title, _ in READOUT_COLUMNS) + "</tr>"
    rows = []
    for label, keys in READOUT_ROWS:
        if label == "E[true reward]" and not blind_spot:
            continue
        cells = "".join(f"<td style='text-align:right'>{_readout(key, readouts[key]) if key else '0'}</td>"
                        for key in keys)
        rows.append(f"<tr><th scope='row' style='text-align:left; font-weight:normal'>{label}</th>{cells}</tr>")
    rows.append(f"<tr><th scope='row' style='text-align:left; font-weight:normal'>β·log Z (V at the root)</th>"
                f"<td style='text-align:right'>{_readout('beta_log_partition', readouts['beta_log_partition'])}"
                f"</td><td></td><td></td></tr>")
    return (f"<table class='lmpolicy-readouts' style='border-spacing: 10px 1px; {TABLE_STYLE}'>"
            f"{head}{''.join(rows)}</table>")


def response_table(view: dict, show_temperature: bool, blind_spot: bool) -> str:
    """Reward and probabilities per response (pi* with 4 decimals, as in the text's 0.0615)."""
    head = "<tr><th>response</th><th>r</th>" + ("<th>true r</th>" if blind_spot else "")
    head += "<th>pi_ref</th><th>pi*</th>" + ("<th>pi_ref at T</th>" if show_temperature else "") + "</tr>"
    head = head.replace("<th>", "<th scope='col'>")
    rows = []
    for response, row in view.items():
        cells = [f"<th scope='row'>{response}</th>", f"<td>{row['reward']:g}</td>"]
        if blind_spot:
            cells.append(f"<td>{row['true_reward']:g}</td>")
        cells.append(f"<td>{row['pi_ref']:.3f}</td>")
        cells.append(f"<td>{_readout('pi_star_' + response, row['pi_star'], 4)}</td>")
        if show_temperature:
            cells.append(f"<td>{row['pi_temperature']:.4f}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<table class='lmpolicy-responses' style='border-spacing: 7px 1px; text-align:right; {TABLE_STYLE}'>"
            f"{head}{''.join(rows)}</table>")


# Token tree geometry, in pixels. Every edge runs from its parent to an elbow and then straight
# into its child; the last TREE_ELBOW pixels before a child are the child's own strip, where its
# edge label sits above the line and (inner nodes) its name and V below it. No other line enters a
# strip, and strips of neighbouring children are a row apart, so no text crosses a line.
# Sized to sit beside the response table in a laptop's output area (848 px) and, with nine
# responses, still under the controls and the picture on one screen.
TREE_ROW, TREE_COLUMN, TREE_ELBOW, TREE_TOP, TREE_LEFT = 26, 155, 112, 20, 92
TREE_FONT_PX = 12
TREE_EDGE_WIDTH = (0.8, 7.0)  # stroke width = first + second * (probability that pi* reaches the child)


def token_tree_svg(tokens: tuple, depth: int, view: dict) -> str:
    """The token tree as inline SVG: root on the left, one column per token position.

    Each edge is labelled "pi_ref → pi*" for its token (the next-token probabilities after the
    parent) and drawn as thick as the probability that pi* reaches the child at all, so an edge
    below a prefix that pi* never writes stays thin. Each node shows its soft value V (at a full
    response, V is its reward).
    """
    leaves = len(tokens) ** depth
    height = TREE_TOP + leaves * TREE_ROW
    width = TREE_LEFT + depth * TREE_COLUMN + 75  # room for the leaves' "aa r = 0.00"

    def position(prefix: str) -> tuple[float, float]:
        # a node sits in the middle of the rows its subtree's leaves occupy
        span = len(tokens) ** (depth - len(prefix))
        first = 0
        for i, char in enumerate(prefix):
            first += tokens.index(char) * len(tokens) ** (depth - 1 - i)
        return TREE_LEFT + len(prefix) * TREE_COLUMN, TREE_TOP + (first + span / 2) * TREE_ROW - TREE_ROW / 2

    # In the theme's text colour (currentColor), so that the tree reads in the light and the dark theme; pi*'s
    # number is the bold one. Named as one picture, with the whole tree in words (a screen reader would read
    # its labels out of order).
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
             f"aria-label='{html.escape(tree_description(view, depth), quote=True)}' "
             f"font-family='sans-serif' font-size='{TREE_FONT_PX}' fill='currentColor'>"]
    labels = []
    for prefix, node in view.items():
        if not prefix:
            continue
        (x0, y0), (x1, y1) = position(prefix[:-1]), position(prefix)
        stroke = TREE_EDGE_WIDTH[0] + TREE_EDGE_WIDTH[1] * node["pi_star_reach"]
        parts.append(f"<polyline points='{x0},{y0} {x1 - TREE_ELBOW},{y1} {x1},{y1}' fill='none' "
                     f"stroke='currentColor' stroke-opacity='0.4' stroke-width='{stroke:.2f}' "
                     f"stroke-linejoin='round' data-edge-line='{prefix}'/>")
        strip_middle = x1 - TREE_ELBOW / 2 - 4
        labels.append(f"<text x='{strip_middle:.1f}' y='{y1 - 8:.1f}' text-anchor='middle' data-edge='{prefix}'>"
                      f"<tspan>{node['pi_ref']:.2f}</tspan> → "
                      f"<tspan font-weight='bold'>{node['pi_star']:.2f}</tspan></text>")
    for prefix, node in view.items():
        x, y = position(prefix)
        is_leaf = len(prefix) == depth
        # V with three decimals, as the readouts: Exercise 11.9(a) takes V(a) and V(b) off the tree
        value = (f"r = {format_number(node['soft_value'], 2)}" if is_leaf
                 else f"V = {format_number(node['soft_value'], 3)}")
        name = f"<tspan font-weight='bold'>{prefix if prefix else 'start'}</tspan> {value}"
        parts.append(f"<circle cx='{x}' cy='{y}' r='5' fill='currentColor'/>")
        if is_leaf:  # right of the leaf, where no line goes
            labels.append(f"<text x='{x + 9}' y='{y + 4}' data-node='{prefix}'>{name}</text>")
        elif not prefix:  # left of the root
            labels.append(f"<text x='{x - 9}' y='{y + 4}' text-anchor='end' data-node=''>{name}</text>")
        else:  # below the node's own incoming strip
            labels.append(f"<text x='{x - TREE_ELBOW / 2 - 4:.1f}' y='{y + 17}' text-anchor='middle' "
                          f"data-node='{prefix}'>{name}</text>")
    parts.extend(labels)  # text on top of every line and node
    parts.append("</svg>")
    return "".join(parts)


def tree_description(view: dict, depth: int) -> str:
    """The token tree in words (its text alternative): each node's soft value, each edge's pi_ref → pi*."""
    parts = []
    for prefix, node in view.items():
        name = prefix or "start"
        if not prefix:
            parts.append(f"start: V = {format_number(node['soft_value'], 3)}")
            continue
        value = (f"reward {format_number(node['soft_value'], 2)}" if len(prefix) == depth
                 else f"V = {format_number(node['soft_value'], 3)}")
        parts.append(f"{name}: token {prefix[-1]} after {prefix[:-1] or 'start'}, pi_ref {node['pi_ref']:.2f} → pi* "
                     f"{node['pi_star']:.2f}, {value}")
    return "Token tree. " + "; ".join(parts) + "."
