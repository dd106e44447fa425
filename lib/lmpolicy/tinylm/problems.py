"""Which addition problems TinyLM is trained on, which are used for early stopping, which are held out.

All 10,000 problems ``a + b`` with ``a, b`` in 0..99 are shuffled once with a fixed seed and cut
into three disjoint sets:

* ``heldout_problems()``    1,000 fresh problems, never trained on and never looked at during
                            training: the figures of the shipped checkpoint are measured on them;
* ``validation_problems()``   500 problems, not trained on either, for the early-stopping check;
* ``training_problems()``   the other 8,500; ``training_examples()`` draws the ~22,000 worked
                            examples the model is trained on from these (with repetition).
"""
from __future__ import annotations

import random
from functools import lru_cache

from lmpolicy.tinylm.tokenizer import MAX_OPERAND

SPLIT_SEED = 11
N_HELDOUT = 1_000
N_VALIDATION = 500
N_TRAINING_EXAMPLES = 22_000

Problem = tuple[int, int]


def all_problems() -> list[Problem]:
    """Every problem ``(a, b)`` with a, b in 0..99, in order: 10,000 of them."""
    return [(a, b) for a in range(MAX_OPERAND + 1) for b in range(MAX_OPERAND + 1)]


@lru_cache(maxsize=1)
def _split() -> tuple[tuple[Problem, ...], tuple[Problem, ...], tuple[Problem, ...]]:
    problems = all_problems()
    random.Random(SPLIT_SEED).shuffle(problems)
    heldout = problems[:N_HELDOUT]
    validation = problems[N_HELDOUT : N_HELDOUT + N_VALIDATION]
    training = problems[N_HELDOUT + N_VALIDATION :]
    return tuple(heldout), tuple(validation), tuple(training)


def heldout_problems() -> list[Problem]:
    """The 1,000 held-out test problems (fixed; disjoint from the validation and training problems)."""
    return list(_split()[0])


def validation_problems() -> list[Problem]:
    """The 500 problems of the early-stopping check (fixed; never trained on, never held-out)."""
    return list(_split()[1])


def training_problems() -> list[Problem]:
    """The 8,500 problems training examples are drawn from (fixed)."""
    return list(_split()[2])


def training_examples(n: int = N_TRAINING_EXAMPLES, seed: int = 0) -> list[Problem]:
    """``n`` worked examples drawn uniformly, with repetition, from :func:`training_problems`."""
    if n < 1:
        raise ValueError(f"n must be a positive number of examples, got {n}")
    return random.Random(seed).choices(training_problems(), k=n)
