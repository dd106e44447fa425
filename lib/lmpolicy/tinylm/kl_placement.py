"""Where the KL goes: the same REINFORCE run on TinyLM with the leash in five places.

The objective is always ``E[r(x, y)] - beta * KL(pi || pi_ref)``. What differs is how the KL term
reaches the gradient. With ``l_t = log pi(y_t | s_t) - log pi_ref(y_t | s_t)`` per answer token and the
three estimators ``k1 = l``, ``k2 = l^2 / 2`` and ``k3 = exp(-l) - 1 + l``:

* **in the reward** (``k1-reward``, ``k3-reward``): the answer's reward becomes ``r - beta * sum_t k_t``,
  a number with no gradient, and the score-function machinery does the rest. With k1 the expected
  gradient is exactly the reverse KL's; with k3 it is ``grad KL(pi||pi_ref) - grad KL(pi_ref||pi)``: the
  two cancel to second order near pi_ref and what is left pushes the *forward* KL up;
* **in the loss** (``k1-loss``, ``k2-loss``, ``k3-loss``): the reward stays the verifier's, and
  ``beta * mean_i sum_t k_t`` is added to the loss and differentiated. At one position, over
  ``y_t ~ pi``: ``E[grad k1] = 0`` (no leash at all), ``E[grad k2] = grad KL(pi||pi_ref)`` (the right
  one), ``E[grad k3] = grad KL(pi_ref||pi)`` (GRPO's choice: the forward KL).

For the comparison to be fair the loop differs from notebook 08's recipe in three defaults, each of which
would otherwise treat the placements differently (see :class:`KLPlacementSettings`): advantages are not
divided by their standard deviation (that would rescale beta in the reward but not in the loss), no prompt
is dropped for having uniform rewards (that would drop the KL's signal in the reward but keep it in the
loss), and there is one gradient step per batch (on-policy, as in the estimators' derivations).

Everything else is :func:`lmpolicy.tinylm.reinforce.train` itself, which every run calls: prompt choice,
sampling, the verifier, the leave-one-out baseline, the distinct-answers and shared-prompt speed-ups, the
update step, and :class:`lmpolicy.tinylm.runs.Run`, which measures the exact KL and the exact expected
reward on the held-out problems. ``python -m lmpolicy.tinylm.kl_placement --out-dir figures`` runs every placement and writes
the notebook's figures.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch

from lmpolicy.tinylm import reinforce
from lmpolicy.tinylm.logprobs import sequence_logprob
from lmpolicy.tinylm.model import TinyLM
from lmpolicy.tinylm.reinforce import Recipe
from lmpolicy.tinylm.runs import History, RunResult

PLACEMENTS = ("k1-reward", "k1-loss", "k2-loss", "k3-loss", "k3-reward")
"""Every placement: estimator, then where it goes."""


# ---------------------------------------------------------------------------------------------------
# The estimators and the two places
# ---------------------------------------------------------------------------------------------------

def kl_estimate(token_logprobs: torch.Tensor, ref_token_logprobs: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token k1, k2 or k3 of ``KL(pi || pi_ref)`` from the sampled tokens' log-probs; same shape, gradient kept."""
    log_ratio = token_logprobs - ref_token_logprobs
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return log_ratio ** 2 / 2
    if estimator == "k3":
        return torch.expm1(-log_ratio) + log_ratio  # exp(-l) - 1 + l, with expm1 for small l
    raise ValueError(f"estimator must be 'k1', 'k2' or 'k3', got {estimator!r}")


def parse_placement(placement: str) -> tuple[str, str]:
    """``"k3-loss"`` -> ``("k3", "loss")``, with an error naming the valid placements otherwise."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}; got {placement!r}")
    estimator, where = placement.split("-")
    return estimator, where


def kl_in_reward(estimator: str):
    """The ``kl_penalized_rewards`` piece of :func:`reinforce_advantages` for one estimator:
    ``r - beta * sum_t k_t`` per answer, with no gradient (the penalty is part of the reward)."""
    def penalized(rewards, token_logprobs, ref_token_logprobs, mask, beta):
        k = kl_estimate(token_logprobs.detach(), ref_token_logprobs.detach(), estimator)
        return rewards - beta * sequence_logprob(k, mask)
    return penalized


def no_kl_in_reward(rewards, token_logprobs, ref_token_logprobs, mask, beta):
    """The reward is the verifier's alone (the KL is in the loss instead)."""
    return rewards


