"""The submission's functions and values as the trusted tests see them.

A function of the submission becomes a ``SubmissionFunction``: calling it runs it in the submission's
process (``channel.Channel.call``). What the call left in its arguments is written back only where the
test allows it (``write_back``), and a result that carries a gradient back to an argument
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


def write_back(original, after) -> None:
    """Make ``original`` (an argument the tests passed) what the call left in the submission's copy."""
    if isinstance(original, torch.Tensor) and isinstance(after, torch.Tensor):
        if after.dtype == original.dtype and after.shape == original.shape:
            same = torch.equal(original.detach(), after.detach()) or (
                original.is_floating_point() and torch.equal(original.detach().isnan(), after.isnan())
                and torch.equal(original.detach().nan_to_num(), after.detach().nan_to_num()))
            if not same:
                with torch.no_grad():
                    original.copy_(after)
        else:
            original.data = after.detach()
        if original.is_leaf and original.requires_grad != after.requires_grad:
            original.requires_grad_(after.requires_grad)
    elif isinstance(original, torch.Generator) and isinstance(after, torch.Generator):
        original.set_state(after.get_state())
    elif isinstance(original, np.ndarray) and isinstance(after, np.ndarray):
        if original.flags.writeable and after.shape == original.shape and not np.array_equal(original, after, equal_nan=True):
            np.copyto(original, after, casting="unsafe")
    elif type(original) is list and type(after) is list:
        if len(original) == len(after):
            for mine, theirs in zip(original, after):
                write_back(mine, theirs)
        for i, (mine, theirs) in enumerate(zip(original, after)):
            if not isinstance(mine, (torch.Tensor, torch.Generator, np.ndarray, list, dict)) and mine != theirs:
                original[i] = theirs
        if len(original) != len(after):
            original[:] = after
    elif type(original) is tuple and type(after) is tuple:
        for mine, theirs in zip(original, after):
            write_back(mine, theirs)
    elif type(original) is dict and type(after) is dict:
        for key in list(original):
            if key not in after:
                del original[key]
        for key, theirs in after.items():
            if key in original and isinstance(original[key], (torch.Tensor, torch.Generator, np.ndarray, list, dict)):
                write_back(original[key], theirs)
            else:
                original[key] = theirs


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
