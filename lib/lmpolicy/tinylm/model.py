"""TinyLM: a decoder-only transformer of about 100,000 parameters that adds two-digit numbers.

Written in the spirit of minGPT's model.py: token embeddings plus learned position embeddings,
``n_layer`` pre-LN blocks (causal self-attention, then an MLP), a final LayerNorm and a linear head.

Two things differ from a textbook GPT, both because prompts are padded on the left:

* **Padding is never attended to.** A query may look at earlier keys that are real tokens (not
  ``<pad>``). It may always look at itself, so a row that is padding still has one key and produces
  finite (meaningless) logits instead of NaN; no real token ever sees a padding key. Padding is
  recognised by its id, so a ``<pad>`` the model samples mid-answer is skipped too (that answer is
  malformed anyway), identically with and without the KV cache.
* **Position ids skip padding.** The first real token of every row (``<bos>``) gets position 0, the
  next real token position 1, and so on (left padding gets position 0, padding after ``<eos>`` the
  position of the last real token; neither is attended to). So ``"3+4="`` is seen exactly as it
  would be without padding.

``forward`` also takes an optional :class:`KVCache`: the keys and values of earlier columns are
kept, and only the new columns are computed (see :mod:`lmpolicy.tinylm.generate`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from lmpolicy.tinylm.tokenizer import PAD, PROMPT_LEN, RESPONSE_LEN, VOCAB_SIZE

CHECKPOINT_PATH = Path(__file__).resolve().parent / "checkpoints" / "tinylm.pt"


@dataclass
class TinyLMConfig:
    vocab_size: int = VOCAB_SIZE
    block_size: int = PROMPT_LEN + RESPONSE_LEN  # longest sequence: 7 prompt + 4 response columns
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    d_mlp: int = 256


class KVCache:
    """Keys and values of the columns seen so far, one (k, v) pair per layer, plus which were real.

    Made empty by ``KVCache()``; every ``TinyLM.forward(ids, cache=cache)`` appends the new columns.
    """

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []  # per layer: (B, n_head, T_seen, head_dim)
        self.values: list[torch.Tensor] = []
        self.key_is_real: torch.Tensor | None = None  # (B, T_seen) bool, False for <pad>
        self.n_real: torch.Tensor | None = None  # (B,) real tokens seen so far = next position id

    @property
    def length(self) -> int:
        return 0 if self.key_is_real is None else self.key_is_real.shape[1]

    def repeat_rows(self, times: int) -> None:
        """Repeat every row ``times`` times in place (row b becomes rows b * times ... b * times + times - 1),
        so that several answers to one prompt share the prompt's keys and values."""
        self.select_rows(torch.arange(self.key_is_real.shape[0]).repeat_interleave(times))

    def copy(self) -> "KVCache":
        """A cache holding the same columns, which later forwards extend without touching this one (a forward
        replaces the cached tensors with longer ones, never writes into them)."""
        twin = KVCache()
        twin.__dict__.update(self.__dict__)  # whatever else a model keeps in it too
        twin.keys, twin.values = list(self.keys), list(self.values)
        return twin

    def select_rows(self, rows: torch.Tensor) -> None:
        """Row i becomes old row ``rows[i]`` (repeats allowed), in place; gradients flow back to the old rows."""
        self.keys = [k[rows] for k in self.keys]
        self.values = [v[rows] for v in self.values]
        self.key_is_real = self.key_is_real[rows]
        self.n_real = self.n_real[rows]


