"""How fast are the exact solvers? Median wall time per call on a random 3-token toy model.

    python bench/bench_exact.py [--repeats 200]

For depths 2, 4 and 8 (9, 81 and 6,561 responses) it times the sequence-level optimum, the soft
values, the token-level optimum, all three together, and a 100-point frontier, and prints each
median next to the goal (the three solvers together well under 10 ms at depth 8) as a ratio.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from lmpolicy.exact.temperature import temperature_curve
from lmpolicy.exact.tilting import frontier, soft_values, tilted_optimum, token_level_optimum
from lmpolicy.exact.toy import ToyLM

GOAL_MS = 10.0
BETA = 0.5


def median_ms(call, repeats: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def solve_all(toy: ToyLM, rewards: np.ndarray) -> None:
    tilted_optimum(toy, rewards, BETA)
    soft_values(toy, rewards, BETA)
    token_level_optimum(toy, rewards, BETA)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, "
          f"numpy {np.__version__}, median of {args.repeats} calls, beta = {BETA}")
    print(f"{'depth':>5} {'responses':>9} {'solver':<28} {'median ms':>10} {'goal ms':>8} {'median/goal':>12}")
    for depth in (2, 4, 8):
        toy = ToyLM.random(("a", "b", "c"), depth=depth, seed=depth)
        rewards = np.random.default_rng(depth).uniform(0.0, 2.0, size=3 ** depth)
        cases = {
            "tilted_optimum": lambda: tilted_optimum(toy, rewards, BETA),
            "soft_values": lambda: soft_values(toy, rewards, BETA),
            "token_level_optimum": lambda: token_level_optimum(toy, rewards, BETA),
            "all three": lambda: solve_all(toy, rewards),
            "frontier (100 betas)": lambda: frontier(toy, rewards, np.geomspace(0.01, 100, 100)),
            "temperature_curve (20 T)": lambda: temperature_curve(toy, rewards, np.geomspace(0.1, 3.16, 20)),
        }
        for name, call in cases.items():
            ms = median_ms(call, args.repeats if depth < 8 or "curve" not in name else max(args.repeats // 10, 5))
            goal = f"{GOAL_MS:8.1f} {ms / GOAL_MS:11.3f}x" if name == "all three" else f"{'':8} {'':12}"
            print(f"{depth:>5} {3 ** depth:>9} {name:<28} {ms:>10.3f} {goal}")


if __name__ == "__main__":
    main()
