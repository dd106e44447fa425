"""How fast is TinyLM on this CPU? Training tokens/s, and sampling answers/s with and without the KV cache.

    python bench/bench_tinylm.py [--threads 2] [--seconds 1.5]

Training: full steps (forward, backward, AdamW) on batches of 256 rows of 11 columns; tokens/s counts
every column of every row. Sampling: ``generate`` at temperature 1 on held-out prompts, batch sizes
1, 64 and 1000, with the KV cache and recomputing the prefix at every step, side by side with their
ratio. Each figure is the best of several timed rounds of about ``--seconds``. Runs in under a minute.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from lmpolicy.tinylm.generate import generate
from lmpolicy.tinylm.model import CHECKPOINT_PATH, TinyLM, load_pretrained
from lmpolicy.tinylm.problems import heldout_problems
from lmpolicy.tinylm.tokenizer import encode_prompts
from lmpolicy.tinylm.pretraining import Settings, make_dataset, supervised_step

BATCH_SIZES = (1, 64, 1000)


def rate(work, units_per_call: float, seconds: float, rounds: int = 3) -> float:
    """Best units/s over ``rounds`` rounds, each calling ``work`` for about ``seconds``."""
    work()  # warm-up
    best = 0.0
    for _ in range(rounds):
        calls, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds / rounds or calls == 0:
            work()
            calls += 1
        best = max(best, calls * units_per_call / elapsed)
    return best


def cpu_model() -> str:
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def training_tokens_per_second(seconds: float) -> float:
    s = Settings()
    torch.manual_seed(0)
    model = TinyLM().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=s.lr, betas=(s.beta1, s.beta2), weight_decay=s.weight_decay)
    ids, mask = make_dataset(s.n_examples, seed=0)
    g = torch.Generator().manual_seed(0)

    def step():
        batch = torch.randint(len(ids), (s.batch_size,), generator=g)
        supervised_step(model, optimizer, ids[batch], mask[batch])

    return rate(step, s.batch_size * ids.shape[1], seconds)


def sampling_answers_per_second(model: TinyLM, batch_size: int, use_cache: bool, seconds: float) -> float:
    problems = heldout_problems()
    prompts = encode_prompts([problems[i % len(problems)] for i in range(batch_size)])
    g = torch.Generator().manual_seed(0)
    return rate(lambda: generate(model, prompts, temperature=1.0, generator=g, use_cache=use_cache),
                batch_size, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--seconds", type=float, default=1.5, help="timing budget per figure")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {os.cpu_count()} CPUs ({cpu_model()}), torch {torch.__version__}, {args.threads} threads, "
          f"load average {os.getloadavg()[0]:.1f} (other jobs slow every figure down)")

    print(f"training: {training_tokens_per_second(2 * args.seconds):,.0f} tokens/s "
          f"(batch {Settings().batch_size} x 11 columns, forward + backward + AdamW)")

    model = load_pretrained() if CHECKPOINT_PATH.exists() else TinyLM().eval()
    print("sampling at temperature 1, answers/s:")
    print(f"{'batch':>7} {'KV cache':>12} {'no cache':>12} {'ratio':>7}")
    for batch_size in BATCH_SIZES:
        cached = sampling_answers_per_second(model, batch_size, True, args.seconds)
        uncached = sampling_answers_per_second(model, batch_size, False, args.seconds)
        print(f"{batch_size:>7} {cached:>12,.0f} {uncached:>12,.0f} {cached / uncached:>6.2f}x")


if __name__ == "__main__":
    main()