class CausalSelfAttention(nn.Module):
    def __init__(self, config: TinyLMConfig):
        super().__init__()
        assert config.d_model % config.n_head == 0, "d_model must be divisible by n_head"
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)

    def forward(self, x, allowed, past_kv=None):
        """x (B, T, C); allowed (B, T, T_past + T) bool; past_kv (k, v) of earlier columns or None."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)
            v = torch.cat([past_kv[1], v], dim=2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])  # (B, nh, T, T_all)
        att = att.masked_fill(~allowed[:, None], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y), (k, v)


class Block(nn.Module):
    def __init__(self, config: TinyLMConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, config.d_mlp),
            nn.GELU(),
            nn.Linear(config.d_mlp, config.d_model),
        )

    def forward(self, x, allowed, past_kv=None):
        a, kv = self.attn(self.ln_1(x), allowed, past_kv)
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return x, kv


class TinyLM(nn.Module):
    def __init__(self, config: TinyLMConfig | None = None):
        super().__init__()
        self.config = config = config or TinyLMConfig()
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.block_size, config.d_model)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """ids (B, T) LongTensor -> logits (B, T, vocab_size); logits column t predict token t+1.

        With a ``cache``, ``ids`` are the columns that follow those already in the cache; their
        keys and values are appended to it.
        """
        B, T = ids.shape
        past = cache.length if cache is not None else 0
        if past + T > self.config.block_size:
            raise ValueError(f"sequence of {past + T} columns is longer than block_size {self.config.block_size}")

        is_real = ids != PAD  # (B, T)
        n_real_before = cache.n_real if cache is not None and cache.n_real is not None else ids.new_zeros(B)
        positions = (n_real_before[:, None] + is_real.cumsum(dim=1) - 1).clamp(min=0)
        key_is_real = is_real if past == 0 else torch.cat([cache.key_is_real, is_real], dim=1)

        # query i (column past + i) may see key j if j <= past + i and (key j is real or j is i itself)
        query_col = torch.arange(past, past + T, device=ids.device)[:, None]
        key_col = torch.arange(past + T, device=ids.device)[None, :]
        allowed = (key_col <= query_col)[None] & (key_is_real[:, None, :] | (key_col == query_col)[None])

        x = self.tok_emb(ids) + self.pos_emb(positions)
        for layer, block in enumerate(self.blocks):
            past_kv = (cache.keys[layer], cache.values[layer]) if past > 0 else None
            x, (k, v) = block(x, allowed, past_kv)
            if cache is not None:
                if past > 0:
                    cache.keys[layer], cache.values[layer] = k, v
                else:
                    cache.keys.append(k)
                    cache.values.append(v)
        if cache is not None:
            cache.key_is_real = key_is_real
            cache.n_real = n_real_before + is_real.sum(dim=1)
        return self.head(self.ln_f(x))


def unique_rows(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(ids, dim=0, return_inverse=True)`` for token ids (N, L): the distinct rows in sorted order
    and, for each row, the index of its distinct row.

    The same result, several times faster: each row is read as one integer written in base ``VOCAB_SIZE``
    (first column most significant), so sorting the integers sorts the rows, and the 1-D ``torch.unique`` does
    the work (``unique(dim=0)`` compares rows element by element). Rows too long for an int64 fall back to it.
    """
    if ids.ndim != 2 or ids.dtype.is_floating_point:
        raise ValueError(f"unique_rows takes token ids (N, L) of an integer dtype, got {tuple(ids.shape)} {ids.dtype}")
    n_columns = ids.shape[1]
    if VOCAB_SIZE ** n_columns >= 2 ** 63 or (ids.numel() and (ids.min() < 0 or ids.max() >= VOCAB_SIZE)):
        return torch.unique(ids, dim=0, return_inverse=True)
    place_values = VOCAB_SIZE ** torch.arange(n_columns - 1, -1, -1, dtype=torch.int64)
    keys, inverse = torch.unique((ids.long() * place_values).sum(dim=1), return_inverse=True)
    representative = torch.empty(len(keys), dtype=torch.int64).scatter_(0, inverse, torch.arange(len(ids)))
    return ids[representative], inverse


def forward_sharing_prompts(model: TinyLM, ids: torch.Tensor) -> torch.Tensor:
    """``model(ids)`` for rows ``prompt + response``, with each distinct prompt run through the model once.

    Many rows of a REINFORCE batch are answers to the same prompt; their first ``PROMPT_LEN`` columns
    are computed once, and the response columns attend to the shared keys and values (with gradients).
    """
    prompts, which = unique_rows(ids[:, :PROMPT_LEN])
    cache = KVCache()
    prompt_logits = model(prompts, cache=cache)
    cache.select_rows(which)
    return torch.cat([prompt_logits[which], model(ids[:, PROMPT_LEN:], cache=cache)], dim=1)


def save_checkpoint(model: TinyLM, path: str | Path, **metadata) -> None:
    """Save the config, the weights and any extra metadata (e.g. the training settings) to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": asdict(model.config), "state_dict": model.state_dict(), "metadata": metadata}, path)


def load_checkpoint(path: str | Path) -> TinyLM:
    """A TinyLM in eval mode with the weights saved at ``path`` by :func:`save_checkpoint`."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no TinyLM checkpoint at {path}; `python -m lmpolicy.tinylm.pretraining --out {path}` makes one")
    saved = torch.load(path, map_location="cpu", weights_only=True)
    model = TinyLM(TinyLMConfig(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    return model.eval()


def load_pretrained() -> TinyLM:
    """The shipped TinyLM (``lmpolicy/tinylm/checkpoints/tinylm.pt``), in eval mode."""
    return load_checkpoint(CHECKPOINT_PATH)
