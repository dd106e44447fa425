"""How fast do the two demos answer a control? Median wall time per update, against a 100 ms goal.

    python bench/bench_demos.py [--repeats 30]

Beside the wall time, the CPU time of the same updates: on a shared, busy machine the wall time
mostly measures the other processes, the CPU time still this code's work. To compare with another
version of the demos, run this same script with that version's lib/ first on PYTHONPATH.

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

import lmpolicy
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


def median_ms(setter, values) -> tuple[float, float]:
    """Median wall and CPU milliseconds per call of ``setter``."""
    walls, cpus = [], []
    for value in values:
        wall, cpu = time.perf_counter(), time.process_time()
        setter(value)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return 1000 * statistics.median(walls), 1000 * statistics.median(cpus)


def report(demo_name: str, control: str, times: tuple[float, float]) -> None:
    wall, cpu = times
    print(f"{demo_name:<14} {control:<36} {wall:>8.1f} {cpu:>8.1f} {GOAL_MS:>8.0f} {wall / GOAL_MS:>11.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs (nproc), load average {os.getloadavg()[0]:.1f}, "
          f"median of {args.repeats} updates; lmpolicy from {os.path.dirname(lmpolicy.__file__)}")
    print(f"{'demo':<14} {'control':<36} {'wall ms':>8} {'CPU ms':>8} {'goal ms':>8} {'wall/goal':>12}")

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
        report(demo_name, control,
               median_ms(lambda value: setattr(slider, "value", value), slider_values(slider, args.repeats)))

    play_values = iter(range(1, args.repeats + 1))
    report("kl_estimators", "Play step (20 batches of 16)",
           median_ms(lambda _: setattr(kl_demo.play, "value", next(play_values)), range(args.repeats)))
    report("kl_estimators", "Draw one batch", median_ms(lambda _: kl_demo.draw_button.click(), range(args.repeats)))


if __name__ == "__main__":
    main()
