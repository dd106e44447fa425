"""How long does REINFORCE take to make TinyLM good, next to SFT on the true answers? One run of each per seed.

    python bench/bench_reinforce.py [--threads 1] [--max-updates N] [--seed 0] [--seeds 3] [--plain]

From the shipped checkpoint, trains until the held-out targets of ``lmpolicy.tinylm.runs.Budget`` are reached
(a greedy and an expected sampled accuracy), measured on the 1,000 held-out problems every
``eval_every_updates`` updates of each recipe, or for at most its ``max_updates`` (``--max-updates`` sets both):

* REINFORCE with the library's recipe (``lmpolicy.tinylm.reinforce.Recipe()``: k1 leash, leave-one-out
  baseline, prompts drawn by how often they were wrong, 4 clipped steps per batch, the library's
  reference pieces);
* SFT on fresh worked examples with their true answers (``lmpolicy.tinylm.sft.SFTRecipe()``);
* with ``--plain``, also a plain recipe (32 prompts x 8 answers, Adam 3e-4, one step
  per batch), which needs several minutes.

Prints, for each, the training time to target (wall clock and CPU time; the time spent measuring is
not counted; the updates to target are the same on every machine, the seconds are not), the updates and
answers it took, the final KL from the reference, and the ratio
REINFORCE / SFT, measured side by side for each seed, and REINFORCE's median time against the goal
(<= 60 s of wall time). The machine is shared: the load
average is printed before and after, and CPU time is the figure that does not depend on it.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics

from bench_exact import cpu_model  # bench/ is on sys.path when run as a script
from lmpolicy.tinylm import reinforce, runs, sft
from lmpolicy.tinylm.model import load_pretrained

GOAL_SECONDS = 60.0


def describe(h: runs.History) -> str:
    if h.seconds_to_target is None:
        return (f"{h.label:34} not reached in {h.updates[-1]} updates, {h.seconds[-1]:.0f} s wall, "
                f"{h.cpu_seconds[-1]:.0f} s CPU, {h.answers_sampled:,} answers; end: greedy {h.greedy[-1]:.3f}, "
                f"sampled {h.sampled[-1]:.3f}, KL {h.kl[-1]:.3f}")
    i = h.updates.index(h.updates_to_target)
    return (f"{h.label:34} {h.seconds_to_target:8.1f} {h.cpu_seconds_to_target:8.1f} {h.updates_to_target:8d} "
            f"{h.answers_sampled:>10,} {h.greedy[i]:7.3f} {h.sampled[i]:8.3f} {h.kl[i]:6.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=reinforce.Recipe().threads, help="torch threads for both runs")
    parser.add_argument("--max-updates", type=int, help="give up after this many updates (default: each recipe's own)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds (seed, seed + 1, ...), each a pair of runs")
    parser.add_argument("--plain", action="store_true", help="also run the plain recipe (minutes)")
    args = parser.parse_args()

    print(f"{os.cpu_count()} CPUs ({cpu_model()}), torch threads {args.threads}, "
          f"load average {os.getloadavg()[0]:.1f} before")
    start = load_pretrained()
    print(f"REINFORCE recipe: {reinforce.Recipe()}")
    histories, reinforce_runs, ratios = [], [], []  # ratios: (seed, wall, CPU) where both runs reached the target
    for seed in range(args.seed, args.seed + args.seeds):
        budget = dict(threads=args.threads, seed=seed) | ({} if args.max_updates is None else
                                                          dict(max_updates=args.max_updates))
        recipe = dataclasses.replace(reinforce.Recipe(), **budget)
        rl = reinforce.train(recipe, start, label=f"REINFORCE (beta {recipe.beta}), seed {seed}", progress=False).history
        supervised = sft.train(dataclasses.replace(sft.SFTRecipe(), **budget), start,
                               label=f"SFT on true answers, seed {seed}", progress=False).history
        histories += [rl, supervised]
        reinforce_runs.append(rl)
        if rl.seconds_to_target is not None and supervised.seconds_to_target is not None:
            ratios.append((seed, rl.seconds_to_target / supervised.seconds_to_target,
                           rl.cpu_seconds_to_target / supervised.cpu_seconds_to_target))
        if args.plain:
            histories.append(reinforce.train(dataclasses.replace(reinforce.PLAIN_RECIPE, **budget), start,
                                        label=f"REINFORCE, plain recipe, seed {seed}", progress=False).history)

    print(f"\n{'run':34} {'wall s':>8} {'CPU s':>8} {'updates':>8} {'answers':>10} {'greedy':>7} {'sampled':>8} "
          f"{'KL':>6}   (at the first measurement on target)")
    for h in histories:
        print(describe(h))
    times = sorted(h.seconds_to_target for h in reinforce_runs if h.seconds_to_target is not None)
    print(f"\nREINFORCE reached the target in {len(times)} of {len(reinforce_runs)} runs; goal {GOAL_SECONDS:.0f} s wall")
    if times:
        print(f"REINFORCE time to target: median {statistics.median(times):.1f} s wall, max {times[-1]:.1f} s "
              f"(median / goal {statistics.median(times) / GOAL_SECONDS:.2f})")
    for seed, wall, cpu in ratios:
        print(f"REINFORCE / SFT on true answers, seed {seed}: {wall:.2f} (wall), {cpu:.2f} (CPU)")
    if ratios:
        print(f"median ratio REINFORCE / SFT: {statistics.median(wall for _, wall, _ in ratios):.2f} (wall)")
    print(f"measuring took {sum(h.eval_seconds for h in histories):.0f} s in all (not counted); "
          f"load average {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
