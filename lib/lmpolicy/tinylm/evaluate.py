"""Measure TinyLM on the held-out problems: ``python -m lmpolicy.tinylm.evaluate [--json] [--checkpoint PATH]``.

Prints the chapter's three figures (greedy accuracy, temperature-1 sampled accuracy, the share of
wrong greedy answers that are exactly one digit off), plus the exact expected sampled accuracy,
the number of malformed greedy answers and the number of held-out problems. Seeded.
"""
from __future__ import annotations

import argparse
import json

import torch

from lmpolicy.tinylm.model import CHECKPOINT_PATH, load_checkpoint
from lmpolicy.tinylm.rewards import Evaluation, evaluate_model


def format_evaluation(result: Evaluation) -> str:
    r = result
    return "\n".join([
        f"held-out problems                     {r.n_problems}",
        f"greedy accuracy                       {r.greedy_accuracy:.3f}",
        f"sampled accuracy, T = 1 (empirical)   {r.sampled_accuracy:.3f}"
        f"   ({r.samples_per_problem} samples per problem, seed {r.seed})",
        f"sampled accuracy, T = 1 (exact)       {r.expected_sampled_accuracy:.3f}"
        "   (mean probability of the correct answer)",
        f"wrong greedy answers one digit off    {r.one_digit_off_share:.3f}"
        f"   ({r.n_one_digit_off} of {r.n_greedy_wrong}; {r.n_malformed} malformed)",
    ])


def main(argv: list[str] | None = None) -> Evaluation:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=str(CHECKPOINT_PATH), help="default: the shipped checkpoint")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--seed", type=int, default=0, help="seed of the temperature-1 samples")
    parser.add_argument("--samples-per-problem", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = evaluate_model(load_checkpoint(args.checkpoint), samples_per_problem=args.samples_per_problem,
                            seed=args.seed)
    print(json.dumps(result.as_dict(), indent=2) if args.json else format_evaluation(result))
    return result


if __name__ == "__main__":
    main()