def kl_loss_term(token_logprobs, ref_token_logprobs, mask, weights, estimator: str) -> torch.Tensor:
    """``mean_i w_i sum_t k_t``: the per-answer KL estimate, summed over its tokens and averaged over the rows
    with the same row weights as the policy-gradient loss (``weights`` = how many sampled answers each
    distinct row stands for, scaled so that their mean is 1 over all answers). Differentiated."""
    per_answer = sequence_logprob(kl_estimate(token_logprobs, ref_token_logprobs, estimator), mask)
    return (weights * per_answer).mean()


# ---------------------------------------------------------------------------------------------------
# The settings and one run
# ---------------------------------------------------------------------------------------------------

@dataclass
class KLPlacementSettings(Recipe):
    """The experiment: notebook 08's REINFORCE, fair to every placement, with a leash strong enough to matter.

    beta is 50 times notebook 08's 0.02. Without a leash these runs move the policy about 0.4 nats from
    the reference in 200 updates, so at 0.02 the penalty is worth under 0.01 of reward and every placement
    traces nearly the same curve. At beta = 1 an unbiased leash holds the KL near 0.1 while the reward still
    climbs, and the placements whose gradients point elsewhere show it within the run: k1 in the loss (no
    leash in expectation) drifts like beta = 0, and k3 in the reward, pushed away from the reference,
    runs away: its KL passes a nat and its reward falls below the checkpoint's. At 0.3 to 0.5 k3 in the
    reward drifts more slowly.
    """

    max_updates: int = 200
    eval_every_updates: int = 25
    stop_at_target: bool = False  # every run the same length: the point is where the KL ends, not accuracy
    heldout_measured: int = 300  # exact expected reward and exact KL on these many held-out problems
    prompts_per_update: int = 128
    samples_per_prompt: int = 4
    lr: float = 3e-4
    beta: float = 1.0
    normalize_advantages: bool = False  # dividing by std(A) would rescale beta in the reward, not in the loss
    skip_uniform_prompts: bool = False  # dropping them would drop the KL's signal in the reward, not in the loss
    prioritize_prompts: bool = False  # the objective's prompts are the training problems, uniformly
    epochs_per_batch: int = 1  # on-policy: the estimators' expected gradients assume y ~ pi
    placements: tuple[str, ...] = PLACEMENTS  # which placements to run (the same seed for each)
    out_dir: str = "kl_placement_figures"  # where the command line writes the figures and the numbers

    def __post_init__(self):
        super().__post_init__()
        if self.method != "reinforce":
            raise ValueError("the KL placements are a REINFORCE experiment: method must be 'reinforce'")
        for placement in self.placements:
            parse_placement(placement)


def train_with_placement(settings: KLPlacementSettings, placement: str, model: TinyLM | None = None,
                         progress: bool = True) -> RunResult:
    """One run from ``model`` (default: the shipped checkpoint) with the KL in ``placement``.

    It is :func:`lmpolicy.tinylm.reinforce.train` itself, with the KL either in the reward (its
    ``kl_penalized_rewards`` piece) or, with the reward left the verifier's, as a differentiated term of
    the loss (its ``kl_loss_term``).
    """
    estimator, where = parse_placement(placement)
    if where == "reward":
        return reinforce.train(settings, model, kl_penalized_rewards=kl_in_reward(estimator), label=placement,
                               progress=progress)
    return reinforce.train(settings, model, kl_penalized_rewards=no_kl_in_reward,
                           kl_loss_term=partial(kl_loss_term, estimator=estimator), label=placement, progress=progress)


def run_placements(settings: KLPlacementSettings | None = None, model: TinyLM | None = None,
                   progress: bool = True) -> dict[str, History]:
    """Every placement in ``settings.placements``, each from the same start with the same seed."""
    settings = settings or KLPlacementSettings()
    return {p: train_with_placement(settings, p, model, progress).history for p in settings.placements}


def quick_settings(**changes) -> KLPlacementSettings:
    """A much shorter run of the same experiment, for tests and the notebook's quick mode."""
    quick = dict(max_updates=4, eval_every_updates=2, heldout_measured=40, prompts_per_update=16)
    return KLPlacementSettings(**{**quick, **changes})


# ---------------------------------------------------------------------------------------------------
# The figures
# ---------------------------------------------------------------------------------------------------

COLORS = {"k1-reward": "tab:blue", "k1-loss": "tab:gray", "k2-loss": "tab:green", "k3-loss": "tab:orange",
          "k3-reward": "tab:red"}
# each placement's marker and its name in words, so that no figure tells them apart by colour alone; k2 in the loss
# has k1 in the reward's expected gradient, and its line (dashed, hollow markers) lies on that one
MARKERS = {"k1-reward": ("o", "circles"), "k1-loss": ("x", "crosses"), "k2-loss": ("o", "hollow circles, dashed"),
           "k3-loss": ("s", "squares"), "k3-reward": ("^", "triangles")}


