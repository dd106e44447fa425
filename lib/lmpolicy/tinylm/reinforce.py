"""REINFORCE on TinyLM with the verifier reward: the provided training loop of notebook 08.

One update, CleanRL style (every setting is a field of :class:`Recipe`):

1. choose ``prompts_per_update`` different training problems, favouring those whose earlier answers
   were often wrong (:class:`PromptPicker`), and sample ``samples_per_prompt`` answers to each at
   temperature 1 with the KV-cache generator (each prompt runs through the model once);
2. score them with the verifier (1 if the sum is right, else 0);
3. drop the prompts whose answers all earned the same reward (every advantage would be 0 up to KL
   noise), and run the model on each *distinct* kept answer once (the K answers to a prompt repeat
   each other: every right answer is the same string);
4. fold a per-token k1 KL penalty into each answer's reward, ``r - beta * sum_t (log pi - log pi_ref)``,
   computed without gradient (:func:`kl_penalized_rewards`), and subtract the leave-one-out baseline,
   the mean penalised reward of the *other* answers to the same prompt (:func:`leave_one_out_baseline`);
   divide the advantages by their standard deviation;
5. take ``epochs_per_batch`` gradient steps on the policy-gradient loss
   ``-mean_i A_i log pi(y_i | x_i)`` (:func:`policy_gradient_loss`). From the second step on the
   batch is slightly off-policy: each answer's advantage is multiplied by its probability ratio
   ``pi(y|x) / pi_old(y|x)`` and set to 0 where the ratio has left ``[1 - clip, 1 + clip]`` in the
   direction the advantage pushes. That gives exactly the gradient of PPO's clipped objective
   (bandit view, one ratio per answer), through the same loss function.

Steps 3-5 call three small functions that notebook 08 asks students to write; :func:`train` takes the
students' versions as arguments and defaults to the library's reference versions below (the
benchmark uses those). Whatever a student's piece returns is checked before it is used: a loss that
is NaN, has the wrong shape or carries no gradient stops the run at once with a :class:`PieceError`
saying which.

Every ``eval_every_seconds`` of training the policy is measured on the 1,000 held-out problems
(:class:`HeldoutProbe`): greedy accuracy, the expected accuracy of sampling at T = 1 (the mean
probability of the correct answer, exact, no sampling noise) and the KL from the reference. The
time spent measuring is *not* counted in the training time or in the budget; the
:class:`History` records both clocks.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Callable

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from lmpolicy.tinylm.generate import generate, response_mask
from lmpolicy.tinylm.logprobs import response_logprobs, sequence_logprob
from lmpolicy.tinylm.model import TinyLM, forward_sharing_prompts, load_pretrained
from lmpolicy.tinylm.problems import heldout_problems, training_problems
from lmpolicy.tinylm.rewards import correct_answer_probability, verifier_reward
from lmpolicy.tinylm.tokenizer import PROMPT_LEN, encode_prompts


@dataclass
class Recipe:
    """The whole REINFORCE recipe. The defaults are the fast one the benchmark measures."""

    seed: int = 0
    prompts_per_update: int = 512  # many prompts per update ...
    samples_per_prompt: int = 4  # ... and few answers to each
    lr: float = 3e-4  # Adam; linear warm-up, then constant
    warmup_updates: int = 5
    beta: float = 0.02  # weight of the k1 penalty folded into the reward (the leash); 0 = no leash
    normalize_advantages: bool = True  # divide the advantages by their standard deviation over the batch
    skip_uniform_prompts: bool = True  # drop prompts whose answers all got the same verifier reward
    prioritize_prompts: bool = True  # draw prompts whose earlier answers were wrong more often (see PromptPicker)
    epochs_per_batch: int = 3  # gradient steps per sampled batch (> 1: PPO-style clipped reuse)
    clip: float = 0.2  # the ratio clip of the reused steps
    max_grad_norm: float = 1.0
    temperature: float = 1.0  # sampling temperature of the training answers
    time_budget_seconds: float = 60.0  # training time (sampling + updates); evaluation not counted
    max_updates: int = 100_000
    stop_at_target: bool = True  # stop as soon as both held-out targets are reached
    target_greedy: float = 0.95
    target_sampled: float = 0.90
    eval_every_seconds: float = 2.0  # of training time
    heldout_measured: int = 1_000  # how many of the held-out problems each measurement uses (all by default)
    threads: int = 2  # torch threads
    method: str = "reinforce"  # or "rft": rejection-sampling fine-tuning (SFT on the correct answers)

    def __post_init__(self):
        if self.method not in ("reinforce", "rft"):
            raise ValueError(f"method must be 'reinforce' or 'rft', got {self.method!r}")
        if self.samples_per_prompt < 2 and self.method == "reinforce":
            raise ValueError("the leave-one-out baseline needs samples_per_prompt >= 2")
        for name in ("prompts_per_update", "epochs_per_batch", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.beta < 0 or self.lr <= 0 or self.time_budget_seconds <= 0:
            raise ValueError("beta must be >= 0, lr and time_budget_seconds > 0")


# The plain recipe of the issue, for comparison: 32 prompts x 8 answers, Adam 3e-4, one step per batch,
# prompts drawn uniformly.
PLAIN_RECIPE = Recipe(prompts_per_update=32, samples_per_prompt=8, lr=3e-4, warmup_updates=0, beta=0.05,
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
    """A student's piece returned something the loop cannot train on; the message says what."""


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
# Measuring the policy on the held-out problems
# ---------------------------------------------------------------------------------------------------

