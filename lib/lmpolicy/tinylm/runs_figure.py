"""Notebook 08's figure of fine-tuning runs, with its text alternative: ``plot_runs(histories, budget)``.

Three panels against the answers a run has seen (sampled answers, or worked examples for SFT): the held-out
accuracy, greedy and sampled; the KL from the reference; and the reward-KL plane (expected sampled accuracy
against KL), where a large marker shows where each run ends. Runs differ by marker shape as well as colour
(an Okabe-Ito colour each, told apart under the common colour-blindnesses), so no run is known by its colour
alone; greedy accuracy is a solid line of filled markers, sampled accuracy a dashed one of hollow markers.

``describe_runs`` says the same in words, from the histories drawn: which marker is which run, where every run
starts and where it ends (greedy and sampled accuracy, KL, answers seen), and the targets. ``plot_runs`` shows
the figure with those words as its text alternative (``lmpolicy.notebook.figure``).
"""
from __future__ import annotations

from typing import Sequence

from lmpolicy.notebook.figure import show
from lmpolicy.tinylm.runs import Budget, History

# (marker, its name in words, colour): one per run, in the order the runs are given
RUN_STYLES = (("o", "circles", "#0072B2"), ("s", "squares", "#E69F00"), ("^", "triangles", "#009E73"),
              ("D", "diamonds", "#D55E00"), ("v", "down triangles", "#CC79A7"), ("P", "plus signs", "#56B4E9"))


def run_style(i: int) -> tuple[str, str, str]:
    return RUN_STYLES[i % len(RUN_STYLES)]


def _point(h: History, i: int) -> str:
    return f"greedy {h.greedy[i]:.3f}, sampled {h.sampled[i]:.3f}, KL {h.kl[i]:.3f} nats"


def describe_runs(histories: Sequence[History], budget: Budget) -> str:
    """The figure in words: what each panel shows, which marker is which run, where each run starts and ends."""
    n = len(histories)
    words = [f"Three panels of {n} fine-tuning run{'s' if n != 1 else ''} against the answers seen: held-out "
             "accuracy (greedy solid with filled markers, sampled dashed with hollow markers; grey lines at the "
             f"targets, greedy {budget.target_greedy:.2f} and sampled {budget.target_sampled:.2f}), the KL from "
             "the reference in nats per answer, and the reward-KL plane, expected sampled accuracy against KL, a "
             "large marker where each run ends."]
    starts = {_point(h, 0) for h in histories}
    shared_start = len(starts) == 1
    if shared_start:
        words.append(f"Every run starts at {next(iter(starts))}.")
    for i, h in enumerate(histories):
        start = "" if shared_start else f" starts at {_point(h, 0)} and"
        words.append(f"{h.label or f'run {i + 1}'} ({run_style(i)[1]}){start} ends after {h.answers[-1]:,} "
                     f"answers at {_point(h, -1)}.")
    return " ".join(words)


def draw_runs(histories: Sequence[History], budget: Budget):
    """The three panels (a pyplot figure, not shown)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 3, figsize=(10, 3.6))
    for i, h in enumerate(histories):
        marker, _, color = run_style(i)
        style = dict(color=color, marker=marker, markersize=5, label=h.label)
        thousands = np.array(h.answers) / 1000
        axes[0].plot(thousands, h.greedy, **style)
        axes[0].plot(thousands, h.sampled, **{**style, "label": None}, linestyle="--", markerfacecolor="white")
        axes[1].plot(thousands, h.kl, **style)
        axes[2].plot(h.kl, h.sampled, **style)
        axes[2].plot(h.kl[-1], h.sampled[-1], marker=marker, markersize=10, color=color, markeredgecolor="black")
    axes[0].set(xlabel="answers seen (thousands)", ylabel="held-out accuracy",
                title="greedy (solid), sampled (dashed)")
    axes[1].set(xlabel="answers seen (thousands)", ylabel="nats per answer",
                title=r"KL($\pi_\theta \| \pi_\mathrm{ref}$)")
    axes[2].set(xlabel="KL, nats per answer", ylabel="expected sampled accuracy", title="reward-KL plane (large: end)")
    axes[0].axhline(budget.target_greedy, color="grey", linewidth=0.5)  # the runs' targets
    axes[0].axhline(budget.target_sampled, color="grey", linewidth=0.5, linestyle="--")
    axes[2].axhline(budget.target_sampled, color="grey", linewidth=0.5)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=min(4, len(histories)), frameon=False)
    fig.tight_layout(rect=(0, 0.1 if len(histories) > 1 else 0.06, 1, 1))
    return fig


def plot_runs(histories: Sequence[History], budget: Budget) -> None:
    """Show the runs' figure in the notebook, its text alternative saying where each run ends; the grey lines are
    ``budget``'s targets."""
    show(draw_runs(histories, budget), describe_runs(histories, budget))
