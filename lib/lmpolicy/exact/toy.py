"""A toy language model given as next-token tables, with fixed-length responses.

A ``ToyLM`` has a small vocabulary of single-character tokens, say ``("a", "b")``, and writes
responses of exactly ``depth`` tokens. Its next-token distributions are stored as one table per
position: ``tables[d]`` has shape ``(V,) * d + (V,)`` and ``tables[d][i_1, ..., i_d]`` is the
distribution of token ``d + 1`` after the prefix ``tokens[i_1] ... tokens[i_d]``. So ``tables[0]``
(shape ``(V,)``) is the first-token distribution, ``tables[1][0]`` the distribution after the first
token, and so on.

Responses are enumerated in lexicographic order of token indices (``"aa", "ab", "ba", "bb"`` for
two tokens and depth 2), which is the C order of an array of shape ``(V,) * depth``: every
per-response array in ``lmpolicy`` (probabilities, rewards, log-probs) is a 1-D array in this order.

    >>> toy = ToyLM(tokens=("a", "b"), tables=[[0.7, 0.3], [[0.6, 0.4], [0.5, 0.5]]])
    >>> toy.responses
    ('aa', 'ab', 'ba', 'bb')
    >>> toy.response_probs().round(2).tolist()
    [0.42, 0.28, 0.15, 0.15]
"""
from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from typing import Union

import numpy as np

from lmpolicy.exact.numeric import check_distribution, check_finite, log_of


class ToyLM:
    """A toy language model: fixed-length responses drawn token by token from next-token tables.

    Parameters
    ----------
    tokens : sequence of str
        The vocabulary: distinct single characters, e.g. ``("a", "b", "c")``.
    tables : sequence of array-like
        ``tables[d]`` (for ``d = 0 .. depth - 1``) has shape ``(V,) * d + (V,)``: the next-token
        distribution after every prefix of ``d`` tokens. Entries must be >= 0 and every
        distribution must sum to 1 within ``numeric.ROW_SUM_TOLERANCE`` (1e-6); otherwise ValueError names
        the table and the prefix that is wrong. The tables are stored as read-only float64 arrays.

    Attributes
    ----------
    tokens : tuple[str, ...]
    tables : tuple[np.ndarray, ...]
    vocab_size : int   (V)
    depth : int        (number of tokens in every response)
    responses : tuple[str, ...]  all ``V ** depth`` responses in lexicographic order
    """

    def __init__(self, tokens: Sequence[str], tables: Sequence) -> None:
        self.tokens = _check_tokens(tokens)
        self.tables = _check_tables(self.tokens, tables)
        self.vocab_size = len(self.tokens)
        self.depth = len(self.tables)

    @functools.cached_property
    def responses(self) -> tuple[str, ...]:
        """All ``V ** depth`` response names in lexicographic order (built on first use)."""
        return tuple(self.prefixes(self.depth))

    # -- construction helpers ----------------------------------------------------------------

    @classmethod
    def random(cls, tokens: Sequence[str], depth: int, *, seed: int = 0,
               concentration: float = 1.0) -> "ToyLM":
        """A ToyLM whose next-token distributions are drawn from a Dirichlet(concentration) law.

        Seeded: the same ``(tokens, depth, seed, concentration)`` always gives the same model.
        """
        if int(depth) != depth or depth < 1:
            raise ValueError(f"depth must be a whole number >= 1, got {depth!r}")
        rng = np.random.default_rng(seed)
        vocab_size = len(tokens)
        tables = [rng.dirichlet(np.full(vocab_size, float(concentration)), size=(vocab_size,) * d)
                  for d in range(int(depth))]
        return cls(tokens, tables)

    def with_tables(self, tables: Sequence) -> "ToyLM":
        """A new ToyLM with the same tokens and the given tables (validated the same way)."""
        return ToyLM(self.tokens, tables)

    # -- names and indices -------------------------------------------------------------------

    def prefixes(self, length: int) -> list[str]:
        """All prefixes of ``length`` tokens, in lexicographic order (``[""]`` for length 0)."""
        return ["".join(chars) for chars in itertools.product(self.tokens, repeat=length)]

    def prefix_index(self, prefix: str) -> tuple[int, ...]:
        """Token indices of ``prefix`` (e.g. ``"ba" -> (1, 0)``); use them to index any per-prefix
        array such as ``tables[len(prefix)]`` or a soft-value table."""
        if not isinstance(prefix, str) or len(prefix) > self.depth:
            raise ValueError(f"prefix must be a string of at most {self.depth} tokens from "
                             f"{self.tokens}, got {prefix!r}")
        unknown = [char for char in prefix if char not in self.tokens]
        if unknown:
            raise ValueError(f"prefix {prefix!r} uses {unknown[0]!r}, which is not one of the "
                             f"tokens {self.tokens}")
        return tuple(self.tokens.index(char) for char in prefix)

    def response_index(self, response: str) -> int:
        """Position of a full response (e.g. ``"bb"``) in ``responses`` and per-response arrays."""
        if not isinstance(response, str) or len(response) != self.depth:
            raise ValueError(f"a response has exactly {self.depth} tokens from {self.tokens}, "
                             f"got {response!r}")
        return int(np.ravel_multi_index(self.prefix_index(response), (self.vocab_size,) * self.depth))

    def next_token_probs(self, prefix: str = "") -> np.ndarray:
        """The next-token distribution after ``prefix`` (shape ``(V,)``)."""
        if len(prefix) == self.depth:
            raise ValueError(f"{prefix!r} is already a full response of {self.depth} tokens; "
                             f"there is no next token")
        return self.tables[len(prefix)][self.prefix_index(prefix)]

    # -- probabilities -----------------------------------------------------------------------

    def prefix_probs(self, length: int) -> np.ndarray:
        """Probability of every prefix of ``length`` tokens, shape ``(V,) * length``.

        ``prefix_probs(0)`` is ``1.0`` (shape ``()``); ``prefix_probs(depth)`` is
        ``response_probs()`` reshaped to ``(V,) * depth``.
        """
        if int(length) != length or not 0 <= length <= self.depth:
            raise ValueError(f"length must be a whole number between 0 and {self.depth}, got {length!r}")
        probs = np.ones(())
        for table in self.tables[:int(length)]:
            probs = probs[..., None] * table
        return probs

    def response_probs(self) -> np.ndarray:
        """pi(y) for every response, a 1-D array of length ``V ** depth`` in ``responses`` order."""
        return self.prefix_probs(self.depth).reshape(-1)

    def response_log_probs(self) -> np.ndarray:
        """log pi(y) for every response (``-inf`` where pi(y) = 0, without a warning)."""
        log_probs = np.zeros(())
        for table in self.tables:
            log_probs = log_probs[..., None] + log_of(table)
        return log_probs.reshape(-1)

    def response_values(self, values, name: str = "rewards") -> np.ndarray:
        """Turn per-response numbers into a float64 array in ``responses`` order.

        ``values`` is either a mapping from response name to number that names every response
        exactly once (``{"aa": 0, "ab": 1, "ba": 0, "bb": 2}``), or an array-like of length
        ``V ** depth`` (or of shape ``(V,) * depth``). The numbers must be finite. ``name`` is used
        in error messages.
        """
        if isinstance(values, Mapping):
            missing = [y for y in self.responses if y not in values]
            extra = [key for key in values if key not in self.responses]
            if missing or extra:
                raise ValueError(f"{name} must give a number for each of the responses "
                                 f"{self.responses}: missing {missing}, unknown {extra}")
            array = np.array([values[y] for y in self.responses], dtype=float)
        else:
            array = np.asarray(values, dtype=float)
            if array.shape == (self.vocab_size,) * self.depth:
                array = array.reshape(-1)
            if array.shape != (len(self.responses),):
                raise ValueError(f"{name} must have one number per response ({len(self.responses)} "
                                 f"numbers, in the order {_short(self.responses)}), got shape {array.shape}")
        return check_finite(array, name, self.responses)

    def __repr__(self) -> str:
        return f"ToyLM(tokens={self.tokens}, depth={self.depth})"