def exact_token_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """KL(pi(.|s) || pi_ref(.|s)) over the whole vocabulary, per position: (..., V) -> (...)."""
    logp, ref_logp = F.log_softmax(logits.double(), -1), F.log_softmax(ref_logits.double(), -1)
    return (logp.exp() * (logp - ref_logp)).sum(-1)


@dataclass
class History:
    """What a run measured; one entry per evaluation (the first one before any update)."""

    label: str = ""
    updates: list = field(default_factory=list)
    seconds: list = field(default_factory=list)  # training time (wall clock), evaluation excluded
    cpu_seconds: list = field(default_factory=list)  # CPU time of training (all threads), evaluation excluded
    greedy: list = field(default_factory=list)  # greedy accuracy on the held-out problems
    sampled: list = field(default_factory=list)  # expected accuracy of sampling at T = 1 (exact)
    kl: list = field(default_factory=list)  # KL(pi || pi_ref) per answer, nats
    answers_sampled: int = 0
    eval_seconds: float = 0.0  # time spent measuring (not in ``seconds``)
    seconds_to_target: float | None = None  # training time when both targets were first reached
    cpu_seconds_to_target: float | None = None
    updates_to_target: int | None = None
    train_reward: list = field(default_factory=list)  # mean verifier reward of each update's samples

    def final(self) -> dict:
        return {"updates": self.updates[-1], "seconds": self.seconds[-1], "greedy": self.greedy[-1],
                "sampled": self.sampled[-1], "kl": self.kl[-1]}

    def as_dict(self) -> dict:
        return asdict(self)


class HeldoutProbe:
    """Greedy accuracy, expected T = 1 accuracy and KL from the reference, on the held-out problems.

    The KL is the exact per-token KL over the vocabulary, summed over the tokens of one answer
    sampled from the policy per problem (seeded; the same seed at every measurement).
    """

    def __init__(self, reference: TinyLM, problems=None, seed: int = 1234):
        self.reference = reference
        self.problems = heldout_problems() if problems is None else list(problems)
        self.prompts = encode_prompts(self.problems)
        self.seed = seed

    @torch.no_grad()
    def measure(self, model: TinyLM) -> dict:
        was_training = model.training
        model.eval()
        greedy = generate(model, self.prompts, temperature=0).response_ids
        greedy_accuracy = verifier_reward(self.prompts, greedy).mean().item()
        sampled = correct_answer_probability(model, self.problems).mean().item()
        gen = generate(model, self.prompts, temperature=1.0, generator=torch.Generator().manual_seed(self.seed))
        token_kl = exact_token_kl(model(gen.ids), self.reference(gen.ids))[:, PROMPT_LEN - 1:-1]
        kl = sequence_logprob(token_kl, gen.response_mask).mean().item()
        model.train(was_training)
        return {"greedy": greedy_accuracy, "sampled": sampled, "kl": kl}


# ---------------------------------------------------------------------------------------------------
# The training loop
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


@dataclass
class RunResult:
    model: TinyLM
    history: History
    recipe: Recipe


