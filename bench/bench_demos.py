"""How fast do the two demos answer a control? Median wall time per update, against a 100 ms goal.

    python bench/bench_demos.py [--repeats 30]

Each case sets a control's ``value`` exactly as the browser does and times the whole callback:
the exact solvers, the in-place artist updates, the Agg render to PNG and the HTML readouts (the
network hop to the browser is not included). The slider moves sweep the slider's own grid.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time

import numpy as np

from bench_exact import cpu_model  # bench/ is on sys.path when this script runs
from lmpolicy.demos.kl_estimators import KLEstimatorDemo
from lmpolicy.demos.tilting import TiltingDemo

GOAL_MS = 100.0


def slider_values(slider, count: int) -> list[float]:
    """``count`` values along the slider's grid, back and forth, so every move changes the value."""
    if hasattr(slider, "base"):  # FloatLogSlider: base ** (min + k * step)
        grid = slider.base ** np.arange(slider.min, slider.max + slider.step / 2, slider.step)
    else:
        grid = np.arange(slider.min, slider.max + slider.step / 2, slider.step)
    sweep = list(grid[::max(len(grid) // 12, 1)]) + list(grid[::-max(len(grid) // 12, 1)])
    return list(itertools.islice(itertools.cycle(sweep), count))


def median_ms(setter, values) -> float:
    times = []
    for value in values:
        start = time.perf_counter()
        setter(value)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs (nproc), median of {args.repeats} updates")
    print(f"{'demo':<22} {'control':<36} {'median ms':>10} {'goal ms':>8} {'median/goal':>12}")

    tilting = TiltingDemo()
    tilting.widget
    cases = [("tilting", "beta slider (worked example)", tilting.beta_slider),
             ("tilting", "temperature slider (worked)", tilting.temperature_slider)]
    blind = TiltingDemo(scenario="blind_spot", show_temperature=True)
    blind.widget
    cases += [("tilting", "beta slider (blind spot, 9 answers)", blind.beta_slider),
              ("tilting", "temperature slider (blind spot)", blind.temperature_slider)]
    kl_demo = KLEstimatorDemo()
    kl_demo.widget
    kl_demo.draw(200)
    cases += [("kl_estimators", "x slider", kl_demo.x_slider)]
    for demo_name, control, slider in cases:
        ms = median_ms(lambda value: setattr(slider, "value", value), slider_values(slider, args.repeats))
        print(f"{demo_name:<22} {control:<36} {ms:>10.1f} {GOAL_MS:>8.0f} {ms / GOAL_MS:>11.2f}x")

    play_values = iter(range(1, args.repeats + 1))
    ms = median_ms(lambda _: setattr(kl_demo.play, "value", next(play_values)), range(args.repeats))
    print(f"{'kl_estimators':<22} {'Play step (20 batches of 16)':<36} {ms:>10.1f} {GOAL_MS:>8.0f} {ms / GOAL_MS:>11.2f}x")
    ms = median_ms(lambda _: kl_demo.draw_button.click(), range(args.repeats))
    print(f"{'kl_estimators':<22} {'Draw one batch':<36} {ms:>10.1f} {GOAL_MS:>8.0f} {ms / GOAL_MS:>11.2f}x")


if __name__ == "__main__":
    main()
