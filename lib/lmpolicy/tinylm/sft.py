"""Supervised fine-tuning of TinyLM on more worked examples: the baseline REINFORCE is compared with.

Starting from a trained TinyLM (default: the shipped checkpoint), keep training on worked examples
``<bos>37+48=`` -> ``85<eos>`` drawn afresh from the training problems (a different draw from the one
the checkpoint was trained on), with :func:`lmpolicy.tinylm.pretraining.supervised_loss`, under the same time budget
and held-out measurements as :func:`lmpolicy.tinylm.reinforce.train`. This is "SFT on the true answers": it is
told the answer to every problem, where REINFORCE only learns whether its own answer was right.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lmpolicy.tinylm.model import TinyLM
from lmpolicy.tinylm.reinforce import History, RunResult, run_with_budget, start_run
from lmpolicy.tinylm.pretraining import make_dataset, supervised_step


@dataclass
class SFTRecipe:
    seed: int = 1  # the shipped checkpoint's examples were drawn with seed 0: these are new ones
    n_examples: int = 100_000
    batch_size: int = 256
    lr: float = 1e-3  # Adam; linear warm-up, then constant
    warmup_updates: int = 20  # Adam's first steps move every weight by about lr, whatever its gradient
    time_budget_seconds: float = 60.0  # training time; evaluation not counted
    max_updates: int = 100_000
    stop_at_target: bool = True
    target_greedy: float = 0.95
    target_sampled: float = 0.90
    eval_every_seconds: float = 2.0
    heldout_measured: int = 1_000
    threads: int = 1


def train(recipe: SFTRecipe | None = None, model: TinyLM | None = None, *, label: str = "SFT on true answers",
          progress: bool = True) -> RunResult:
    """Fine-tune a copy of ``model`` (default: the shipped checkpoint) on worked examples.

    The KL reported in the history is measured from the starting model.
    """
    r = recipe or SFTRecipe()
    model, reference, optimizer, batches = start_run(r, model)
    ids, mask = make_dataset(r.n_examples, r.seed)
    history = History(label=label)

    def one_update(update: int) -> None:
        for group in optimizer.param_groups:
            group["lr"] = r.lr * min(1.0, (update + 1) / r.warmup_updates)
        batch = torch.randint(len(ids), (r.batch_size,), generator=batches)
        supervised_step(model, optimizer, ids[batch], mask[batch])
        history.answers_sampled += r.batch_size  # worked examples seen

    run_with_budget(r, model, reference, one_update, history, progress)
    return RunResult(model=model, history=history, recipe=r)
