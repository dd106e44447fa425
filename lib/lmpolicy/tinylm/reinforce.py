"""REINFORCE on TinyLM with the verifier reward: the provided training loop of notebook 08.

:func:`train` is the whole loop, top to bottom, CleanRL style; every setting is a field of :class:`Recipe`.
One update:

1. **sample**: choose ``prompts_per_update`` different training problems, favouring those whose earlier
   answers were often wrong (:class:`PromptPicker`), and sample ``samples_per_prompt`` answers to each at
   ``temperature`` with the KV-cache generator (each prompt runs through the model once);
2. **reward**: score them with the verifier (1 if the sum is right, else 0), and drop the prompts whose
   answers all earned the same reward (every advantage would be 0 up to KL noise);
3. **log-probs** of the kept answers under the policy at the sampling temperature (the policy that was
   sampled is ``softmax(logits / T)``; every log-prob and ratio below refers to it);
4. **advantages**: the reference's log-probs at the same temperature, a per-token k1 KL penalty folded
   into each answer's reward, ``r - beta * sum_t (log pi - log pi_ref)``, computed without gradient
   (:func:`kl_penalized_rewards`), minus the leave-one-out baseline, the mean penalised reward of the
   *other* answers to the same prompt (:func:`leave_one_out_baseline`); divided by their standard deviation;
5. **loss and step**, ``epochs_per_batch`` times, on the policy-gradient loss
   ``-mean_i A_i log pi(y_i | x_i)`` (:func:`policy_gradient_loss`). From the second step on the
   batch is slightly off-policy: each answer's advantage is multiplied by its probability ratio
   ``pi(y|x) / pi_old(y|x)`` and set to 0 where the ratio has left ``[1 - clip, 1 + clip]`` in the
   direction the advantage pushes. That gives exactly the gradient of PPO's clipped objective
   (bandit view, one ratio per answer), through the same loss function.

Two speed-ups change how much is computed, never the gradient:

* **distinct answers once** (:class:`DistinctAnswers`): the K answers to a prompt repeat each other a
  lot (every right answer is the same string), so the model runs once per distinct answer and the
  advantages of the copies are summed;
* **a shared prompt pass** (:func:`shared_prompt_logprobs`): the answers to one prompt attend to one
  computation of the prompt's keys and values, gradients included.

``method="rft"`` is rejection-sampling fine-tuning instead: step 2 keeps the correct answers, step 4
gives each weight 1 (SFT on the model's own right answers), and step 5 is the same.

Steps 4-5 call three small functions that notebook 08 asks students to write; :func:`train` takes the
students' versions as arguments and defaults to the library's reference versions below (the
benchmark uses those). A piece that still raises NotImplementedError stops :func:`train` before it
trains (:class:`PieceNotWritten`), and whatever a piece returns is checked before it is used: a loss
that is NaN, has the wrong shape or carries no gradient stops the run at once with a
:class:`PieceError` saying which. The KL-placement study (:mod:`lmpolicy.tinylm.kl_placement`) runs
this same loop with its own KL piece in the reward or a KL term in the loss.

What is around the loop (budget, held-out measurements, history, progress bar) is
:class:`lmpolicy.tinylm.runs.Run`. ``python -m lmpolicy.tinylm.reinforce --lr 1e-3 --no-prioritize-prompts ...``
takes any Recipe field as a flag.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from lmpolicy.tinylm.generate import generate, response_mask
from lmpolicy.tinylm.logprobs import response_logprobs, sequence_logprob
from lmpolicy.tinylm.model import TinyLM, forward_sharing_prompts, unique_rows
from lmpolicy.tinylm.problems import training_problems
from lmpolicy.tinylm.rewards import verifier_reward
from lmpolicy.tinylm.runs import Budget, Run, RunResult, start_run, train_from_command_line, warm_up_learning_rate
from lmpolicy.tinylm.tokenizer import PROMPT_LEN, RESPONSE_LEN, encode_prompts
from lmpolicy.notebook.verdict_lines import wrapped


@dataclass
class Recipe(Budget):
    """The whole REINFORCE recipe. The defaults are notebook 08's run, the one the benchmarks measure."""

    max_updates: int = 250  # from the shipped checkpoint, seed 0 reaches the targets at update 50
    eval_every_updates: int = 10  # a measurement costs about half an update; every 10 stops the run close to the target
    seed: int = 0
    prompts_per_update: int = 512  # many prompts per update ...
    samples_per_prompt: int = 4  # ... and few answers to each
    lr: float = 3e-4  # Adam; linear warm-up, then constant
    warmup_updates: int = 5
    beta: float = 0.02  # weight of the k1 penalty folded into the reward (the leash); 0 = no leash
    normalize_advantages: bool = True  # divide the advantages by their standard deviation over the batch
    skip_uniform_prompts: bool = True  # drop prompts whose answers all got the same verifier reward
    prioritize_prompts: bool = True  # draw prompts whose earlier answers were wrong more often (see PromptPicker)
    epochs_per_batch: int = 4  # gradient steps per sampled batch (> 1: PPO-style clipped reuse); 3 took 60 updates
    clip: float = 0.2  # the ratio clip of the reused steps
    max_grad_norm: float = 1.0
    temperature: float = 1.0  # sampling temperature of the training answers, and the one they are scored at
    threads: int = 1  # torch threads; one holds up best when the laptop is busy (bench/bench_notebook08.py)
    method: str = "reinforce"  # or "rft": rejection-sampling fine-tuning (SFT on the correct answers)

    def __post_init__(self):
        super().__post_init__()
        if self.method not in ("reinforce", "rft"):
            raise ValueError(f"method must be 'reinforce' or 'rft', got {self.method!r}")
        if self.samples_per_prompt < 2 and self.method == "reinforce":
            raise ValueError("the leave-one-out baseline needs samples_per_prompt >= 2")
        for name in ("prompts_per_update", "epochs_per_batch", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.beta < 0 or self.lr <= 0:
            raise ValueError("beta must be >= 0 and lr > 0")
        if not self.temperature > 0:  # also catches NaN
            raise ValueError(f"temperature must be > 0 to train on the sampled answers' log-probs, got "
                             f"{self.temperature!r} (0 is greedy decoding: every answer would have probability 1)")


# The plain recipe, for comparison: 32 prompts x 8 answers, Adam 3e-4, one step per batch, prompts drawn
# uniformly. Its updates are small and many are needed.
PLAIN_RECIPE = Recipe(max_updates=20_000, eval_every_updates=100,
                      prompts_per_update=32, samples_per_prompt=8, lr=3e-4, warmup_updates=0, beta=0.05,
                      normalize_advantages=False, skip_uniform_prompts=False, prioritize_prompts=False,
                      epochs_per_batch=1, max_grad_norm=math.inf)


# ---------------------------------------------------------------------------------------------------
# The three pieces students write in notebook 08 (reference versions)
# ---------------------------------------------------------------------------------------------------

def leave_one_out_baseline(rewards: torch.Tensor) -> torch.Tensor:
    """rewards (P, K), K answers to each of P prompts -> (P, K): the mean reward of the other K - 1 answers."""
    k = rewards.shape[1]
    return (rewards.sum(dim=1, keepdim=True) - rewards) / (k - 1)


def kl_penalized_rewards(rewards, token_logprobs, ref_token_logprobs, mask, beta: float) -> torch.Tensor:
    """``r - beta * sum_t k1_t`` per answer, (B,), with ``k1_t = log pi - log pi_ref`` over the answer's tokens.

    No gradient flows through the penalty: it is part of the reward, a number the policy is scored with.
    """
    k1 = (token_logprobs - ref_token_logprobs).detach()
    return rewards - beta * sequence_logprob(k1, mask)


def policy_gradient_loss(token_logprobs, mask, advantages) -> torch.Tensor:
    """``-mean_i A_i log pi(y_i | x_i)`` with ``log pi(y|x)`` the sum over the answer's tokens; a scalar."""
    return -(advantages.detach() * sequence_logprob(token_logprobs, mask)).mean()


def clipped_advantages(advantages: torch.Tensor, ratio: torch.Tensor, clip: float) -> torch.Tensor:
    """The advantages that make ``policy_gradient_loss`` give the gradient of PPO's clipped objective.

    With ``ratio = pi(y|x) / pi_old(y|x)`` (no gradient), the objective ``mean_i min(ratio_i A_i,
    clip(ratio_i, 1 - clip, 1 + clip) A_i)`` has gradient ``mean_i ratio_i A_i grad log pi(y_i|x_i)``
    where the ratio has not left the clip range in the direction ``A_i`` pushes, and 0 where it has.
    So the weights are ``ratio * A``, zeroed where clipped.
    """
    clipped = ((advantages > 0) & (ratio > 1 + clip)) | ((advantages < 0) & (ratio < 1 - clip))
    return torch.where(clipped, torch.zeros_like(ratio), ratio * advantages)


# ---------------------------------------------------------------------------------------------------
# Checks of whatever the pieces return
# ---------------------------------------------------------------------------------------------------

class PieceError(ValueError):
    """A student's piece returned something the loop cannot train on; the message says what.

    In a notebook it shows as its one-line message, not as a traceback through the loop (IPython's
    ``_render_traceback_``, as :mod:`lmpolicy.notebook.checks` does for a failed check)."""

    heading = "The training loop stopped"

    def _render_traceback_(self) -> list[str]:
        return wrapped([f"\x1b[31m\x1b[1m\u2717 {self.heading}:\x1b[0m {self}"])


class PieceNotWritten(PieceError):
    """A piece still raises NotImplementedError: its answer cell holds the exercise's placeholder."""

    heading = "Not written yet"


def example_call(name: str, piece: Callable, samples_per_prompt: int):
    """Call ``piece``, the piece called ``name``, on a small batch shaped as the loop's: 2 prompts with
    ``samples_per_prompt`` answers each, answers of ``RESPONSE_LEN`` tokens (the last one padding)."""
    K = samples_per_prompt
    rewards = torch.tensor([1.0, 0.0]).repeat(K)
    token_logp = -torch.linspace(0.1, 1.0, 2 * K * RESPONSE_LEN).view(2 * K, RESPONSE_LEN)
    mask = torch.ones(2 * K, RESPONSE_LEN)
    mask[:, -1] = 0
    if name == "leave_one_out_baseline":
        return piece(rewards.view(2, K))
    if name == "kl_penalized_rewards":
        return piece(rewards, token_logp, token_logp - 0.1, mask, 0.02)
    if name == "policy_gradient_loss":
        return piece(token_logp.clone().requires_grad_(True), mask, rewards - 0.5)
    raise ValueError(f"no piece called {name!r}")


def require_written(pieces: dict[str, Callable], samples_per_prompt: int = 4) -> None:
    """Stop at once, before any training, with a :class:`PieceNotWritten` naming the first of ``pieces``
    (``{name: function}``) that still raises NotImplementedError, as a student's answer cell does when the
    notebook is handed out. Any other error a piece raises on the small example call propagates as it is."""
    for name, piece in pieces.items():
        try:
            example_call(name, piece, samples_per_prompt)
        except NotImplementedError:
            raise PieceNotWritten(f"write `{name}` first: its answer cell, the one that starts `def {name}(`, "
                                  "still raises NotImplementedError. Write it, run that cell and its check, then "
                                  "run this cell again.") from None


def check_piece(value, expected_shape: tuple, what: str, *, needs_grad: bool = False) -> torch.Tensor:
    """Stop with a PieceError unless ``value`` is a finite tensor of ``expected_shape`` (with a gradient if asked)."""
    if not isinstance(value, torch.Tensor):
        raise PieceError(f"{what} returned {type(value).__name__}, not a torch.Tensor"
                         + (": return the loss tensor itself, not loss.item()" if needs_grad else ""))
    if tuple(value.shape) != tuple(expected_shape):
        hint = " (average over the batch to get a single number)" if expected_shape == () else ""
        raise PieceError(f"{what} has the wrong shape: {tuple(value.shape)}, expected {tuple(expected_shape)}{hint}")
    if not torch.isfinite(value.detach()).all():
        kind = "NaN" if torch.isnan(value.detach()).any() else "an infinite value"
        raise PieceError(f"{what} is {kind}" if expected_shape == () else f"{what} contains {kind}")
    if needs_grad and (not value.requires_grad or value.grad_fn is None):
        raise PieceError(f"{what} has no gradient: it does not depend on the model's log-probs "
                         "(was something detached, or turned into a Python number?)")
    return value


# ---------------------------------------------------------------------------------------------------
# Choosing the prompts
# ---------------------------------------------------------------------------------------------------

class PromptPicker:
    """Chooses the training prompts of each update, favouring those the policy still gets wrong.

    TinyLM's mistakes are not spread evenly: most are on problems with a one-digit operand, a fifth
    of the training problems. A prompt whose answers are always right teaches nothing (every
    advantage is 0). So each prompt keeps a running count of its answers' rewards (older counts
    halve at every visit, since the policy moves), its success rate is estimated as
    ``p = (wins + 1) / (tries + 2)``, and prompts are drawn without replacement with weight ``1 - p``:
    1/2 for a prompt never tried, near 0 once its answers are always right. Only the verifier's
    rewards go in; nothing here knows the right answers.
    """

    def __init__(self, n_prompts: int, generator: torch.Generator, prioritize: bool = True):
        self.wins, self.tries = torch.zeros(n_prompts), torch.zeros(n_prompts)
        self.generator, self.prioritize = generator, prioritize

    def success_rate(self) -> torch.Tensor:
        return (self.wins + 1) / (self.tries + 2)

    def pick(self, n: int) -> torch.Tensor:
        if n > len(self.wins):
            raise ValueError(f"prompts_per_update = {n} is more than the {len(self.wins)} training problems")
        if not self.prioritize:
            return torch.randperm(len(self.wins), generator=self.generator)[:n]
        return torch.multinomial(1 - self.success_rate(), n, replacement=False, generator=self.generator)

    def record(self, chosen: torch.Tensor, rewards: torch.Tensor) -> None:
        """rewards (len(chosen), K): the verifier's rewards of the K answers to each chosen prompt."""
        self.wins[chosen] = self.wins[chosen] / 2 + rewards.sum(dim=1)
        self.tries[chosen] = self.tries[chosen] / 2 + rewards.shape[1]


# ---------------------------------------------------------------------------------------------------
# The two speed-ups: distinct answers once, a shared prompt pass
# ---------------------------------------------------------------------------------------------------

def shared_prompt_logprobs(model: TinyLM, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Per-token log-probs (B, RESPONSE_LEN) of the answers in ``ids`` under ``softmax(logits / temperature)``,
    the distribution :func:`~lmpolicy.tinylm.generate.generate` samples from at that temperature; each
    distinct prompt is computed once. At temperature 1 the division is exact: the log-probs are the model's own."""
    return response_logprobs(forward_sharing_prompts(model, ids) / temperature, ids, PROMPT_LEN)


class DistinctAnswers:
    """The distinct rows of a batch of prompt + answer ``ids`` (N, L), and which distinct row each answer repeats.

    The model runs on ``ids`` (U, L) only. :meth:`fold` turns per-answer advantages (N,) into per-row
    weights (U,) whose loss has the same gradient as the loss over all N answers.
    """

    def __init__(self, answers: torch.Tensor):
        self.ids, self.same = unique_rows(answers)
        self.mask = response_mask(self.ids[:, PROMPT_LEN:])

    def __len__(self) -> int:
        return len(self.ids)

    def fold(self, advantages: torch.Tensor) -> torch.Tensor:
        # Summing the advantages of repeated answers, scaled by distinct / all, makes the mean over the distinct
        # rows equal the mean over all answers: the same gradient as running every answer through the model.
        return torch.zeros(len(self.ids)).index_add_(0, self.same, advantages) * (len(self.ids) / len(self.same))


# ---------------------------------------------------------------------------------------------------
# Two steps of an update that depend on the method
# ---------------------------------------------------------------------------------------------------

def answers_to_learn_from(rewards: torch.Tensor, r: Recipe) -> torch.Tensor:
    """Step 2: a boolean mask over the P * K answers. RFT keeps the right ones; REINFORCE drops the prompts
    whose K answers all got the same reward (if ``skip_uniform_prompts``), whose advantages would all be 0."""
    P, K = r.prompts_per_update, r.samples_per_prompt
    if r.method == "rft":
        return rewards > 0
    if r.skip_uniform_prompts:
        by_prompt = rewards.view(P, K)
        return (by_prompt != by_prompt[:, :1]).any(dim=1).repeat_interleave(K)
    return torch.ones(P * K, dtype=torch.bool)


def reinforce_advantages(rewards, token_logp, ref_logp, mask, r: Recipe, *, kl_penalized_rewards: Callable,
                         leave_one_out_baseline: Callable) -> torch.Tensor:
    """Step 4, per answer (the K answers to each kept prompt in a row): KL-penalised reward minus the
    leave-one-out baseline, divided by the standard deviation if ``normalize_advantages``. No gradient."""
    n, K = len(rewards), r.samples_per_prompt
    shaped = check_piece(kl_penalized_rewards(rewards, token_logp, ref_logp, mask, r.beta), (n,),
                         "kl_penalized_rewards(...)")
    baseline = check_piece(leave_one_out_baseline(shaped.detach().view(-1, K)), (n // K, K),
                           "leave_one_out_baseline(...)")
    advantages = (shaped - baseline.reshape(-1)).detach()
    if r.normalize_advantages and len(advantages) > 1:
        advantages = advantages / (advantages.std() + 1e-6)
    return advantages


# ---------------------------------------------------------------------------------------------------
# The training loop
# ---------------------------------------------------------------------------------------------------

def train(
    recipe: Recipe | None = None,
    model: TinyLM | None = None,
    *,
    leave_one_out_baseline: Callable = leave_one_out_baseline,
    kl_penalized_rewards: Callable = kl_penalized_rewards,
    policy_gradient_loss: Callable = policy_gradient_loss,
    kl_loss_term: Callable | None = None,
    label: str = "REINFORCE",
    progress: bool = True,
) -> RunResult:
    """Fine-tune a copy of ``model`` (default: the shipped checkpoint) with ``recipe``; see the module docstring.

    The reference policy pi_ref is a frozen copy of the starting model. The three pieces default to the
    reference versions of this module; notebook 08 passes the student's, and a piece that still raises
    NotImplementedError stops the call at once (:func:`require_written`). ``kl_loss_term(token_logp,
    ref_token_logp, mask, row_weights)``, if given, is a differentiated KL estimate added to the loss with
    weight ``beta`` (the KL-placement study, :mod:`lmpolicy.tinylm.kl_placement`). Returns the trained
    model and its :class:`~lmpolicy.tinylm.runs.History`.
    """
    r = recipe or Recipe()
    P, K = r.prompts_per_update, r.samples_per_prompt
    require_written(dict(leave_one_out_baseline=leave_one_out_baseline, kl_penalized_rewards=kl_penalized_rewards,
                         policy_gradient_loss=policy_gradient_loss), K)
    model, reference, optimizer, sampler = start_run(r, model)
    train_prompts = encode_prompts(training_problems())
    picker = PromptPicker(len(train_prompts), sampler, prioritize=r.prioritize_prompts)
    run = Run(r, model, reference, label, progress)  # measures on schedule, stops at the target
    for update in run.updates():
        warm_up_learning_rate(optimizer, r.lr, r.warmup_updates, update)

        # 1. sample: P different prompts, favouring those often answered wrong, and K answers to each
        chosen = picker.pick(P)
        gen = generate(model, train_prompts[chosen], temperature=r.temperature, generator=sampler,
                       samples_per_prompt=K)

        # 2. reward: the verifier's 1 or 0 for each answer
        rewards = verifier_reward(gen.ids[:, :PROMPT_LEN], gen.response_ids)
        picker.record(chosen, rewards.view(P, K))
        run.history.answers_sampled += len(rewards)
        run.history.train_reward.append(rewards.mean().item())
        keep = answers_to_learn_from(rewards, r)
        if not keep.any():
            continue
        batch = DistinctAnswers(gen.ids[keep])  # the model runs once per distinct answer
        s = batch.same  # which distinct row each kept answer is

        # 3. log-probs of the policy that was sampled (the model at the sampling temperature)
        model.train()
        token_logp = shared_prompt_logprobs(model, batch.ids, r.temperature)

        # 4. the reference's log-probs, where a KL needs them (in the reward, or as a loss term), and the
        # advantages (RFT: weight 1 on every kept answer)
        if r.method != "rft" or kl_loss_term is not None:
            # The leash is to the reference at the same temperature: the starting policy as it was sampled.
            # Then the KL is 0 at the start and measures only what training changed; against the reference
            # at T = 1 the penalty would be nonzero before any update and would pull the policy back toward
            # untempered sampling, undoing the temperature rather than restraining the learning.
            with torch.no_grad():
                ref_logp = shared_prompt_logprobs(reference, batch.ids, r.temperature)
        if r.method == "rft":
            advantages = torch.ones(len(s))
        else:
            advantages = reinforce_advantages(rewards[keep], token_logp[s], ref_logp[s], batch.mask[s], r,
                                              kl_penalized_rewards=kl_penalized_rewards,
                                              leave_one_out_baseline=leave_one_out_baseline)
        weights = batch.fold(advantages)

        # 5. loss and step, epochs_per_batch times; from the second step on, PPO's clipped ratio
        old_seq_logp = sequence_logprob(token_logp.detach(), batch.mask)
        for epoch in range(r.epochs_per_batch):
            step_weights = weights
            if epoch > 0:  # off-policy now: importance ratio, clipped the PPO way
                token_logp = shared_prompt_logprobs(model, batch.ids, r.temperature)
                ratio = (sequence_logprob(token_logp.detach(), batch.mask) - old_seq_logp).exp()
                step_weights = clipped_advantages(weights, ratio, r.clip)
            loss = check_piece(policy_gradient_loss(token_logp, batch.mask, step_weights), (),
                               "policy_gradient_loss(...)", needs_grad=True)
            if kl_loss_term is not None:
                loss = loss + r.beta * kl_loss_term(token_logp, ref_logp, batch.mask, batch.fold(torch.ones(len(s))))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), r.max_grad_norm)
            if not torch.isfinite(grad_norm):
                raise PieceError("the gradient of policy_gradient_loss(...) is NaN or infinite")
            optimizer.step()

    return RunResult(model=model, history=run.history, recipe=r)


def main(argv: list[str] | None = None) -> RunResult:
    """``python -m lmpolicy.tinylm.reinforce --lr 1e-3 --beta 0 ...``: any Recipe field as a flag."""
    return train_from_command_line(Recipe, train, "REINFORCE on TinyLM from the shipped checkpoint", argv)


if __name__ == "__main__":
    main()