Reference = Union[ToyLM, Sequence[float], np.ndarray]


# -- validation --------------------------------------------------------------------------------

def _check_tokens(tokens) -> tuple[str, ...]:
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise ValueError(f"tokens must be a tuple of single characters such as ('a', 'b'), got {tokens!r}")
    tokens = tuple(tokens)
    if len(tokens) < 2:
        raise ValueError(f"a ToyLM needs at least 2 tokens, got {tokens!r}")
    for token in tokens:
        if not isinstance(token, str) or len(token) != 1:
            raise ValueError(f"every token must be a single character (so that responses have "
                             f"names like 'ab'), got {token!r} in {tokens!r}")
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"tokens must be distinct, got {tokens!r}")
    return tokens


def _describe_prefix(tokens: tuple[str, ...], index: tuple[int, ...]) -> str:
    if not index:
        return "the first-token distribution"
    return "the next-token distribution after " + repr("".join(tokens[i] for i in index))


def _check_tables(tokens: tuple[str, ...], tables) -> tuple[np.ndarray, ...]:
    vocab_size = len(tokens)
    if isinstance(tables, np.ndarray) or not isinstance(tables, Sequence) or len(tables) == 0:
        raise ValueError("tables must be a non-empty list of arrays, one per response position: "
                         "tables[0] of shape (V,), tables[1] of shape (V, V), ...")
    checked = []
    for depth, table in enumerate(tables):
        expected = (vocab_size,) * (depth + 1)
        try:
            array = np.array(table, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"tables[{depth}] must be an array of numbers of shape {expected} "
                             f"(a distribution over {tokens} for each prefix of {depth} tokens); "
                             f"it has rows of different lengths or non-numbers") from None
        if array.shape != expected:
            raise ValueError(f"tables[{depth}] must have shape {expected} (a distribution over "
                             f"{vocab_size} tokens for each of the {vocab_size ** depth} prefix(es) of "
                             f"{depth} token(s)), got shape {array.shape}")
        check_distribution(array, f"tables[{depth}]", one_dimensional=False, token_names=tokens,
                           describe_row=lambda index: _describe_prefix(tokens, index))
        array.setflags(write=False)
        checked.append(array)
    return tuple(checked)


def _short(names: tuple[str, ...]) -> str:
    return ", ".join(names) if len(names) <= 9 else ", ".join(names[:4]) + ", ..., " + names[-1]
