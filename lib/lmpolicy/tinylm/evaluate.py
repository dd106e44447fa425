"""How good is a TinyLM? The chapter's metrics, and ``python -m lmpolicy.tinylm.evaluate [--json]``.

The command measures a checkpoint (default: the shipped one) on the held-out problems and prints the
chapter's three figures (greedy accuracy, temperature-1 sampled accuracy, the share of wrong greedy
answers that are exactly one digit off), plus the exact expected sampled accuracy, the number of
malformed greedy answers and the number of held-out problems. Seeded.

Every greedy answer falls into exactly one class (:func:`classify_answer`):

* ``"correct"``        the reward is 1;
* ``"one_digit_off"``  wrong, but *well-formed* (one to three digits followed by ``<eos>`` within
                       the budget), with *the same number of digits* as the correct sum, and
                       differing from it in *exactly one position*: 86 or 95 for 85, never 8 or 850;
* ``"other_wrong"``    well-formed and wrong in any other way (two or more digits differ, or the
                       number of digits differs, e.g. a leading zero ``085``);
* ``"malformed"``      not a well-formed answer: no ``<eos>`` within the budget, ``<eos>`` first,
                       or a ``+``/``=``/``<bos>``/``<pad>`` before ``<eos>``.

The share of wrong greedy answers that are one digit off is
``one_digit_off / (one_digit_off + other_wrong + malformed)``: malformed answers count as wrong
answers that are not one digit off, and their number is reported separately.

:func:`exact_token_kl` is the exact KL between two next-token distributions, which the training runs
report (:class:`lmpolicy.tinylm.runs.HeldoutProbe`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from lmpolicy.tinylm.generate import generate, response_mask
from lmpolicy.tinylm.logprobs import response_logprobs, sequence_logprob
from lmpolicy.tinylm.model import CHECKPOINT_PATH, TinyLM, load_checkpoint
from lmpolicy.tinylm.problems import Problem, heldout_problems
from lmpolicy.tinylm.rewards import verifier_reward
from lmpolicy.tinylm.tokenizer import PROMPT_LEN, encode_prompts, encode_responses, parse_answer

ANSWER_CLASSES = ("correct", "one_digit_off", "other_wrong", "malformed")


def classify_answer(response_ids: torch.Tensor, correct_sum: int) -> str:
    """One response row (RESPONSE_LEN,) -> one of ``ANSWER_CLASSES`` (see the module docstring)."""
    digits = parse_answer(response_ids)
    expected = str(correct_sum)
    if digits is None:
        return "malformed"
    if digits == expected:
        return "correct"
    if len(digits) == len(expected) and sum(d != e for d, e in zip(digits, expected)) == 1:
        return "one_digit_off"
    return "other_wrong"


@torch.no_grad()
def correct_answer_probability(model: TinyLM, problems: list[Problem]) -> torch.Tensor:
    """(B,) the model's probability of writing exactly the correct response, ``<eos>`` included.

    Computed by teacher-forcing the correct response; its mean over problems is the exact
    expected accuracy of sampling at temperature 1.
    """
    model.eval()
    responses = encode_responses([a + b for a, b in problems])
    ids = torch.cat([encode_prompts(problems), responses], dim=1)
    token_logp = response_logprobs(model(ids), ids, PROMPT_LEN)
    return sequence_logprob(token_logp, response_mask(responses)).exp()


@dataclass
class Evaluation:
    n_problems: int
    greedy_accuracy: float
    sampled_accuracy: float  # empirical, temperature 1, ``samples_per_problem`` samples per problem
    expected_sampled_accuracy: float  # exact: mean probability of the correct response
    one_digit_off_share: float  # of the wrong greedy answers (malformed ones included)
    n_greedy_wrong: int
    n_one_digit_off: int
    n_malformed: int  # malformed greedy answers
    samples_per_problem: int
    seed: int

    def as_dict(self) -> dict:
        return asdict(self)


def greedy_answer_counts(model: TinyLM, problems: list[Problem]) -> dict[str, int]:
    """How many greedy answers fall into each of ``ANSWER_CLASSES``."""
    greedy = generate(model, encode_prompts(problems), temperature=0).response_ids
    counts = dict.fromkeys(ANSWER_CLASSES, 0)
    for response, (a, b) in zip(greedy, problems):
        counts[classify_answer(response, a + b)] += 1
    return counts


def evaluate_model(
    model: TinyLM,
    problems: list[Problem] | None = None,
    *,
    samples_per_problem: int = 4,
    seed: int = 0,
) -> Evaluation:
    """Greedy accuracy, temperature-1 sampled accuracy (empirical and exact) and the one-digit-off share.

    ``problems`` defaults to the 1,000 held-out problems; sampling uses ``torch.Generator`` seeded
    with ``seed``, so the result is reproducible.
    """
    problems = heldout_problems() if problems is None else list(problems)
    if not problems:
        raise ValueError("evaluate_model needs at least one problem")
    counts = greedy_answer_counts(model, problems)
    n_wrong = len(problems) - counts["correct"]

    generator = torch.Generator().manual_seed(seed)
    repeated = [p for p in problems for _ in range(samples_per_problem)]
    prompts = encode_prompts(repeated)
    sampled = generate(model, prompts, temperature=1.0, generator=generator)
    sampled_rewards = verifier_reward(prompts, sampled.response_ids)

    return Evaluation(
        n_problems=len(problems),
        greedy_accuracy=counts["correct"] / len(problems),
        sampled_accuracy=sampled_rewards.sum().item() / len(repeated),
        expected_sampled_accuracy=correct_answer_probability(model, problems).double().mean().item(),
        one_digit_off_share=counts["one_digit_off"] / n_wrong if n_wrong else float("nan"),
        n_greedy_wrong=n_wrong,
        n_one_digit_off=counts["one_digit_off"],
        n_malformed=counts["malformed"],
        samples_per_problem=samples_per_problem,
        seed=seed,
    )


def exact_token_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """KL(pi(.|s) || pi_ref(.|s)) over the whole vocabulary, per position: (..., V) -> (...)."""
    logp, ref_logp = F.log_softmax(logits.double(), -1), F.log_softmax(ref_logits.double(), -1)
    return (logp.exp() * (logp - ref_logp)).sum(-1)


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


@dataclass
class EvaluateSettings:
    """Measure a TinyLM checkpoint on the held-out problems."""

    checkpoint: str = str(CHECKPOINT_PATH)  # default: the shipped checkpoint
    json: bool = False  # print the figures as one JSON object
    seed: int = 0  # of the temperature-1 samples
    samples_per_problem: int = 4
    threads: int = 1  # torch threads


def main(argv: list[str] | None = None) -> Evaluation:
    import tyro  # only the command line needs it

    s = tyro.cli(EvaluateSettings, args=argv)
    torch.set_num_threads(s.threads)
    result = evaluate_model(load_checkpoint(s.checkpoint), samples_per_problem=s.samples_per_problem, seed=s.seed)
    print(json.dumps(result.as_dict(), indent=2) if s.json else format_evaluation(result))
    return result


if __name__ == "__main__":
    main()