def frozen_copy(model: TinyLM) -> TinyLM:
    """A copy of ``model`` in eval mode with no gradients: the reference policy pi_ref."""
    reference = TinyLM(model.config)
    reference.load_state_dict(model.state_dict())
    return reference.eval().requires_grad_(False)


def start_run(recipe, model: TinyLM | None):
    """Threads and seeds from ``recipe``; a trainable copy of ``model`` (default: the shipped checkpoint),
    a frozen copy as the reference, Adam at ``recipe.lr``, and a seeded generator for the run's randomness."""
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    start_model = load_pretrained() if model is None else model
    trainable = frozen_copy(start_model).requires_grad_(True)
    optimizer = torch.optim.Adam(trainable.parameters(), lr=recipe.lr)
    return trainable, frozen_copy(start_model), optimizer, torch.Generator().manual_seed(recipe.seed)


def run_with_budget(recipe, model: TinyLM, reference: TinyLM, one_update: Callable[[int], None],
                    history: History, progress: bool = True) -> History:
    """Call ``one_update(update_index)`` until the recipe's time budget (or max_updates, or the target) is reached.

    ``recipe`` needs ``time_budget_seconds``, ``max_updates``, ``eval_every_seconds``, ``stop_at_target``,
    ``target_greedy``, ``target_sampled`` and ``heldout_measured``. The measurements on the held-out problems
    (KL from ``reference``) go into ``history``; their time is kept out of the training clock.
    """
    r = recipe
    probe = HeldoutProbe(reference, heldout_problems()[:r.heldout_measured])

    def evaluate(update: int, seconds: float, cpu_seconds: float) -> None:
        start = time.perf_counter()
        m = probe.measure(model)
        history.updates.append(update)
        history.seconds.append(seconds)
        history.cpu_seconds.append(cpu_seconds)
        for key in ("greedy", "sampled", "kl"):
            getattr(history, key).append(m[key])
        if history.seconds_to_target is None and m["greedy"] >= r.target_greedy and m["sampled"] >= r.target_sampled:
            history.seconds_to_target, history.updates_to_target = seconds, update
            history.cpu_seconds_to_target = cpu_seconds
        history.eval_seconds += time.perf_counter() - start

    evaluate(0, 0.0, 0.0)
    bar = tqdm(total=round(r.time_budget_seconds), desc=history.label, disable=not progress,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total} s of training {postfix}")
    train_seconds, cpu_seconds, next_eval, update = 0.0, 0.0, r.eval_every_seconds, 0
    while train_seconds < r.time_budget_seconds and update < r.max_updates:
        start, cpu_start = time.perf_counter(), time.process_time()
        one_update(update)
        update += 1
        train_seconds += time.perf_counter() - start
        cpu_seconds += time.process_time() - cpu_start
        bar.update(min(train_seconds, r.time_budget_seconds) - bar.n)
        if train_seconds >= next_eval:
            evaluate(update, train_seconds, cpu_seconds)
            next_eval = train_seconds + r.eval_every_seconds
            bar.set_postfix_str(f"greedy {history.greedy[-1]:.3f}  sampled {history.sampled[-1]:.3f}  "
                                f"KL {history.kl[-1]:.3f}")
            if r.stop_at_target and history.seconds_to_target is not None:
                break
    bar.close()
    if history.updates[-1] != update:
        evaluate(update, train_seconds, cpu_seconds)
    model.eval()
    return history


