"""The submission's functions and values as the trusted tests see them.

A function of the submission becomes a ``SubmissionFunction``: calling it runs it in the submission's
process (``channel.Channel.call``). The test's inputs stay its own: a call that changed one of them
fails (``changed_input``), so that no expected value is computed from inputs the submission rewrote, and
only a generator's new state is carried back (``advance_generators``). A result that carries a gradient back to an argument
differentiates through the submission's process (``through_submission``: ``backward`` asks it for
the vector-Jacobian product). A value outside the codec's safe form stands in as ``Unreadable``.
"""
from __future__ import annotations

import numpy as np
import torch

from lmpolicy_grader.trusted_tests import codec
from lmpolicy_grader.trusted_tests.errors import ChannelError


class Unreadable:
    """A value of the submission that is outside the safe form (stands in for it in the tests)."""

    def __init__(self, name: str, why: str):
        self.name, self.why = name, why

    def __repr__(self) -> str:
        return f"<{self.name}: {self.why}>"


class SubmissionFunction:
    """A function of the submission: calling it runs it in the submission's process."""

    def __init__(self, connection, name: str):
        self._channel, self.__name__, self.__qualname__ = connection, name, name

    def __call__(self, *args, **kwargs):
        return self._channel.call(self.__name__, args, kwargs)

    def counting_calls_of(self, callee: str):
        """This function, returning (result, its calls of ``callee``) (``checks.call_counting``)."""
        def counting(*args, **kwargs):
            return self._channel.call(self.__name__, args, kwargs, count=callee)
        counting.__name__ = counting.__qualname__ = self.__name__
        return counting

    def __repr__(self) -> str:
        return f"<your function {self.__name__}>"


def changed_input(original, after, where: str) -> str | None:
    """Which part of ``original`` (an input the test passed) the call changed, as the submission's copy
    shows it after the call; None if it left every part as it was. A generator is meant to advance: it
    is never a change (``advance_generators`` carries its new state over)."""
    if isinstance(original, torch.Generator):
        return None
    if isinstance(original, torch.Tensor):
        if (not isinstance(after, torch.Tensor) or after.shape != original.shape or after.dtype != original.dtype
                or after.requires_grad != original.requires_grad):
            return where
        mine, theirs = original.detach(), after.detach()
        if original.is_floating_point() or original.is_complex():
            same = torch.equal(mine.isnan(), theirs.isnan()) and torch.equal(mine.nan_to_num(), theirs.nan_to_num())
        else:
            same = torch.equal(mine, theirs)
        return None if same else where
    if isinstance(original, np.ndarray):
        same = isinstance(after, np.ndarray) and after.shape == original.shape and np.array_equal(
            original, after, equal_nan=original.dtype.kind in "fc")
        return None if same else where
    if type(original) in (list, tuple):
        if type(after) is not type(original) or len(after) != len(original):
            return where
        return next((found for i, (mine, theirs) in enumerate(zip(original, after))
                     if (found := changed_input(mine, theirs, f"{where}[{i}]"))), None)
    if type(original) is dict:
        if type(after) is not dict or set(after) != set(original):
            return where
        return next((found for key in original if (found := changed_input(original[key], after[key], f"{where}[{key!r}]"))), None)
    return None  # numbers and strings cross by value: the test's own copy cannot change


def advance_generators(original, after) -> None:
    """Give each generator the test passed the state the call left it in (sampling advances it)."""
    if isinstance(original, torch.Generator) and isinstance(after, torch.Generator):
        original.set_state(after.get_state())
    elif type(original) in (list, tuple) and type(after) in (list, tuple):
        for mine, theirs in zip(original, after):
            advance_generators(mine, theirs)
    elif type(original) is dict and type(after) is dict:
        for key in original.keys() & after.keys():
            advance_generators(original[key], after[key])


class _ThroughSubmission(torch.autograd.Function):
    """Outputs computed in the submission's process; backward asks it for the vector-Jacobian product."""

    @staticmethod
    def forward(ctx, connection, graph, n_inputs, *inputs_then_outputs):
        ctx.connection, ctx.graph, ctx.n_inputs = connection, graph, n_inputs
        ctx.input_meta = [(t.shape, t.dtype) for t in inputs_then_outputs[:n_inputs]]
        return tuple(o.detach().clone() for o in inputs_then_outputs[n_inputs:])

    @staticmethod
    def backward(ctx, *grads):
        found = ctx.connection.vjp(ctx.graph, list(grads))
        if len(found) != ctx.n_inputs:
            raise ChannelError("the gradient through your function has the wrong number of parts")
        checked = []
        for grad, (shape, dtype) in zip(found, ctx.input_meta):
            if grad is not None and (not isinstance(grad, torch.Tensor) or grad.shape != shape):
                raise ChannelError("the gradient through your function has the wrong shape")
            checked.append(None if grad is None else grad.to(dtype))
        return (None, None, None, *checked, *([None] * (len(grads))))


def through_submission(connection, graph: int, inputs: list, result):
    outputs = [t for t in codec.tensors_in(result) if t.requires_grad]
    if not inputs or not outputs:
        return result
    linked = iter(_ThroughSubmission.apply(connection, graph, len(inputs), *inputs, *[o.detach() for o in outputs]))

    def relink(value):
        if isinstance(value, torch.Tensor):
            return next(linked) if value.requires_grad else value
        if isinstance(value, (list, tuple)):
            items = [relink(item) for item in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {key: relink(item) for key, item in value.items()}
        return value
    return relink(result)