def line_style(placement: str) -> dict:
    """How ``placement`` is drawn in every figure: its colour, its marker, and for k2-loss a dashed line."""
    hollow = placement == "k2-loss"
    return dict(color=COLORS[placement], marker=MARKERS[placement][0], linestyle="--" if hollow else "-",
                markerfacecolor="white" if hollow else COLORS[placement], label=placement)


KL_TICKS = (0, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50)


def kl_axis(ax, which: str, largest: float) -> None:
    """Make ``ax``'s ``which`` ("x" or "y") axis show a tight leash (hundredths of a nat) and a collapse (nats)
    on one plot: linear up to 0.1 nats, logarithmic above, every tick labelled (symlog labels only decades)."""
    from matplotlib.ticker import NullLocator

    top = max(largest, 0.1)
    ticks = [t for t in KL_TICKS if t <= top * 1.5]
    getattr(ax, f"set_{which}scale")("symlog", linthresh=0.1, linscale=2)
    getattr(ax, f"set_{which}ticks")(ticks, labels=[f"{t:g}" for t in ticks])
    getattr(ax, f"{which}axis").set_minor_locator(NullLocator())
    getattr(ax, f"set_{which}lim")(0, top * 1.3)


def plot_over_updates(histories: dict[str, History], beta: float):
    """Left: the exact expected verifier reward (held-out, T = 1) over updates; right: the exact KL."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for placement, h in histories.items():
        left.plot(h.updates, h.sampled, markersize=4, **line_style(placement))
        right.plot(h.updates, h.kl, markersize=4, **line_style(placement))
    left.set(xlabel="update", ylabel="expected verifier reward (held-out)", title=f"reward, beta = {beta:g}")
    right.set(xlabel="update", ylabel="KL(pi || pi_ref) per answer (nats)", title="exact KL from the reference")
    kl_axis(right, "y", max(max(h.kl) for h in histories.values()))
    left.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_reward_kl_plane(histories: dict[str, History], beta: float):
    """Each run as a path on the reward-KL plane, from the checkpoint (the shared start) to its last update."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for placement, h in histories.items():
        ax.plot(h.kl, h.sampled, markersize=4, **line_style(placement))
        end = {**line_style(placement), "label": None, "linestyle": "none"}
        ax.plot(h.kl[-1], h.sampled[-1], markersize=10, **end)  # where it ends: its marker, large
    first = next(iter(histories.values()))
    ax.plot(first.kl[0], first.sampled[0], marker="*", markersize=12, color="black", label="checkpoint")
    ax.set(xlabel="KL(pi || pi_ref) per answer (nats)", ylabel="expected verifier reward (held-out)",
           title=f"the reward-KL plane, beta = {beta:g}")
    kl_axis(ax, "x", max(max(h.kl) for h in histories.values()))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def final_table(histories: dict[str, History], beta: float) -> str:
    """One line per run: where it ended, and its regularized objective ``reward - beta * KL``."""
    lines = [f"{'placement':<10} {'reward':>7} {'KL':>7} {'reward - beta KL':>17} {'greedy':>7}"]
    for placement, h in histories.items():
        lines.append(f"{placement:<10} {h.sampled[-1]:7.3f} {h.kl[-1]:7.3f} "
                     f"{h.sampled[-1] - beta * h.kl[-1]:17.3f} {h.greedy[-1]:7.3f}")
    return "\n".join(lines)


def write_figures(histories: dict[str, History], settings: KLPlacementSettings, out_dir: str | Path) -> list[Path]:
    """The two figures as PNG, and every run's history as JSON, into ``out_dir``; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "reward_and_kl_over_updates.png", out / "reward_kl_plane.png", out / "histories.json"]
    for path, fig in zip(paths, (plot_over_updates(histories, settings.beta),
                                 plot_reward_kl_plane(histories, settings.beta))):
        fig.savefig(path, dpi=120)
        plt.close(fig)
    numbers = {"settings": asdict(settings), "runs": {p: h.as_dict() for p, h in histories.items()}}
    paths[2].write_text(json.dumps(numbers, indent=1))
    return paths


def main(argv: list[str] | None = None) -> dict[str, History]:
    """``python -m lmpolicy.tinylm.kl_placement --beta 1 --out-dir figures``: every setting is a flag."""
    import tyro

    settings = tyro.cli(KLPlacementSettings, args=argv,
                        description="Where the KL goes: REINFORCE on TinyLM with the KL in each place")
    print(settings)
    histories = run_placements(settings)
    print(final_table(histories, settings.beta))
    for path in write_figures(histories, settings, settings.out_dir):
        print("wrote", path)
    return histories


if __name__ == "__main__":
    main()