def train(
    recipe: Recipe | None = None,
    model: TinyLM | None = None,
    *,
    leave_one_out_baseline: Callable = leave_one_out_baseline,
    kl_penalized_rewards: Callable = kl_penalized_rewards,
    policy_gradient_loss: Callable = policy_gradient_loss,
    label: str = "REINFORCE",
    progress: bool = True,
) -> RunResult:
    """Fine-tune a copy of ``model`` (default: the shipped checkpoint) with ``recipe``; see the module docstring.

    The reference policy pi_ref is a frozen copy of the starting model. The three pieces default to the
    reference versions of this module; notebook 08 passes the student's. Returns the trained model and
    its :class:`History`.
    """
    r = recipe or Recipe()
    model, reference, optimizer, sampler = start_run(r, model)
    train_prompts = encode_prompts(training_problems())
    P, K = r.prompts_per_update, r.samples_per_prompt
    picker = PromptPicker(len(train_prompts), sampler, prioritize=r.prioritize_prompts)
    history = History(label=label)

    def one_update(update: int) -> None:
        for group in optimizer.param_groups:
            group["lr"] = r.lr * min(1.0, (update + 1) / max(1, r.warmup_updates))
        chosen = picker.pick(P)  # P different problems
        gen = generate(model, train_prompts[chosen], temperature=r.temperature, generator=sampler,
                       samples_per_prompt=K)
        prompts = gen.ids[:, :PROMPT_LEN]
        rewards = verifier_reward(prompts, gen.response_ids)
        picker.record(chosen, rewards.view(P, K))
        history.answers_sampled += len(rewards)
        history.train_reward.append(rewards.mean().item())
        if r.method == "rft":  # SFT on the correct answers: each kept answer weighs 1 / (number kept)
            keep = rewards > 0
        elif r.skip_uniform_prompts:
            by_prompt = rewards.view(P, K)
            keep = (by_prompt != by_prompt[:, :1]).any(dim=1).repeat_interleave(K)
        else:
            keep = torch.ones(P * K, dtype=torch.bool)
        if not keep.any():
            return
        # The K answers to one prompt repeat each other a lot (all the right ones are the same string), so
        # the model runs once per *distinct* answer; ``same[i]`` is the distinct row answer i repeats.
        ids, same = torch.unique(gen.ids[keep], dim=0, return_inverse=True)
        mask = response_mask(ids[:, PROMPT_LEN:])
        model.train()
        token_logp = response_logprobs(forward_sharing_prompts(model, ids), ids, PROMPT_LEN)
        if r.method == "rft":
            advantages = torch.ones(len(same))
        else:
            with torch.no_grad():
                ref_logp = response_logprobs(forward_sharing_prompts(reference, ids), ids, PROMPT_LEN)
            shaped = check_piece(kl_penalized_rewards(rewards[keep], token_logp[same], ref_logp[same], mask[same],
                                                      r.beta), (len(same),), "kl_penalized_rewards(...)")
            baseline = check_piece(leave_one_out_baseline(shaped.detach().view(-1, K)), (len(same) // K, K),
                                   "leave_one_out_baseline(...)")
            advantages = (shaped - baseline.reshape(-1)).detach()
            if r.normalize_advantages and len(advantages) > 1:
                advantages = advantages / (advantages.std() + 1e-6)
        # Summing the advantages of repeated answers, scaled by distinct / all, makes the mean over the distinct
        # rows equal the mean over all answers: the same gradient as running every answer through the model.
        advantages = torch.zeros(len(ids)).index_add_(0, same, advantages) * (len(ids) / len(same))
        old_seq_logp = sequence_logprob(token_logp.detach(), mask)
        for epoch in range(r.epochs_per_batch):
            weights = advantages
            if epoch > 0:  # off-policy now: importance ratio, clipped the PPO way
                token_logp = response_logprobs(forward_sharing_prompts(model, ids), ids, PROMPT_LEN)
                ratio = (sequence_logprob(token_logp.detach(), mask) - old_seq_logp).exp()
                weights = clipped_advantages(advantages, ratio, r.clip)
            loss = check_piece(policy_gradient_loss(token_logp, mask, weights), (), "policy_gradient_loss(...)",
                               needs_grad=True)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), r.max_grad_norm)
            if not torch.isfinite(grad_norm):
                raise PieceError("the gradient of policy_gradient_loss(...) is NaN or infinite")
            optimizer.step()

    run_with_budget(r, model, reference, one_update, history, progress)
    return RunResult(model=model, history=history, recipe=r)


def recipe_from_args(argv: list[str] | None = None) -> Recipe:
    """``python -m lmpolicy.tinylm.reinforce --lr 1e-3 --beta 0 ...``: any Recipe field as a flag."""
    import argparse

    parser = argparse.ArgumentParser(description="REINFORCE on TinyLM from the shipped checkpoint")
    for f in fields(Recipe):
        kind = (lambda s: s.lower() in ("1", "true", "yes")) if isinstance(f.default, bool) else type(f.default)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default)
    return Recipe(**vars(parser.parse_args(argv)))


if __name__ == "__main__":
    result = train(recipe_from_args())
    h = result.history
    print(h.final(), "seconds to target:", h.seconds_to_target, "answers sampled:", h.answers_sampled,
          f"eval seconds {h.eval_seconds:.1f}")
