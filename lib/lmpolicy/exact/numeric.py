"""The numeric helpers every exact solver shares: input checks, and logs that tolerate zeros.

- ``check_positive`` / ``check_positive_grid``: a parameter (beta, a temperature) or a grid of them
  that must be finite and > 0;
- ``check_distribution``: probability arrays, one distribution per row of the last axis, with a
  message that names the first bad row (``kl``, ``ToyLM``'s tables and every solver use it);
- ``check_finite``: per-response numbers such as rewards;
- ``distribution_and_values``: how a sequence-level solver reads ``(reference, rewards)``;
- ``log_of`` and ``logsumexp``: log space with log 0 = -inf and no warnings.

A *response model* is anything with ``response_probs()`` and ``response_values(values, name)``, such
as ``lmpolicy.exact.toy.ToyLM``; wherever a probability vector is expected, one stands for its
``response_probs()``. (Asked for by method, not by class, so that this module needs no model.)
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
import numpy as np

ROW_SUM_TOLERANCE = 1e-6


def is_response_model(x) -> bool:
    """True for a model over a fixed list of responses, such as a ToyLM (see the module docstring).

    Checked by method rather than by class (or a runtime ``Protocol``, 250 times slower), because
    ToyLM's own validation calls this module for every table it builds.
    """
    return hasattr(x, "response_probs") and hasattr(x, "response_values")


def check_positive(value, name: str, meaning: str) -> float:
    """Return ``value`` as a float, or raise ValueError unless it is finite and > 0.

    ``name`` is the parameter as the student sees it (``"beta"``, ``"temperature"``) and ``meaning``
    says in a few words why it must be positive; both go into the message.
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a finite number > 0 ({meaning}), got {value!r}")
    return number


def check_positive_grid(values, name: str, meaning: str) -> np.ndarray:
    """A non-empty 1-D grid of finite numbers > 0 (e.g. betas or temperatures) as a float array.

    ``name`` is the singular parameter name used in the messages (``"beta"``, ``"temperature"``).
    """
    grid = np.atleast_1d(np.asarray(values, dtype=object))
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"give a non-empty 1-D list of {name} values, got shape {grid.shape}")
    return np.array([check_positive(value, name, meaning) for value in grid])


def check_distribution(probs, name: str = "probs", *, one_dimensional: bool = True,
                       describe_row: Callable[[tuple[int, ...]], str] | None = None,
                       token_names: Sequence[str] | None = None) -> np.ndarray:
    """Return probabilities as a float64 array, or raise ValueError naming the first bad distribution.

    Every slice along the last axis is one distribution: its entries must be finite and >= 0 and
    sum to 1 within ``ROW_SUM_TOLERANCE`` (1e-6). ``one_dimensional=True`` asks for a single
    distribution (a non-empty 1-D array); ``False`` accepts any shape with at least one axis (a
    batch of distributions, or a ToyLM's table of next-token distributions).

    The message names the bad row as ``name[i, j]`` (just ``name`` for a 1-D array), followed by
    ``describe_row(index)`` in parentheses when given (``index`` is the row's position in the
    leading axes, ``()`` for a 1-D array), and a bad entry as ``token token_names[k]`` when given
    (else "entry k"). A response model stands for its ``response_probs()``.
    """
    if is_response_model(probs):
        return probs.response_probs()
    try:
        array = np.asarray(probs, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of probabilities (numbers), got {probs!r}") from None
    if (one_dimensional and array.ndim != 1) or array.ndim == 0 or array.size == 0:
        kind = "1-D array" if one_dimensional else "array"
        raise ValueError(f"{name} must be a non-empty {kind} of probabilities, got shape {array.shape}")

    def row(index: tuple[int, ...]) -> str:
        return name + _subscript(index) + (f" ({describe_row(index)})" if describe_row else "")

    per_row = " along its last axis" if array.ndim > 1 else ""
    finite = np.isfinite(array)
    if not finite.all():
        index = _first_true(~finite.all(axis=-1))
        raise ValueError(f"{row(index)} holds a non-finite number: {array[index].tolist()}; "
                         f"{name} must hold probabilities (finite numbers >= 0)")
    if np.any(array < 0):
        index = _first_true((array < 0).any(axis=-1))
        entry = int(np.argmin(array[index]))
        entry_name = f"token {token_names[entry]!r}" if token_names is not None else f"entry {entry}"
        raise ValueError(f"{row(index)} gives {entry_name} the negative probability "
                         f"{array[index][entry]:g}; {name} must hold probabilities (numbers >= 0)")
    totals = array.sum(axis=-1)
    off = np.abs(totals - 1.0) > ROW_SUM_TOLERANCE
    if np.any(off):
        index = _first_true(off)
        raise ValueError(f"{row(index)} sums to {totals[index]:.9g}, not 1 (tolerance {ROW_SUM_TOLERANCE:g}): "
                         f"{array[index].tolist()}; {name} must sum to 1{per_row}, so divide by the sum "
                         f"to normalise it")
    return array


def check_finite(values: np.ndarray, name: str, entry_names: Sequence[str] | None = None) -> np.ndarray:
    """Return the 1-D array ``values`` unchanged, or raise ValueError naming its first entry that is
    not finite. ``entry_names`` (e.g. the response names) label the entries; by default "entry i".
    """
    finite = np.isfinite(values)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        label = repr(entry_names[bad]) if entry_names is not None else f"entry {bad}"
        raise ValueError(f"{name} must be finite numbers; the value for {label} is not")
    return values


def distribution_and_values(reference, values, name: str = "rewards"):
    """``(probs, values)`` as two 1-D float arrays over the responses of ``reference``.

    ``reference`` is a response model such as a ToyLM (its ``response_probs()``; ``values`` may then
    be a mapping by response name) or a 1-D probability vector (non-negative, summing to 1 within
    1e-6; ``values`` then an array of the same length). This is how every sequence-level solver in
    ``lmpolicy.exact`` reads its inputs.
    """
    if is_response_model(reference):
        return reference.response_probs(), reference.response_values(values, name)
    probs = check_distribution(reference, "the reference distribution")
    array = np.asarray(values, dtype=float)
    if array.shape != probs.shape:
        raise ValueError(f"{name} must have one number per response: shape {probs.shape}, "
                         f"got {array.shape}")
    return probs, check_finite(array, name)


def log_of(probs) -> np.ndarray:
    """Natural log of probabilities, with log 0 = -inf and no divide-by-zero warning."""
    probs = np.asarray(probs, dtype=float)
    with np.errstate(divide="ignore"):
        return np.log(probs)


def logsumexp(x, axis: int = -1) -> np.ndarray:
    """log(sum(exp(x))) along ``axis``, computed stably; all ``-inf`` gives ``-inf`` (no warning)."""
    x = np.asarray(x, dtype=float)
    shift = np.max(x, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(shift, axis=axis) + np.log(np.sum(np.exp(x - shift), axis=axis))


def _first_true(flags: np.ndarray) -> tuple[int, ...]:
    """Index of the first True entry of a boolean array (``()`` for a 0-d array)."""
    return tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(flags)[0]), flags.shape))


def _subscript(index: tuple[int, ...]) -> str:
    return f"[{', '.join(map(str, index))}]" if index else ""
