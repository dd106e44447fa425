"""Batched generation from TinyLM: temperature, top-k, top-p, a KV cache, and the response mask.

``generate(model, prompt_ids)`` writes ``RESPONSE_LEN = 4`` tokens after each left-padded prompt.
Each step samples the next token of every row from the model's next-token distribution, reshaped
by :func:`sample_next_token`. Once a row has written ``<eos>``, the rest of its response is
``<pad>``. The response mask is 1 for the tokens the model chose, up to and including ``<eos>``,
and 0 for the padding after it.

With ``use_cache=True`` (the default) the prompt is run through the model once and each later
step feeds only the newest column, reusing the keys and values kept in a
:class:`~lmpolicy.tinylm.model.KVCache`. ``use_cache=False`` recomputes the whole prefix at every step;
it gives the same tokens and exists to check the cache and to measure what it saves.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from lmpolicy.tinylm.model import KVCache, TinyLM
from lmpolicy.tinylm.tokenizer import EOS, PAD, PROMPT_LEN, RESPONSE_LEN


class PromptPass(NamedTuple):
    """One pass of a model over a batch of prompts, kept so that several generations and teacher-forced answers
    can continue from it (:func:`run_prompts`): the measurements of :class:`lmpolicy.tinylm.runs.HeldoutProbe`
    answer the same prompts greedily, by sampling and with the correct answer."""

    prompt_ids: torch.Tensor  # (B, PROMPT_LEN)
    cache: KVCache  # the prompts' keys and values; copied, never extended, by whatever continues from it
    last_logits: torch.Tensor  # (B, V): the logits of the last prompt column, which predict the first answer token


@torch.no_grad()
def run_prompts(model: TinyLM, prompt_ids: torch.Tensor) -> PromptPass:
    """``model`` over the prompts ``prompt_ids`` (B, PROMPT_LEN) once, without gradient, in eval mode."""
    if prompt_ids.ndim != 2 or prompt_ids.shape[1] != PROMPT_LEN:
        raise ValueError(f"prompt_ids must have shape (B, {PROMPT_LEN}), got {tuple(prompt_ids.shape)}")
    was_training = model.training
    model.eval()
    cache = KVCache()
    last_logits = model(prompt_ids.long(), cache=cache)[:, -1]
    model.train(was_training)
    return PromptPass(prompt_ids.long(), cache, last_logits)


@torch.no_grad()
def answer_logits(model: TinyLM, prompts: PromptPass, response_ids: torch.Tensor) -> torch.Tensor:
    """The logits (B, RESPONSE_LEN, V) that predict each token of ``response_ids`` (B, RESPONSE_LEN), the answers to
    the prompts of ``prompts`` (one per prompt): ``model(prompt + response)[:, PROMPT_LEN - 1:-1]``, with the
    prompts' columns taken from ``prompts`` instead of computed again. ``model`` must be the one that made it."""
    if response_ids.shape != (len(prompts.prompt_ids), RESPONSE_LEN):
        raise ValueError(f"response_ids must have shape ({len(prompts.prompt_ids)}, {RESPONSE_LEN}), "
                         f"got {tuple(response_ids.shape)}")
    was_training = model.training
    model.eval()
    later = model(response_ids[:, :-1].long(), cache=prompts.cache.copy())
    model.train(was_training)
    return torch.cat([prompts.last_logits[:, None], later], dim=1)


class Generation(NamedTuple):
    ids: torch.Tensor  # (B, PROMPT_LEN + RESPONSE_LEN) prompt and response token ids
    response_mask: torch.Tensor  # (B, RESPONSE_LEN) 1.0 up to and including <eos>, 0.0 after

    @property
    def response_ids(self) -> torch.Tensor:
        """(B, RESPONSE_LEN): the response columns of ``ids``."""
        return self.ids[:, PROMPT_LEN:]


def check_sampling_settings(temperature: float, top_k: int | None, top_p: float | None) -> None:
    """Raise ValueError for a negative temperature, top_k < 1, or top_p outside (0, 1]."""
    if not temperature >= 0:  # also catches NaN
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a whole number >= 1 or None, got {top_k!r}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] or None, got {top_p!r}")


