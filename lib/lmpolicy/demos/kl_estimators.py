"""Demo "Three ways to estimate a KL": k1, k2 and k3 from sampled tokens, live.

One position with eight tokens. The reference is fixed (``lmpolicy.exact.scenarios.KL_DEMO_REF_PROBS``);
the policy is the reference sharpened or flattened, pi_theta ∝ pi_ref ** (1 - x), with x in [-1, 1]
(x < 0 sharper, x = 0 equal, x > 0 flatter, x = 1 uniform; ``scenarios.kl_demo_policy``). Each
batch draws N tokens from pi_theta and averages each estimator over them: one estimate of
KL(pi_theta || pi_ref) per estimator. The histograms collect the batch
estimates; the table compares them with the exact values from ``lmpolicy.exact.kl``.

With a student id (``lmpolicy.per_student.variants``) the demo also offers the student's own reference
(``reference="yours"``, Exercise 11.9(d)) beside the chapter's (``reference="chapter"``, the default).

Draws are seeded: ``reset()`` (the Reset button) replays the same batches, and changing x or N
starts again from the seed, so what the demo shows depends only on (x, N, batches drawn). The
batches drawn before such a change belong to the old setting (another KL, or another N), so they
are cleared, and the line under the controls says so (``status()``).

    >>> demo = KLEstimatorDemo(x=0.2, tokens_per_estimate=16)
    >>> demo.draw(200)
    >>> round(demo.readouts()["exact_kl"], 4) == round(demo.moments.kl, 4)
    True
"""
from __future__ import annotations

import html
import math

import numpy as np
from matplotlib.ticker import MaxNLocator

from lmpolicy.demos.accessible import Accessible, Slider
from lmpolicy.demos.base import TABLE_STYLE, WidgetDemo, format_number, spoken_readout, swatch, text_block
from lmpolicy.demos.figure_widget import FigureImage
from lmpolicy.exact.kl import ESTIMATORS, estimator_moments
from lmpolicy.exact.scenarios import KL_DEMO_DEFAULT_X, KL_DEMO_REF_PROBS, kl_demo_policy
from lmpolicy.per_student import variants

TOKENS_PER_ESTIMATE = (1, 4, 16, 64, 256)
FORMULAS = {"k1": "k1 = ℓ", "k2": "k2 = ℓ²/2", "k3": "k3 = e^(−ℓ) − 1 + ℓ"}
COLORS = {"k1": "#1f77b4", "k2": "#ff7f0e", "k3": "#2ca02c"}
# The three curves and the three means differ by line style and marker too, not by colour alone.
LINES = {"k1": "solid", "k2": "dashed", "k3": "dashdot"}
MATPLOTLIB_LINES = {"solid": "-", "dashed": "--", "dashdot": "-."}
MARKERS = {"k1": "o", "k2": "s", "k3": "D"}
HISTOGRAM_BINS = 40
HISTOGRAM_TICKS = 5
HISTOGRAM_HALF_WIDTH = 4.0  # histogram range: exact KL +- this many standard deviations of a batch estimate
BATCHES_PER_PLAY_STEP = 20
PLAY_INTERVAL_MS = 200
PLAY_STEPS = 500  # Play stops after this many steps (10,000 batches)
REFERENCES = {"chapter": "the chapter's", "yours": "yours (11.9(d))"}
PLAY_HELP = (f"▶ Play draws {BATCHES_PER_PLAY_STEP} batches every {PLAY_INTERVAL_MS / 1000:g} s "
             f"until you press ■ Stop")


ACCESSIBLE = Accessible(
    root="lmpolicy-kl-demo", name="KL estimators demo",
    sliders={"lmpolicy-kl-x": Slider("x: how far pi_theta moves from pi_ref (below 0 sharper, above 0 flatter)", "x")},
    groups={"lmpolicy-kl-tokens": "tokens per estimate N", "lmpolicy-kl-reference": "pi_ref"},
    play={"play": f"Play: draw {BATCHES_PER_PLAY_STEP} batches every {PLAY_INTERVAL_MS / 1000:g} s",
          "pause": "Pause", "stop": "Stop", "retweet": "Repeat"},
    live=("lmpolicy-kl-spoken",))


