"""How long does each run of the KL-placement experiment take? The notebook's five runs, side by side.

    python bench/bench_kl_placement.py [--max-updates N] [--quick]

Runs every placement of ``lmpolicy.tinylm.kl_placement.KLPlacementSettings()`` (the notebook's full run;
``--quick`` for the notebook's quick mode) from the shipped checkpoint, one torch thread, and prints for each
the training time (wall clock and CPU; measuring excluded), the measuring time, the whole run's wall time,
and its ratio to the k1-in-the-reward run. The total is set against the notebook's budget (all five runs
in at most 5 minutes on 2 cores, training and measuring included). The updates and the numbers are the same
on every machine; the seconds are not: the load average is printed before and after, and CPU time is the
figure that does not depend on it.
"""
from __future__ import annotations

import argparse
import dataclasses
import os

from bench_exact import cpu_model  # bench/ is on sys.path when run as a script
from lmpolicy.tinylm.kl_placement import KLPlacementSettings, final_table, quick_settings, train_with_placement
from lmpolicy.tinylm.model import load_pretrained

NOTEBOOK_BUDGET_SECONDS = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-updates", type=int, help="updates per run (default: the settings' own)")
    parser.add_argument("--quick", action="store_true", help="the notebook's quick mode instead of the full run")
    args = parser.parse_args()
    settings = quick_settings() if args.quick else KLPlacementSettings()
    if args.max_updates:
        settings = dataclasses.replace(settings, max_updates=args.max_updates)

    print(f"{os.cpu_count()} CPUs ({cpu_model()}), torch threads {settings.threads}, "
          f"load average {os.getloadavg()[0]:.1f} before")
    print(settings)
    start = load_pretrained()
    histories, total = {}, 0.0
    print(f"{'placement':<10} {'train s':>8} {'CPU s':>8} {'measure s':>10} {'whole s':>8} {'/ k1-reward':>12}")
    for placement in settings.placements:
        h = train_with_placement(settings, placement, start, progress=False).history
        histories[placement] = h
        total += h.wall_seconds
        first = next(iter(histories.values())).wall_seconds
        print(f"{placement:<10} {h.seconds[-1]:8.1f} {h.cpu_seconds[-1]:8.1f} {h.eval_seconds:10.1f} "
              f"{h.wall_seconds:8.1f} {h.wall_seconds / first:12.2f}")
    print(f"all {len(histories)} runs: {total:.1f} s wall against the notebook's budget of "
          f"{NOTEBOOK_BUDGET_SECONDS:.0f} s ({total / NOTEBOOK_BUDGET_SECONDS:.2f} of it); "
          f"load average {os.getloadavg()[0]:.1f} after")
    print(final_table(histories, settings.beta))


if __name__ == "__main__":
    main()