def sample_next_token(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """logits (B, V) -> one token id per row, LongTensor (B,).

    ``temperature == 0`` is greedy (argmax; top_k and top_p do not matter). Otherwise the logits
    are divided by the temperature, top-k keeps the k largest, top-p keeps the smallest set of the
    most likely tokens whose probabilities add up to at least p, and one token is drawn from what
    is left (renormalised).
    """
    check_sampling_settings(temperature, top_k, top_p)
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth_largest = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    if top_p is not None and top_p < 1:
        probs, order = logits.softmax(dim=-1).sort(dim=-1, descending=True, stable=True)
        mass_before = probs.cumsum(dim=-1) - probs
        drop_sorted = mass_before >= top_p  # the most likely token always has mass_before = 0
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(
    model: TinyLM,
    prompt_ids: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    samples_per_prompt: int = 1,
    prompts: PromptPass | None = None,
) -> Generation:
    """Answer every prompt in ``prompt_ids`` (B, PROMPT_LEN) ``samples_per_prompt`` times; see the module docstring.

    With ``samples_per_prompt = K`` the result has B * K rows, the K answers to prompt b in rows
    b * K ... b * K + K - 1 (the order of ``prompt_ids.repeat_interleave(K, 0)``). With the cache,
    each prompt is run through the model once and its keys and values are shared by its K answers.
    ``prompts``, the pass of ``model`` over ``prompt_ids`` made by :func:`run_prompts`, is continued from instead
    of running the prompts again (with the cache only; the same tokens either way).
    """
    check_sampling_settings(temperature, top_k, top_p)
    if prompt_ids.ndim != 2 or prompt_ids.shape[1] != PROMPT_LEN:
        raise ValueError(f"prompt_ids must have shape (B, {PROMPT_LEN}), got {tuple(prompt_ids.shape)}")
    if isinstance(samples_per_prompt, bool) or not isinstance(samples_per_prompt, int) or samples_per_prompt < 1:
        raise ValueError(f"samples_per_prompt must be a whole number >= 1, got {samples_per_prompt!r}")
    was_training = model.training
    model.eval()
    if prompts is not None and (not use_cache or not torch.equal(prompts.prompt_ids, prompt_ids.long())):
        raise ValueError("prompts must be the pass over these prompt_ids (run_prompts), and needs use_cache=True")
    cache = KVCache() if use_cache else None
    if use_cache:  # the prompts, once each; their K answers share the keys and values
        if prompts is None:
            prompts = run_prompts(model, prompt_ids)
        cache, logits = prompts.cache.copy(), prompts.last_logits
        if samples_per_prompt > 1:
            logits = logits.repeat_interleave(samples_per_prompt, 0)
            cache.repeat_rows(samples_per_prompt)
    ids = prompt_ids.long().repeat_interleave(samples_per_prompt, 0)
    finished = torch.zeros(ids.shape[0], dtype=torch.bool)
    for step in range(RESPONSE_LEN):
        if step > 0 or not use_cache:
            logits = model(ids[:, -1:] if use_cache else ids, cache=cache)[:, -1]
        token = sample_next_token(logits, temperature, top_k, top_p, generator)
        token = torch.where(finished, torch.full_like(token, PAD), token)
        finished |= token == EOS
        ids = torch.cat([ids, token[:, None]], dim=1)
    model.train(was_training)
    return Generation(ids=ids, response_mask=response_mask(ids[:, PROMPT_LEN:]))


def response_mask(response_ids: torch.Tensor) -> torch.Tensor:
    """(B, R) response ids -> (B, R) float mask: 1.0 up to and including the first ``<eos>``, then 0.0.

    A row without ``<eos>`` (it ran out of budget) is all ones.
    """
    eos_seen_before = (response_ids == EOS).long().cumsum(dim=1) - (response_ids == EOS).long()
    return (eos_seen_before == 0).float()