def _check_x(x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise ValueError(f"x must be a number in [-1, 1] (-1: pi_theta much sharper than pi_ref, "
                         f"1: uniform), got {x!r}")
    kl_demo_policy(float(x))  # raises ValueError naming the range
    return float(x)


def _check_reference(reference) -> str:
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {', '.join(map(repr, REFERENCES))}, got {reference!r}")
    if reference == "yours" and variants.kl_demo_reference() is None:
        raise ValueError("reference 'yours' needs a student id: " + variants.SET_ID_HOW)
    return reference


def _check_tokens_per_estimate(n) -> int:
    if isinstance(n, bool) or n not in TOKENS_PER_ESTIMATE:
        raise ValueError(f"tokens_per_estimate must be one of {TOKENS_PER_ESTIMATE}, got {n!r}")
    return int(n)


class KLEstimatorDemo(WidgetDemo):
    """The KL-estimator demo: state, readouts, and (on first use of ``widget``) its controls.

    Parameters
    ----------
    x : float in [-1, 1], default 0.2
        How far pi_theta moves from pi_ref: pi_theta ∝ pi_ref ** (1 - x).
    tokens_per_estimate : one of 1, 4, 16, 64, 256, default 16
        N, the tokens averaged into one batch estimate.
    seed : int, default 0
        Seed of the draws; ``reset()`` and any change of x or N restart from it.
    reference : "chapter" (default, ``KL_DEMO_REF_PROBS``) or "yours": the student's own reference of
        Exercise 11.9(d) (``lmpolicy.per_student.variants``); "yours" needs a student id.

    Controls (after ``widget`` or ``show()``): ``x_slider``, ``tokens_selector``, ``play`` (with
    ``play_label`` beside it), ``draw_button``, ``reset_button``, and with a student id
    ``reference_selector``. Setting their ``value`` (or clicking) updates the demo exactly as in JupyterLab.

    Under nbgrader (validate or grading) it computes nothing: ``show()`` prints one line, and anything
    else raises ``DemoNotAvailableWhileGrading`` (``lmpolicy.demos.base``).
    """

    _ACCESSIBLE = ACCESSIBLE

    def __init__(self, x: float = KL_DEMO_DEFAULT_X, tokens_per_estimate: int = 16, seed: int = 0,
                 reference: str = "chapter") -> None:
        if self._stand_in_under_grader():  # no numbers while grading (lmpolicy.demos.base)
            return
        self.reference = _check_reference(reference)
        self.x = _check_x(x)
        self.tokens_per_estimate = _check_tokens_per_estimate(tokens_per_estimate)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        self.seed = int(seed)
        self._curves_figure = None
        self._histogram_figure = None
        self.cleared = None  # (batches, what changed) the last change of x or N cleared
        self._set_policy()

    # -- state -------------------------------------------------------------------------------

    @property
    def ref_probs(self) -> np.ndarray:
        """The reference shown: the chapter's, or the student's own (``reference="yours"``)."""
        return KL_DEMO_REF_PROBS if self.reference == "chapter" else variants.kl_demo_reference()

    def _set_policy(self) -> None:
        if self.reference == "chapter":
            self.p_theta = kl_demo_policy(self.x)
        else:
            self.p_theta = (np.full(len(self.ref_probs), 1.0 / len(self.ref_probs)) if self.x == 1.0
                            else variants.kl_demo_policy_for(self.ref_probs, self.x))
        self.moments = estimator_moments(self.p_theta, self.ref_probs)
        self.reset()

    def reset(self) -> None:
        """Forget all batches and restart the seeded draws (the next batches repeat the first ones)."""
        self._rng = np.random.default_rng(self.seed)
        self.batch_estimates = {name: np.empty(0) for name in ESTIMATORS}
        self._negative_tokens = {name: 0 for name in ESTIMATORS}
        self.tokens_drawn = 0

    def set(self, *, x: float | None = None, tokens_per_estimate: int | None = None,
            reference: str | None = None) -> None:
        """Change x, N and/or the reference (validated). The batches drawn so far are cleared, and ``status()``
        says how many and why: they estimate another KL (x, reference) or average another number of tokens (N)."""
        batches, changes = self.batches, []
        if reference is not None:
            reference = _check_reference(reference)
            if reference != self.reference:
                changes.append(f"the reference changed to {REFERENCES[reference]}")
            self.reference = reference
        if x is not None:
            x = _check_x(x)
            if x != self.x:
                changes.append(f"x moved from {self.x:.2f} to {x:.2f}")
            self.x = x
        if tokens_per_estimate is not None:
            n = _check_tokens_per_estimate(tokens_per_estimate)
            if n != self.tokens_per_estimate:
                changes.append(f"N changed from {self.tokens_per_estimate} to {n}")
            self.tokens_per_estimate = n
        self._set_policy()
        if batches:
            self.cleared = (batches, " and ".join(changes) or "x and N were set again")
        self._refresh()

    def status(self) -> str:
        """The line under the controls: what the last change of x or N did to the batches drawn."""
        if self.cleared is None:
            return ("Moving x or N clears the batches drawn so far: they belong to the old setting "
                    "(another KL, or another N).")
        batches, change = self.cleared
        cleared = ("the one batch drawn before was cleared (it belongs" if batches == 1 else
                   f"the {batches:,} batches drawn before were cleared (they belong")
        return f"{change}, so {cleared} to the old setting); the histograms start again."

    def draw(self, batches: int = 1) -> None:
        """Draw ``batches`` batches of N tokens from pi_theta and add one estimate per estimator each."""
        if isinstance(batches, bool) or not isinstance(batches, (int, np.integer)) or batches < 1:
            raise ValueError(f"batches must be a whole number >= 1, got {batches!r}")
        n = self.tokens_per_estimate
        tokens = self._rng.choice(len(self.p_theta), size=(int(batches), n), p=self.p_theta)
        for name in ESTIMATORS:
            values = self.moments.values[name][tokens]
            self.batch_estimates[name] = np.concatenate([self.batch_estimates[name], values.mean(axis=1)])
            self._negative_tokens[name] += int(np.count_nonzero(values < 0))
        self.tokens_drawn += tokens.size
        self._refresh()

    @property
    def batches(self) -> int:
        return len(self.batch_estimates["k1"])

    def readouts(self) -> dict:
        """Every number the demo shows, as floats (nan where nothing has been drawn yet).

        ``exact_kl``; per estimator k in k1, k2, k3: ``{k}_mean`` (mean of the batch estimates),
        ``{k}_bias`` (that mean minus the exact KL), ``{k}_std`` (standard deviation of the batch
        estimates), ``{k}_negative_share`` (share of single sampled tokens whose value is < 0),
        ``{k}_below_kl_share`` (share of batch estimates below the exact KL), and the exact
        counterparts ``{k}_exact_mean``, ``{k}_exact_bias``, ``{k}_exact_std`` (of one batch
        estimate: single-token std / sqrt(N)) and ``{k}_exact_negative_share``. Also ``x``, ``alpha``,
        ``tokens_per_estimate`` and ``batches``.
        """
        exact = self.moments
        n = self.tokens_per_estimate
        result = {"x": self.x, "alpha": 1.0 - self.x, "tokens_per_estimate": float(n),
                  "batches": float(self.batches), "exact_kl": exact.kl}
        for name in ESTIMATORS:
            estimates = self.batch_estimates[name]
            drawn = len(estimates) > 0
            result[f"{name}_mean"] = float(estimates.mean()) if drawn else math.nan
            result[f"{name}_bias"] = result[f"{name}_mean"] - exact.kl
            result[f"{name}_std"] = float(estimates.std(ddof=1)) if len(estimates) > 1 else math.nan
            result[f"{name}_negative_share"] = (self._negative_tokens[name] / self.tokens_drawn
                                                if drawn else math.nan)
            result[f"{name}_below_kl_share"] = float(np.mean(estimates < exact.kl)) if drawn else math.nan
            result[f"{name}_exact_mean"] = exact.mean[name]
            result[f"{name}_exact_bias"] = exact.bias[name]
            result[f"{name}_exact_std"] = exact.std[name] / math.sqrt(n)
            result[f"{name}_exact_negative_share"] = exact.negative_share[name]
        return result

    # -- widgets -----------------------------------------------------------------------------

    def _build_widget(self):
        import ipywidgets as w

        self.table = w.HTML()
        self.status_line = w.HTML()
        self.spoken = spoken_readout("lmpolicy-kl-spoken")
        self._build_figure()
        self.x_slider = w.FloatSlider(value=self.x, min=-1.0, max=1.0, step=0.05, readout_format=".2f",
                                      description="x", continuous_update=True,
                                      style={"description_width": "16px"}, layout=w.Layout(width="300px"))
        self.tokens_selector = w.ToggleButtons(options=list(TOKENS_PER_ESTIMATE),
                                               value=self.tokens_per_estimate,
                                               tooltips=[f"{_tokens(n)} per estimate" for n in TOKENS_PER_ESTIMATE],
                                               style={"button_width": "52px"})
        # ipywidgets' Play shows two bare icons (its description is not drawn): the label beside it
        # and its tooltip say what they do
        self.play = w.Play(value=0, min=0, max=PLAY_STEPS, step=1, interval=PLAY_INTERVAL_MS,
                           description="Play", tooltip=PLAY_HELP, show_repeat=False)
        self.play_label = w.Label(PLAY_HELP)
        self.draw_button = w.Button(description="Draw one batch", icon="plus",
                                    tooltip="Draw one more batch of N tokens from pi_theta")
        self.reset_button = w.Button(description="Reset", icon="undo",
                                     tooltip="Forget every batch and restart the seeded draws")
        self.reference_selector = None
        if variants.kl_demo_reference() is not None:  # a student id: the student's own reference beside the chapter's
            self.reference_selector = w.ToggleButtons(options=[(label, key) for key, label in REFERENCES.items()],
                                                      value=self.reference, description="pi_ref",
                                                      style={"button_width": "120px", "description_width": "40px"})
            self.reference_selector.observe(lambda change: self.set(reference=change["new"]), names="value")
            self.reference_selector.add_class("lmpolicy-kl-reference")
        self.x_slider.observe(lambda change: self.set(x=change["new"]), names="value")
        self.tokens_selector.observe(lambda change: self.set(tokens_per_estimate=change["new"]),
                                     names="value")
        self.play.observe(self._on_play, names="value")
        self.draw_button.on_click(lambda _: self.draw(1))
        self.reset_button.on_click(lambda _: self._on_reset())
        for control, name in ((self.x_slider, "x"), (self.tokens_selector, "tokens"),
                              (self.play, "play"), (self.draw_button, "draw"), (self.reset_button, "reset")):
            control.add_class(f"lmpolicy-kl-{name}")
        header = w.HTML(text_block(
            "<b>Three ways to estimate a KL.</b> One position, eight tokens; pi_theta ∝ pi_ref<sup>1−x</sup>: "
            "x &lt; 0 makes pi_theta sharper than pi_ref, x &gt; 0 flatter (x = 1: uniform). Each batch "
            "draws N tokens from pi_theta; its estimate is the mean of k over them."))
        legend = " &nbsp; ".join(f"{swatch(COLORS[name], LINES[name], MARKERS[name])} <b>{FORMULAS[name]}</b> "
                                 f"({LINES[name].replace('dashdot', 'dash-dot')})" for name in ESTIMATORS)
        curves_caption = w.HTML(text_block(
            f"What one sampled token adds, against its log-ratio ℓ = log pi_theta/pi_ref: {legend}. "
            f"Black dots: the eight tokens, sized by how often pi_theta samples them."))
        histograms_caption = w.HTML(text_block(
            "The batch estimates so far (one x-axis for all three, tallest bar scaled to the top). "
            "Black dotted: the exact KL; in each estimator's colour and line style: the mean of its estimates; "
            "a number at an edge counts the estimates beyond it."))
        notes = w.HTML(text_block(
            "<b>The table.</b> (exact …): the value the column tends to as batches accumulate. "
            "Tokens &lt; 0: the share of single sampled tokens whose k is negative. Below exact KL: "
            "the share of batch estimates that fall below the exact KL.", note=True))
        # the controls wrap onto another line rather than run out of a narrow output area
        row = w.Layout(flex_flow="row wrap", align_items="center")
        controls = w.VBox(([self.reference_selector] if self.reference_selector is not None else []) + [
            w.HBox([w.HBox([w.Label("sharper"), self.x_slider, w.Label("flatter")],
                           layout=w.Layout(margin="0 24px 0 0")),
                    w.HBox([w.Label("tokens per estimate N"), self.tokens_selector])], layout=row),
            w.HBox([self.draw_button, self.reset_button, self.play, self.play_label], layout=row),
            self.status_line, self.spoken,
        ])
        self._refresh()
        box = w.VBox([header, controls, curves_caption, self._curves_figure.widget, self._curves_figure.text_widget,
                      histograms_caption, self._histogram_figure.widget, self._histogram_figure.text_widget,
                      self.table, notes])
        box.add_class("lmpolicy-kl-demo")
        box.add_class("lmpolicy-demo")
        return box

    def _on_play(self, change) -> None:
        if change["new"] > change["old"]:  # Play counts up; Reset sets it back to 0
            self.draw(BATCHES_PER_PLAY_STEP)

    def _on_reset(self) -> None:
        self.cleared = None  # the student cleared them: nothing to explain
        if self._widget is not None:
            self.play.playing = False
            self.play.value = 0
        self.reset()
        self._refresh()

    # -- figure ------------------------------------------------------------------------------

    def _build_figure(self) -> None:
        # Two pictures: the curves never change (only the token dots move), the histograms change
        # their x-range with x and N. Only tick labels and the counts of estimates beyond the range
        # are text in them: text is most of Agg's drawing time, so captions and legend live in HTML
        # around the pictures.
        self._curves_figure = FigureImage(width=8.6, height=1.9, name="lmpolicy-kl-curves")
        curves = self._curves_figure.figure.add_axes((0.065, 0.14, 0.925, 0.83))
        ratios = np.linspace(-4.0, 3.0, 300)
        for name in ESTIMATORS:
            values = {"k1": ratios, "k2": 0.5 * ratios ** 2, "k3": np.expm1(-ratios) + ratios}[name]
            curves.plot(ratios, values, color=COLORS[name], linestyle=MATPLOTLIB_LINES[LINES[name]], linewidth=1.8,
                        marker=MARKERS[name], markevery=(ESTIMATORS.index(name) * 10, 30), markersize=5)
        curves.axhline(0.0, color="0.6", linewidth=0.8)
        curves.set_xlim(-4.0, 3.0)
        curves.set_ylim(-2.5, 5.0)
        # the x-axis named in the empty corner (no curve goes there) rather than below: a label
        # below would cost the picture a line of height
        curves.text(2.9, -2.25, r"log-ratio  $\ell = \log\,\pi_\theta / \pi_{\mathrm{ref}}$",
                    ha="right", va="bottom", fontsize=11)
        curves.set_ylabel(r"$k(\ell)$")
        tokens = len(self.p_theta)
        self._token_dots = curves.scatter(np.zeros(tokens), np.zeros(tokens), color="black", zorder=3, clip_on=False)
        self._curves_figure.set_moving([self._token_dots])
        self._histogram_figure = FigureImage(width=8.6, height=1.8, name="lmpolicy-kl-histograms")
        grid = self._histogram_figure.figure.add_gridspec(1, 3, left=0.02, right=0.98, bottom=0.17, top=0.97,
                                                          wspace=0.1)
        # The x-range follows x and N. Matplotlib's tick machinery is most of a full render, so each
        # histogram draws its few tick labels itself; only a new x-range needs a full render.
        self._histograms = {}
        for column, name in enumerate(ESTIMATORS):
            axes = self._histogram_figure.figure.add_subplot(grid[0, column])
            axes.set_xticks([])
            axes.set_yticks([])
            axes.set_ylim(0.0, 1.15)
            axes.text(0.02, 0.97, name, transform=axes.transAxes, va="top", color="black", fontweight="bold")
            along_bottom = axes.get_xaxis_transform()  # x in data units, y in axes units
            edges = np.linspace(0.0, 1.0, HISTOGRAM_BINS + 1)
            self._histograms[name] = {
                "axes": axes,
                "bars": axes.stairs(np.zeros(HISTOGRAM_BINS), edges, fill=True, color=COLORS[name], alpha=0.6),
                "mean_line": axes.axvline(0.0, color=COLORS[name], linestyle=MATPLOTLIB_LINES[LINES[name]],
                                          linewidth=2.0),
                "exact_line": axes.axvline(0.0, color="black", linestyle=":", linewidth=1.4),
                "tick_marks": axes.plot([], [], linestyle="none", marker="|", markersize=7, color="black",
                                        transform=along_bottom, clip_on=False)[0],
                # drawn here, not by matplotlib's tick machinery: that is most of a full render
                "tick_labels": [axes.text(0.0, -0.05, "", transform=along_bottom, ha="center", va="top",
                                          fontsize=9, clip_on=False)
                                for _ in range(HISTOGRAM_TICKS + 2)],
                # how many estimates lie beyond each end of the x-range (they have no bin)
                "beyond": {"below": axes.text(0.02, 0.80, "", transform=axes.transAxes, ha="left", va="top",
                                              fontsize=9, color="black", fontweight="bold"),
                           "above": axes.text(0.98, 0.80, "", transform=axes.transAxes, ha="right", va="top",
                                              fontsize=9, color="black", fontweight="bold")},
            }
        self._histogram_figure.set_moving([artist for parts in self._histograms.values()
                                           for artist in (parts["bars"], parts["mean_line"], parts["exact_line"],
                                                          *parts["beyond"].values())])
        self._histogram_range = None

    def histogram_edges(self) -> np.ndarray:
        """Bin edges shared by the three histograms, so their widths compare at a glance."""
        spread = max(self.moments.std.values()) / math.sqrt(self.tokens_per_estimate)
        low = self.moments.kl - HISTOGRAM_HALF_WIDTH * spread
        high = self.moments.kl + HISTOGRAM_HALF_WIDTH * spread
        if min(self.moments.values["k1"]) >= 0:  # pi_theta = pi_ref: every estimate is 0
            low, high = -0.1, 0.1
        return np.linspace(low, high, HISTOGRAM_BINS + 1)

    def histogram_counts(self) -> dict:
        """Per estimator: ``counts`` of the batch estimates in each bin of ``histogram_edges()``, and
        how many lie ``below`` and ``above`` that range. Those get no bin (piled into the end bins
        they would make a false peak); the figure prints their number at that edge instead.
        """
        edges = self.histogram_edges()
        result = {}
        for name, estimates in self.batch_estimates.items():
            counts, _ = np.histogram(estimates, bins=edges)
            result[name] = {"counts": counts, "below": int(np.count_nonzero(estimates < edges[0])),
                            "above": int(np.count_nonzero(estimates > edges[-1]))}
        return result

    def _refresh(self) -> None:
        """Update the artists and the table in place, then re-render the pictures (moving artists only)."""
        if self._curves_figure is None:  # no widget yet: nothing to draw
            return
        ratios = self.moments.values["k1"]
        self._token_dots.set_offsets(np.column_stack([ratios, np.zeros_like(ratios)]))
        self._token_dots.set_sizes(600.0 * self.p_theta)
        edges = self.histogram_edges()
        # no tick right at an edge: its number would run into the next histogram's
        inner = (edges[0] + 0.04 * (edges[-1] - edges[0]), edges[-1] - 0.04 * (edges[-1] - edges[0]))
        ticks = [t for t in MaxNLocator(HISTOGRAM_TICKS).tick_values(edges[0], edges[-1]) if inner[0] <= t <= inner[1]]
        readouts = self.readouts()
        histograms = self.histogram_counts()
        for name, parts in self._histograms.items():
            counts = histograms[name]["counts"]
            parts["bars"].set_data(counts / max(counts.max(), 1), edges)  # tallest bar at 1: fixed y-axis
            for side, arrow in (("below", "← {:,} beyond"), ("above", "{:,} beyond →")):
                beyond = histograms[name][side]
                parts["beyond"][side].set_text(arrow.format(beyond))
                parts["beyond"][side].set_visible(beyond > 0)
            parts["axes"].set_xlim(edges[0], edges[-1])
            parts["exact_line"].set_xdata([self.moments.kl])
            mean = readouts[f"{name}_mean"]
            parts["mean_line"].set_xdata([mean if math.isfinite(mean) else self.moments.kl])
            parts["mean_line"].set_visible(math.isfinite(mean))
            parts["tick_marks"].set_data(ticks, np.zeros(len(ticks)))
            for index, label in enumerate(parts["tick_labels"]):
                label.set_visible(index < len(ticks))
                if index < len(ticks):
                    label.set_x(ticks[index])
                    label.set_text(f"{round(ticks[index], 10):g}")
        self._curves_figure.describe(curves_description(ratios, self.p_theta))
        self._curves_figure.redraw()
        self._histogram_figure.describe(histograms_description(readouts, histograms))
        self._histogram_figure.redraw(full=(edges[0], edges[-1]) != self._histogram_range)
        self._histogram_range = (edges[0], edges[-1])
        self.table.value = readout_table(readouts)
        # a clearing stands out by its sign and weight (in the theme's text colour, legible in either theme)
        weight, sign = ("bold", "⚠ ") if self.cleared else ("normal", "")
        self.status_line.value = text_block(f"<span class='lmpolicy-kl-status' style='font-weight:{weight}'>"
                                            f"{sign}{html.escape(self.status())}</span>")
        self.spoken.value = html.escape(spoken_summary(readouts))


def _tokens(n: int) -> str:
    return f"{n} token" if n == 1 else f"{n} tokens"


def _number(readouts: dict, key: str, digits: int = 3, percent: bool = False) -> str:
    value = readouts[key]
    if not math.isfinite(value):
        text = "–"
    elif percent:
        text = f"{format_number(100 * value, 1)}%"
    else:
        text = format_number(value, digits, signed=key.endswith("bias"))
    return f'<span data-readout="{html.escape(key)}">{text}</span>'


def readout_table(readouts: dict) -> str:
    """The demo's table as HTML; every number sits in a span with ``data-readout="<key>"``. Each
    column that has an exact value shows it in brackets after the sampled one."""
    head = ("<tr><th></th><th>mean of estimates</th><th>bias <small>(exact)</small></th>"
            "<th>std. dev. <small>(exact)</small></th><th>tokens &lt; 0 <small>(exact)</small></th>"
            "<th>below exact KL</th></tr>").replace("<th>", "<th scope='col'>")

    def with_exact(name: str, measure: str, **options) -> str:
        return (f"{_number(readouts, f'{name}_{measure}', **options)} "
                f"<small>({_number(readouts, f'{name}_exact_{measure}', **options)})</small>")

    rows = []
    for name in ESTIMATORS:
        rows.append(
            f"<tr><th scope='row' style='text-align:left'>{FORMULAS[name]}</th>"
            f"<td>{_number(readouts, f'{name}_mean', 4)}</td>"
            f"<td>{with_exact(name, 'bias', digits=4)}</td>"
            f"<td>{with_exact(name, 'std', digits=4)}</td>"
            f"<td>{with_exact(name, 'negative_share', percent=True)}</td>"
            f"<td>{_number(readouts, f'{name}_below_kl_share', percent=True)}</td></tr>")
    summary = (f"exact KL(pi_theta ‖ pi_ref) = {_number(readouts, 'exact_kl', 4)} nats · "
               f"N = {_tokens(int(readouts['tokens_per_estimate']))} per estimate · "
               f'batches drawn: <span data-readout="batches">{int(readouts["batches"])}</span>')
    return (f"{text_block(summary)}<table class='lmpolicy-readouts' "
            f"style='border-spacing: 12px 1px; text-align: right; {TABLE_STYLE}'>{head}{''.join(rows)}</table>")


def curves_description(ratios: np.ndarray, p_theta: np.ndarray) -> str:
    """The curves picture in words (its text alternative): the three curves, and where the tokens sit."""
    tokens = ", ".join(f"ℓ = {ratio:.2f} (pi_theta {p:.3f})" for ratio, p in zip(ratios, p_theta))
    curves = "; ".join(f"{FORMULAS[name]} ({LINES[name].replace('dashdot', 'dash-dot')} line)" for name in ESTIMATORS)
    return (f"Curves of what one sampled token adds against its log-ratio ℓ: {curves}; k2 and k3 are never "
            f"negative, k1 is below 0 wherever ℓ is. The eight tokens sit on the axis at {tokens}.")


def histograms_description(readouts: dict, histograms: dict) -> str:
    """The histograms in words (their text alternative): per estimator, how many estimates, their mean and spread."""
    batches = int(readouts["batches"])
    exact = f"the exact KL, {readouts['exact_kl']:.4f}, is the dotted line"
    if batches == 0:
        return f"Three histograms of batch estimates, k1, k2 and k3, empty: no batch drawn yet; {exact}."
    parts = []
    for name in ESTIMATORS:
        beyond = histograms[name]["below"] + histograms[name]["above"]
        spread = (f", standard deviation {readouts[f'{name}_std']:.4f}" if math.isfinite(readouts[f"{name}_std"])
                  else "")
        parts.append(f"{name}: mean {readouts[f'{name}_mean']:.4f}{spread}"
                     + (f", {beyond:,} outside the range shown" if beyond else ""))
    return (f"Three histograms of {batches:,} batch estimates of N = {_tokens(int(readouts['tokens_per_estimate']))} "
            f"each; {exact}. " + "; ".join(parts) + ".")


def spoken_summary(readouts: dict) -> str:
    """One sentence said after every change (the live readout)."""
    batches = int(readouts["batches"])
    head = (f"x = {readouts['x']:.2f}, N = {_tokens(int(readouts['tokens_per_estimate']))}, "
            f"{batches:,} batch{'es' if batches != 1 else ''}: exact KL {readouts['exact_kl']:.4f}")
    if batches == 0:
        return head + "; no estimate yet."
    means = ", ".join(f"{name} {readouts[f'{name}_mean']:.4f}" for name in ESTIMATORS)
    return f"{head}; mean estimates {means}."
