"""Train TinyLM on two-digit addition: ``python -m lmpolicy.tinylm.pretraining [--seed N] [--out PATH]``.

Supervised training (behaviour cloning) on ~22,000 worked examples ``<bos>37+48=`` -> ``85<eos>``:
cross-entropy on the response tokens only (the prompt and the padding after ``<eos>`` are masked),
AdamW with a linear warm-up and a cosine decay. Every ``eval_every`` steps the greedy accuracy on
the 500 validation problems is measured, and training stops at the first check that reaches
``stop_at_validation_accuracy``. The held-out test problems are never looked at.

The run is deterministic: seeded, single-threaded by default, so ``python -m lmpolicy.tinylm.pretraining``
reproduces the shipped checkpoint bit for bit on the same machine type (the recipe is
:class:`Settings`; its defaults are the shipped one).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch
from tqdm.auto import tqdm

from lmpolicy.tinylm.generate import response_mask
from lmpolicy.tinylm.logprobs import response_logprobs, sequence_logprob
from lmpolicy.tinylm.model import CHECKPOINT_PATH, TinyLM, TinyLMConfig, save_checkpoint
from lmpolicy.tinylm.problems import training_examples, validation_problems
from lmpolicy.tinylm.evaluate import greedy_answer_counts
from lmpolicy.tinylm.tokenizer import PROMPT_LEN, encode_prompts, encode_responses


@dataclass
class Settings:
    seed: int = 2  # of the seeds tried, one whose figures land mid-band (they vary a lot with the seed)
    n_examples: int = 22_000  # worked examples drawn from the training problems
    batch_size: int = 256
    lr: float = 3e-3
    beta1: float = 0.9
    beta2: float = 0.98
    weight_decay: float = 0.8  # on every parameter
    warmup_steps: int = 50
    max_steps: int = 1_500  # the cosine schedule decays to 0 at this step
    eval_every: int = 10
    stop_at_validation_accuracy: float = 0.79  # greedy accuracy on the 500 validation problems
    threads: int = 1  # torch threads; 1 keeps the run bit-for-bit reproducible
    out: str = str(CHECKPOINT_PATH)


@dataclass
class TrainResult:
    model: TinyLM
    steps: int
    validation_accuracy: float
    losses: list[float]
    seconds: float


def make_dataset(n_examples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (N, 11) of prompt + correct response, and the response mask (N, 4)."""
    examples = training_examples(n_examples, seed=seed)
    responses = encode_responses([a + b for a, b in examples])
    return torch.cat([encode_prompts(examples), responses], dim=1), response_mask(responses)


def supervised_loss(model: TinyLM, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood per response token (prompt and trailing padding masked)."""
    token_logp = response_logprobs(model(ids), ids, PROMPT_LEN)
    return -sequence_logprob(token_logp, mask).sum() / mask.sum()


def supervised_step(model: TinyLM, optimizer: torch.optim.Optimizer, ids: torch.Tensor, mask: torch.Tensor) -> float:
    """One optimizer step on the batch ``ids`` (B, 11) / ``mask`` (B, 4); returns the loss before the step."""
    model.train()
    loss = supervised_loss(model, ids, mask)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()


def learning_rate(step: int, s: Settings) -> float:
    if step < s.warmup_steps:
        return s.lr * (step + 1) / s.warmup_steps
    progress = (step - s.warmup_steps) / max(1, s.max_steps - s.warmup_steps)
    return s.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def train(
    settings: Settings | None = None,
    progress: bool = True,
    on_check: Callable[[int, TinyLM, float], None] | None = None,
) -> TrainResult:
    """Train a fresh TinyLM with ``settings``; ``on_check(step, model, validation_accuracy)`` runs at every check."""
    s = settings or Settings()
    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    generator = torch.Generator().manual_seed(s.seed)
    ids, mask = make_dataset(s.n_examples, s.seed)
    validation = validation_problems()

    model = TinyLM(TinyLMConfig())
    optimizer = torch.optim.AdamW(model.parameters(), lr=s.lr, betas=(s.beta1, s.beta2), weight_decay=s.weight_decay)

    start, losses, val_acc, step = time.perf_counter(), [], 0.0, 0
    bar = tqdm(range(s.max_steps), desc="training TinyLM", disable=not progress, mininterval=0.5)
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, s)
        batch = torch.randint(len(ids), (s.batch_size,), generator=generator)
        losses.append(supervised_step(model, optimizer, ids[batch], mask[batch]))
        if (step + 1) % s.eval_every == 0:
            val_acc = greedy_answer_counts(model, validation)["correct"] / len(validation)
            bar.set_postfix(loss=f"{losses[-1]:.3f}", val_greedy=f"{val_acc:.3f}")
            if on_check is not None:
                on_check(step + 1, model, val_acc)
            if val_acc >= s.stop_at_validation_accuracy:
                break
    bar.close()
    model.eval()
    return TrainResult(model, step + 1, val_acc, losses, time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    import tyro  # only the command line needs it

    s = tyro.cli(Settings, args=argv, description=__doc__.splitlines()[0])
    result = train(s)
    save_checkpoint(result.model, s.out, settings=asdict(s), steps=result.steps,
                    validation_accuracy=result.validation_accuracy)
    print(f"{result.steps} steps in {result.seconds:.0f} s, validation greedy accuracy {result.validation_accuracy:.3f}")
    print(f"saved {s.out}; `python -m lmpolicy.tinylm.evaluate --checkpoint {s.out}` measures it on the held-out problems")


if __name__ == "__main__":
    main()
